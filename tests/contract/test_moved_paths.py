"""robench 0.1's flat module paths still import, as the very modules of their new homes."""

import importlib

import pytest

import robench


@pytest.mark.parametrize("old", sorted(robench.MOVED))
def test_an_old_module_path_is_the_new_module(old):
    moved = importlib.import_module(f"robench.{old}")
    new = importlib.import_module(f"robench.{robench.MOVED[old]}")
    assert moved is new
    assert new.__spec__.name == new.__name__ == f"robench.{robench.MOVED[old]}"


def test_the_paths_plugin_authors_were_shown_keep_working(monkeypatch):
    from robench.learn.train import TorchClassifier
    from robench.run.runner import execute
    from robench.train import TorchClassifier as Old
    from robench.splitters import SourceExclusiveSplit
    from robench.data import SourceExclusiveSplit as New
    import robench.runner

    assert Old is TorchClassifier and SourceExclusiveSplit is New
    monkeypatch.setattr(robench.runner, "execute", None)  # patching the old name patches the module
    from robench.run import runner

    assert runner.execute is None
    monkeypatch.undo()
    assert runner.execute is execute


def test_an_unknown_old_name_is_still_an_import_error():
    with pytest.raises(ImportError):
        importlib.import_module("robench.no_such_module")
