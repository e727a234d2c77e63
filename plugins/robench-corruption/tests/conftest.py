"""Plugin tests: never load installed entry points; keep caches in tmp."""

import sys

import pytest

sys._robench_called_from_test = True


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "robench-cache"))
    from robench.data import cache as cache_mod
    monkeypatch.setattr(cache_mod, "_OVERRIDE", [])
    yield


@pytest.fixture
def registry():
    """Built-ins plus this plugin (registered as a module, as its entry point does)."""
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["robench_corruption"], load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)
