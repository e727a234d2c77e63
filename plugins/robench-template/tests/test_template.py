"""How a robench plugin tests itself: robench.testing's checks on a registry of this plugin alone.

Run from this folder with ``python -m pytest`` (installed or not). The registry is built with
``load_entrypoints=False``, so other plugins installed on the machine cannot interfere.
"""

import importlib.metadata

import pytest

from robench.plugins import make_registry
from robench.testing import check_model, parametrize_with_checks

PLUGIN_MODULE = "robench_template"  # CHANGE: your package name
MODEL = "template-cnn"  # CHANGE: your model's name

# Built when the tests are collected: parametrize_with_checks makes its tests from it.
REGISTRY = make_registry(modules=[PLUGIN_MODULE], load_entrypoints=False)


def test_model_is_registered_by_this_plugin():
    assert REGISTRY.get("models", MODEL).plugin == PLUGIN_MODULE
    assert REGISTRY.infos[PLUGIN_MODULE].status == "ok"


# One test per rule of the classifier contract, named like model[template-cnn]-predict-dtype,
# on small synthetic images (1x8x8 for a model that requires images, else tabular rows); the
# model is trained twice in all, when the first test needs it. A known gap goes in
# expected_failures={"rule": "why"} (the test is then an xfail until it is fixed).
@parametrize_with_checks([MODEL], REGISTRY, train={"max_epochs": 2})
def test_model_follows_the_contract(check):
    check()


# CHANGE: a model for flat rows needs no image_shape; drop this test or give it your shape.
def test_model_follows_the_contract_on_mnist_sized_images():
    check_model(MODEL, REGISTRY, image_shape=(1, 28, 28), train={"max_epochs": 2})


def test_model_learns_digits():
    check_model(MODEL, REGISTRY, dataset="digits", min_accuracy=0.8)


def test_installed_entry_point_loads():
    # Only meaningful once the plugin is pip-installed (`pip install -e .`).
    eps = [ep for ep in importlib.metadata.entry_points(group="robench")
           if ep.value == PLUGIN_MODULE]
    if not eps:
        pytest.skip(f"{PLUGIN_MODULE} is not installed; `pip install -e .` to test its entry point")
    registry = make_registry(load_entrypoints=True)
    assert registry.get("models", MODEL).plugin == eps[0].name
    assert registry.infos[eps[0].name].status == "ok"
