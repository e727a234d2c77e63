"""Test configuration: never load installed plugins; keep caches and databases in tmp."""

import sys

import pytest

# Honoured by robench.plugins: tests never pick up third-party entry points by accident.
sys._robench_called_from_test = True


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "robench-cache"
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(cache))
    from robench.data import cache as cache_mod
    monkeypatch.setattr(cache_mod, "_OVERRIDE", [])
    yield


@pytest.fixture
def tiny_registry():
    """A registry with the built-ins plus tests/plugins/tiny.py, installed process-wide."""
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)


@pytest.fixture
def store(tmp_path):
    from robench.storage.store import Store

    s = Store(tmp_path / "results.db")
    yield s
    s.close()
