"""How a robench plugin tests itself: robench.testing's checks on a registry of this plugin alone.

Run from this folder with ``python -m pytest`` (installed or not). The registry is built with
``load_entrypoints=False``, so other plugins installed on the machine cannot interfere.
"""

import importlib.metadata

import pytest

from robench.plugins import make_registry
from robench.testing import check_model

PLUGIN_MODULE = "robench_template"  # CHANGE: your package name
MODEL = "template-cnn"  # CHANGE: your model's name


@pytest.fixture(scope="module")
def registry():
    return make_registry(modules=[PLUGIN_MODULE], load_entrypoints=False)


def test_model_is_registered_by_this_plugin(registry):
    assert registry.get("models", MODEL).plugin == PLUGIN_MODULE
    assert registry.infos[PLUGIN_MODULE].status == "ok"


# CHANGE: a model for flat rows needs no image_shape (check_model then uses tabular data).
@pytest.mark.parametrize("image_shape", [(1, 8, 8), (1, 28, 28)])
def test_model_follows_the_contract(registry, image_shape):
    # Small synthetic images, two builds with the same seed; see robench.testing.check_model.
    check_model(MODEL, registry, image_shape=image_shape, train={"max_epochs": 2})


def test_model_learns_digits(registry):
    check_model(MODEL, registry, dataset="digits", min_accuracy=0.8)


def test_installed_entry_point_loads():
    # Only meaningful once the plugin is pip-installed (`pip install -e .`).
    eps = [ep for ep in importlib.metadata.entry_points(group="robench")
           if ep.value == PLUGIN_MODULE]
    if not eps:
        pytest.skip(f"{PLUGIN_MODULE} is not installed; `pip install -e .` to test its entry point")
    registry = make_registry(load_entrypoints=True)
    assert registry.get("models", MODEL).plugin == eps[0].name
    assert registry.infos[eps[0].name].status == "ok"
