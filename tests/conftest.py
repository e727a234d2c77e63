"""Test configuration: never load installed plugins; keep caches and databases in tmp."""

import os
import sys

import pytest

#: Set to run the tests marked ``@pytest.mark.slow(reason=...)``; otherwise they are skipped and
#: the summary lists each with its reason.
SLOW_TESTS = "ROBENCH_SLOW_TESTS"

# Honoured by robench.plugins: tests never pick up third-party entry points by accident.
sys._robench_called_from_test = True


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"slow(reason): a slow test (minutes on 2 cores); runs with {SLOW_TESTS}=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get(SLOW_TESTS):
        return
    for item in items:
        marker = item.get_closest_marker("slow")
        if marker is not None:
            why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "slow")
            item.add_marker(pytest.mark.skip(reason=f"{why}; set {SLOW_TESTS}=1"))


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


@pytest.fixture
def helped(tmp_path):
    """A database path and the registry of tests/plugins/helper_family.py (a metric that
    trains a helper model beside the one asked for)."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny", "tests.plugins.helper_family"],
                               load_entrypoints=False))
    yield tmp_path / "r.db"
    set_registry(None)
