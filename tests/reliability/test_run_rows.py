"""A run row never stays 'running' once its process is done with it."""

from __future__ import annotations

import pytest

from tests.helpers import run_config


def test_an_error_the_run_cannot_contain_still_finishes_its_row(tiny_registry, store,
                                                                 monkeypatch):
    from robench.run import runner
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(runner, "longest_first", broken)
    cfg = run_config(["tiny"], ["centroid"], ["kmeans"], ["rho"], registry=tiny_registry,
                     repeats=1, k=2)
    with pytest.raises(RuntimeError, match="a bug"):
        runner.execute(cfg, tiny_registry, store)
    assert [r["status"] for r in store.runs()] == ["failed"]
