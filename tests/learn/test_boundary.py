"""The model boundary: every array handed to a model is finite (robench invariant 7)."""

from __future__ import annotations

import numpy as np
import pytest

from robench.data.boundary import (NonFiniteError, NonFiniteModelInput, check_finite,
                              check_model_input, nonfinite_rows)
from robench.data import Dataset
from robench.specs import ModelSpec


class _Recorder:
    """A classifier that records every array it is handed."""

    has_features = True

    def __init__(self):
        self.seen = []

    def fit(self, X, y, X_val=None, y_val=None):
        self.seen.append(("fit", X))
        return self

    def predict(self, X):
        self.seen.append(("predict", X))
        return np.zeros(len(X), dtype=np.int64)

    def features(self, X):
        self.seen.append(("features", X))
        return np.zeros((len(X), 2), dtype=np.float32)


def _dataset_with_nan_row(row=3):
    rng = np.random.default_rng(0)
    ds = Dataset("tiny", rng.random((40, 4)), np.repeat([0, 1], 20))
    ds.X[row, 1] = np.nan  # after validation: an upstream component broke the rows
    return ds


def test_nonfinite_rows_counts_rows_not_values():
    a = np.zeros((5, 2, 2))
    a[1, 0, 0] = np.nan
    a[1, 1, 1] = np.inf
    a[4, 0, 1] = -np.inf
    assert nonfinite_rows(a) == 2
    assert nonfinite_rows(np.zeros((3, 2), dtype=np.int64)) == 0
    assert nonfinite_rows(np.zeros((0, 4))) == 0


def test_check_model_input_names_the_model_and_the_rows():
    X = np.ones((10, 3))
    assert check_model_input(X, "logreg", "test rows") is X
    X[[2, 7], 0] = np.nan
    with pytest.raises(NonFiniteModelInput,
                       match=r"model 'logreg' was about to receive images of corruption "
                             r"'spatter' at severity 1 of which 2 of 10 rows hold NaN or inf"):
        check_model_input(X, "logreg", "images of corruption 'spatter' at severity 1")
    # A model-input refusal is a NonFiniteError like a refused corruption.
    with pytest.raises(NonFiniteError, match=r"attack 'fgsm': 2 of 10 images"):
        check_finite(X, "attack 'fgsm'")


def test_fit_and_score_refuses_nan_rows_before_the_model_sees_them():
    from robench.run.trials import fit_and_score

    clf = _Recorder()
    spec = ModelSpec(name="recorder", build=lambda ctx: clf, description="records inputs")
    ds = _dataset_with_nan_row()
    idx = np.arange(40)
    with pytest.raises(NonFiniteModelInput, match=r"model 'recorder'.*data set 'tiny'.*1 of 40"):
        fit_and_score(spec, ds, idx[:30], idx[30:35], idx[35:], seed=0, train_budget={})
    assert clf.seen == []


def test_features_refuses_nan_rows():
    from robench.learn.features import features

    clf = _Recorder()
    X = np.zeros((6, 4), dtype=np.float32)
    X[5, 0] = np.inf
    with pytest.raises(NonFiniteModelInput, match=r"rows whose features are read.*1 of 6"):
        features(clf, X)
    assert clf.seen == []
    assert features(clf, X[:5]).shape == (5, 2)


def test_corruption_accuracies_refuse_nonfinite_sets(monkeypatch):
    """Even a set that slipped past its producer's check never reaches the model."""
    from types import SimpleNamespace

    import robench.data.corruptions as corr
    from robench.families.purity_ratio import protocol as pr

    ds = Dataset("img", np.random.default_rng(1).random((20, 4)), np.repeat([0, 1], 10),
                 image_shape=(1, 2, 2))

    def fake_sets(images, specs, severities, seed, **kw):
        bad = images.copy()
        bad[0] = np.nan
        return {(sp.name, s): bad for sp in specs for s in severities}

    monkeypatch.setattr(corr, "corrupted_sets", fake_sets)
    sp = SimpleNamespace(name="broken", imagenet_c=False)
    env = SimpleNamespace(registry=SimpleNamespace(get=lambda kind, name: sp))
    knobs = {"corruption_cap": 10, "corruptions": ["broken"], "severities": [1]}
    clf = _Recorder()
    with pytest.raises(NonFiniteModelInput,
                       match=r"model 'm' .*corruption 'broken' at severity 1 of which 1 of 10"):
        pr._corruption_accuracies(clf, ds, np.arange(20), {"seed": 0, "model": "m"}, env, knobs)
    assert [k for k, _ in clf.seen] == ["predict"]  # the clean rows only


def test_fit_and_score_checks_a_data_sets_rows_once_per_process(monkeypatch):
    """The whole-data-set finiteness scan is fixed per-trial work: paid at a data set's first
    trial in a process, not again for the same rows; a data set with other rows (another
    object, or its rows replaced) is checked again."""
    import robench.run.trials as trials

    calls = []
    real = trials.check_model_input
    monkeypatch.setattr(trials, "check_model_input",
                        lambda X, *a, **k: calls.append(len(X)) or real(X, *a, **k))
    spec = ModelSpec(name="recorder", build=lambda ctx: _Recorder(), description="records")
    rng = np.random.default_rng(0)
    ds = Dataset("tiny", rng.random((40, 4)), np.repeat([0, 1], 20))
    idx = np.arange(40)
    for seed in range(3):
        trials.fit_and_score(spec, ds, idx[:30], idx[30:35], idx[35:], seed=seed, train_budget={})
    assert calls == [40]
    other = Dataset("tiny", rng.random((40, 4)), np.repeat([0, 1], 20))
    trials.fit_and_score(spec, other, idx[:30], idx[30:35], idx[35:], seed=0, train_budget={})
    assert calls == [40, 40]
    # a data set whose rows were replaced since its check is checked again (and refused)
    ds.raw = np.where(np.arange(40)[:, None] == 3, np.nan, ds.raw).astype(np.float32)
    with pytest.raises(NonFiniteModelInput):
        trials.fit_and_score(spec, ds, idx[:30], idx[30:35], idx[35:], seed=0, train_budget={})
