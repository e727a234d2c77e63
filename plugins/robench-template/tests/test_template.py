"""How a robench plugin tests itself: robench.testing's checks on a registry of this plugin alone.

Run from this folder with ``python -m pytest`` (installed or not). The registry is built with
``load_entrypoints=False``, so other plugins installed on the machine cannot interfere.
"""

import importlib.metadata

import pytest

from robench.plugins import make_registry
from robench.testing import check_metric, check_model, parametrize_with_checks

PLUGIN_MODULE = "robench_template"  # CHANGE: your package name
MODEL = "template-cnn"  # CHANGE: your model's name
METRIC = "template-gap"  # CHANGE: your metric's name (drop the metric tests without one)

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


def test_metric_is_registered_by_this_plugin_from_its_module():
    from robench_template import metric  # CHANGE: your package name

    spec = REGISTRY.get("metrics", METRIC)
    assert spec.plugin == PLUGIN_MODULE
    assert (spec.version, spec.definition, spec.aggregate) == (
        metric.VERSION, metric.DEFINITION, metric.aggregate)


def test_metric_follows_the_contract():
    # A tiny real run (digits, 2 repeats, the svm: the metric needs no feature space), then
    # the aggregate on its trials, on failed trials and on an empty group.
    check_metric(METRIC, REGISTRY)


def test_metric_value_is_derived_by_hand():
    from robench_template.metric import aggregate  # CHANGE: your package name

    group = {"dataset": "d", "model": "m", "clusterer": ""}
    trials = [{"status": "ok", "repeat": r, "train_accuracy": tr, "accuracy": te}
              for r, (tr, te) in enumerate([(1.0, 0.9), (0.9, 0.8), (0.95, 0.65)])]
    trials.append({"status": "failed", "repeat": 3, "error": "boom\ntraceback"})
    (score,) = aggregate(group, trials)
    # gaps 0.1, 0.1, 0.3: mean 1/6, sample sd 0.11547, t(0.975, 2) = 4.3027
    assert score.value == pytest.approx(1 / 6)
    half = 4.302652729911275 * 0.1154700538 / 3 ** 0.5
    assert (score.ci_low, score.ci_high) == pytest.approx((1 / 6 - half, 1 / 6 + half))
    assert score.n == 3 and score.details["n_failed"] == 1 and not score.higher_is_better
    (none,) = aggregate(group, trials[3:])
    assert none.value is None and none.details == {"error": "boom"}


def test_installed_entry_point_loads():
    # Only meaningful once the plugin is pip-installed (`pip install -e .`).
    eps = [ep for ep in importlib.metadata.entry_points(group="robench")
           if ep.value == PLUGIN_MODULE]
    if not eps:
        pytest.skip(f"{PLUGIN_MODULE} is not installed; `pip install -e .` to test its entry point")
    registry = make_registry(load_entrypoints=True)
    assert registry.get("models", MODEL).plugin == eps[0].name
    assert registry.infos[eps[0].name].status == "ok"
