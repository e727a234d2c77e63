"""Fixtures of the presentation tests."""

import pytest


@pytest.fixture
def helped(tmp_path):
    """A database path and the registry of tests/plugins/helper_family.py (a metric that
    trains a helper model beside the one asked for)."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny", "tests.plugins.helper_family"],
                               load_entrypoints=False))
    yield tmp_path / "r.db"
    set_registry(None)
