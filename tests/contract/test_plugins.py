"""Plugin loading: built-ins, a broken entry point, duplicates, misspelt hooks, unknown names."""

import importlib.metadata
import types

import pytest

from robench import hookimpl
from robench import plugins as plugins_mod
from robench.plugins import (
    PluginError,
    Registry,
    UnknownComponentError,
    make_plugin_manager,
    make_registry,
)
from robench.specs import DatasetSpec, ModelSpec


def test_builtins_are_registered_through_the_manager():
    reg = make_registry(load_entrypoints=False)
    assert reg.names("datasets") == ["digits", "mnist-5k", "synthetic-sources"]
    assert {"cnn-1", "cnn-2", "cnn-3", "mlp", "svm", "lenet", "bayesian-lenet"} <= set(
        reg.names("models"))
    assert {"kmeans", "multicut", "oracle"} <= set(reg.names("clusterers"))
    assert "gaussian-noise" in reg.names("corruptions")
    assert "rho" in reg.names("metrics")
    assert {"local", "process"} <= set(reg.names("executors"))
    assert reg.get("datasets", "digits").plugin == "robench.builtin.datasets"
    assert all(i.status == "ok" for i in reg.infos.values())


class _FakeEP:
    def __init__(self, name, target):
        self.name, self.target, self.dist = name, target, types.SimpleNamespace(version="9.9")

    def load(self):
        if isinstance(self.target, BaseException):
            raise self.target
        return self.target


class GoodPlugin:
    @hookimpl
    def register_models(self, register):
        register(ModelSpec("good-model", lambda ctx: None, "from an entry point"))


def test_broken_entry_point_is_reported_and_everything_else_loads(monkeypatch):
    eps = [_FakeEP("broken", ImportError("No module named 'missing_dep'")),
           _FakeEP("good", GoodPlugin())]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: eps if group == "robench" else [])
    pm, infos = make_plugin_manager(load_entrypoints=True)
    reg = Registry(pm, infos)
    assert infos["broken"].status == "failed"
    assert "missing_dep" in infos["broken"].error
    assert infos["good"].status == "ok" and infos["good"].version == "9.9"
    assert "good-model" in reg.names("models")
    assert "digits" in reg.names("datasets")


def test_tests_do_not_load_installed_entry_points(monkeypatch):
    called = []
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: called.append(group) or [])
    make_plugin_manager()
    assert called == []


class DupPlugin:
    @hookimpl
    def register_datasets(self, register):
        register(DatasetSpec("digits", lambda: None, "a second 'digits'"))


class DupModelPlugin:
    @hookimpl
    def register_datasets(self, register):
        register(DatasetSpec("dup-own-data", lambda: None, "registered before the duplicate"))

    @hookimpl
    def register_models(self, register):
        register(ModelSpec("mlp", lambda ctx: None, "a second 'mlp'"))


@pytest.mark.parametrize("plugin, name, kind", [(DupPlugin, "digits", "datasets"),
                                                (DupModelPlugin, "mlp", "models")])
def test_a_duplicate_name_disables_only_the_later_plugin_naming_both(plugin, name, kind):
    # issue 16, defect 8: it used to disable all of robench (plugins, list, run exit 2)
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(plugin(), name="my-dup-plugin")
    reg = Registry(pm, infos)
    info = reg.infos["my-dup-plugin"]
    assert info.status == "failed" and info.components == {}
    assert f"'{name}'" in info.error and "my-dup-plugin" in info.error
    assert reg.get(kind, name).plugin.startswith("robench.")  # the first one stays
    assert "dup-own-data" not in reg.names("datasets")
    assert "digits" in reg.names("datasets") and "mlp" in reg.names("models")


class Misspelt:
    @hookimpl
    def register_model(self, register):  # missing "s"
        pass


def test_misspelt_hook_is_caught():
    pm, _ = make_plugin_manager(load_entrypoints=False)
    pm.register(Misspelt(), name="typo")
    with pytest.raises(PluginError, match="register_model"):
        plugins_mod.check_hooks(pm)


class RaisingHook:
    @hookimpl
    def register_clusterers(self, register):
        raise RuntimeError("cannot start")


def test_a_hook_that_raises_disables_only_its_plugin():
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(RaisingHook(), name="raiser")
    reg = Registry(pm, infos)
    assert reg.infos["raiser"].status == "failed"
    assert "cannot start" in reg.infos["raiser"].error
    assert "kmeans" in reg.names("clusterers")


class WrongType:
    @hookimpl
    def register_metrics(self, register):
        register("not a spec")


def test_registering_the_wrong_type_disables_the_plugin_saying_what_was_expected():
    # issue 30: a wrong registration disabled every command; now only its plugin
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(WrongType(), name="wrong")
    reg = Registry(pm, infos)
    assert reg.infos["wrong"].status == "failed"
    assert "registered 'not a spec' with register_metrics; expected a MetricSpec" in (
        reg.infos["wrong"].error)
    assert "rho" in reg.names("metrics")


def test_unknown_name_lists_known_names_and_closest_match():
    reg = make_registry(load_entrypoints=False)
    with pytest.raises(UnknownComponentError) as exc:
        reg.get("models", "cnn2")
    msg = str(exc.value)
    assert "Did you mean 'cnn-2'?" in msg
    assert "cnn-1, cnn-2, cnn-3, lenet, mlp, svm" in msg


@pytest.mark.parametrize("bad", ["Digits", "my_data", "", "-x", "a b"])
def test_component_names_are_slugs(bad):
    with pytest.raises(ValueError, match="slug"):
        DatasetSpec(bad, lambda: None, "bad")


def test_registry_recipe_rebuilds_the_same_registry():
    reg = make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False)
    again = make_registry(**reg.recipe)
    assert again.names("models") == reg.names("models")
    assert "tiny" in again.names("datasets")


def test_component_version_combines_plugin_and_spec_versions():
    reg = make_registry(load_entrypoints=False)
    import robench

    assert reg.component_version("models", "svm") == f"{robench.__version__}/1"
    assert reg.component_version("models", "mlp") == f"{robench.__version__}/2"


def test_entry_point_with_misspelt_hook_is_disabled_not_fatal(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [_FakeEP("typo", Misspelt())] if group == "robench" else [])
    pm, infos = make_plugin_manager(load_entrypoints=True)
    assert infos["typo"].status == "failed" and "register_model" in infos["typo"].error
    assert "digits" in Registry(pm, infos).names("datasets")


class HalfThenRaise:
    @hookimpl
    def register_models(self, register):
        register(ModelSpec("half", lambda ctx: None, "registered before the hook raised"))
        raise RuntimeError("broke half way")


def test_a_plugin_whose_hook_raised_registers_nothing():
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(HalfThenRaise(), name="half-plugin")
    reg = Registry(pm, infos)
    assert "half" not in reg.names("models")
    assert reg.infos["half-plugin"].status == "failed" and not reg.infos["half-plugin"].components


def test_misspelt_hook_message_lists_only_real_hooks():
    pm, _ = make_plugin_manager(load_entrypoints=False)
    pm.register(Misspelt(), name="typo")
    with pytest.raises(PluginError) as exc:
        plugins_mod.check_hooks(pm)
    known = str(exc.value).split("Known hooks:")[1]
    assert "register_models" in known and "register_model," not in known


def test_a_module_also_installed_as_entry_point_is_registered_once(monkeypatch):
    import tests.plugins.tiny as tiny_mod

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [_FakeEP("tiny-ep", tiny_mod)] if group == "robench" else [])
    reg = make_registry(modules=["tests.plugins.tiny"], load_entrypoints=True)
    assert "tiny" in reg.names("datasets")


class ExitingHook:
    @hookimpl
    def register_models(self, register):
        raise SystemExit(7)


def test_system_exit_from_a_plugin_import_or_hook_disables_that_plugin_only(monkeypatch):
    # issue 16, defect 7: SystemExit at import made every command exit 7 with no output
    eps = [_FakeEP("exits-on-import", SystemExit(7)), _FakeEP("exits-in-hook", ExitingHook()),
           _FakeEP("good", GoodPlugin())]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: eps if group == "robench" else [])
    pm, infos = make_plugin_manager(load_entrypoints=True)
    reg = Registry(pm, infos)
    assert reg.infos["exits-on-import"].status == "failed"
    assert "SystemExit" in reg.infos["exits-on-import"].error
    assert reg.infos["exits-in-hook"].status == "failed"
    assert "register_models raised SystemExit" in reg.infos["exits-in-hook"].error
    assert reg.infos["good"].status == "ok" and "digits" in reg.names("datasets")
