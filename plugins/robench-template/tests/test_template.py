"""How a robench plugin tests itself: a registry built from this module alone, a tiny fit.

Run from this folder with ``python -m pytest`` (installed or not). The registry is built with
``load_entrypoints=False``, so other plugins installed on the machine cannot interfere.
"""

import importlib.metadata

import numpy as np
import pytest

from robench.plugins import make_registry
from robench.specs import ModelContext

PLUGIN_MODULE = "robench_template"  # CHANGE: your package name
MODEL = "logreg"  # CHANGE: your model's name


@pytest.fixture(scope="module")
def registry():
    return make_registry(modules=[PLUGIN_MODULE], load_entrypoints=False)


@pytest.fixture(scope="module")
def digits(registry):
    # The built-in `digits` data set (1,797 8x8 images, offline); built-ins are always there.
    return registry.get("datasets", "digits").load()


def test_model_is_registered_by_this_plugin(registry):
    spec = registry.get("models", MODEL)
    assert spec.plugin == PLUGIN_MODULE
    assert spec.description
    assert registry.infos[PLUGIN_MODULE].status == "ok"
    assert registry.infos[PLUGIN_MODULE].components == {"models": [MODEL]}


def test_model_trains_and_predicts_on_digits(registry, digits):
    rng = np.random.default_rng(0)
    idx = rng.permutation(digits.n_samples)
    train, val, test = idx[:1000], idx[1000:1200], idx[1200:]
    ctx = ModelContext(digits.n_features, digits.n_classes, digits.image_shape, seed=0)
    model = registry.get("models", MODEL).build(ctx)
    X, y = digits.X, digits.y
    assert model.fit(X[train], y[train], X[val], y[val]) is model
    pred = model.predict(X[test])
    assert pred.shape == (len(test),) and pred.dtype == np.int64
    assert (pred == y[test]).mean() > 0.85
    # The attributes robench stores with every trial.
    assert isinstance(model.history_, list)
    assert model.n_epochs_ >= 0 and model.best_epoch_ >= 0
    assert 0.0 <= model.train_accuracy_ <= 1.0 and 0.0 <= model.val_accuracy_ <= 1.0
    if model.has_features:
        assert model.features(X[test]).shape[0] == len(test)


def test_same_seed_same_predictions(registry, digits):
    ctx = ModelContext(digits.n_features, digits.n_classes, digits.image_shape, seed=3)
    X, y = digits.X[:600], digits.y[:600]
    preds = [registry.get("models", MODEL).build(ctx).fit(X[:400], y[:400], X[400:500], y[400:500])
             .predict(X[500:]) for _ in range(2)]
    np.testing.assert_array_equal(preds[0], preds[1])


def test_installed_entry_point_loads():
    # Only meaningful once the plugin is pip-installed (`pip install -e .`).
    eps = [ep for ep in importlib.metadata.entry_points(group="robench")
           if ep.value == PLUGIN_MODULE]
    if not eps:
        pytest.skip(f"{PLUGIN_MODULE} is not installed; `pip install -e .` to test its entry point")
    registry = make_registry(load_entrypoints=True)
    assert registry.get("models", MODEL).plugin == eps[0].name
    assert registry.infos[eps[0].name].status == "ok"
