"""robench.testing: every built-in passes the kit, and every check catches a broken component."""

import dataclasses
import functools
import os
import subprocess
import sys
import unittest
from pathlib import Path

import numpy as np
import pytest

import robench.testing as kit
import robench.testing.models as kit_models
from robench import hookimpl
from robench.families.source_aware.rho import aggregate as aggregate_rho
from robench.data import Dataset
from robench.plugins import Registry, make_plugin_manager, make_registry
from robench.specs import (ClustererSpec, DatasetSpec, MetricSpec, ModelContext, ModelSpec,
                           Score)
from robench.testing import (ConformanceError, check_clusterer, check_dataset, check_metric,
                             check_model, synthetic_dataset)

REPO = Path(__file__).resolve().parents[2]
BUILTINS = make_registry(load_entrypoints=False)

# --- every built-in passes -------------------------------------------------------------------

#: The smallest budget: the kit checks the contract, not accuracy.
ONE_EPOCH = {"max_epochs": 1, "patience": 1}
#: Options per built-in model; every other model gets {"train": ONE_EPOCH}. The paper CNNs
#: only take 1x28x28 images: 10 per class keep the big Bayesian ones to a few seconds.
PAPER_CNN = {"train": ONE_EPOCH, "dataset": synthetic_dataset(n_per_class=10,
                                                             image_shape=(1, 28, 28))}
MODEL_OPTIONS = {name: PAPER_CNN for name in (
    "lenet", "alexnet", "3conv3fc", "bayesian-lenet", "bayesian-alexnet", "bayesian-3conv3fc")}
#: Knobs per built-in metric, as `robench run --set` takes them, keeping each run small.
METRIC_SETTINGS = {
    "adequacy": {"adequacy": {"sizes": [100], "repeats": 1}},
    "shifted-cv": {"shifted_cv": {"folds": 2, "vae_epochs": 1, "vae_max_train": 300,
                                  "max_points": 100}},
    "purity-ratio": {"train": ONE_EPOCH,
                     "clusterability": {"zoo": [], "attacks": [], "corruptions": [],
                                        "multicut_cap": 200, "overlap_cap": 200,
                                        "join_train_cap": 200}},
    "coverage": {"train": ONE_EPOCH, "coverage": {"repeats": 1, "decoder_epochs": 0,
                                                  "sizes": [50], "shift_mc": 100}},
}


#: Built-in models whose check costs 6-10 s on 2 cores (20 s when the cores are shared) while
#: a cheaper built-in runs the same code; they run with ROBENCH_SLOW_TESTS=1, and the test
#: summary lists them as skipped, with why.
SLOW = {
    "bayesian-alexnet": "the Bayesian paper-CNN code of bayesian-lenet (checked) in a bigger "
                        "network",
    "bayesian-3conv3fc": "the Bayesian paper-CNN code of bayesian-lenet (checked) with "
                         "1000-1000 fc layers",
    "3conv3fc": "the PaperCNN code of lenet and alexnet (checked) with 1000-1000 fc layers",
}


def builtins(kind):
    """Return the built-in names of a kind as pytest params, the slow ones marked with why."""
    def marked(n):
        return pytest.param(n, marks=pytest.mark.slow(reason=f"{n} is slow (6-10 s): {SLOW[n]}"))

    return [marked(n) if n in SLOW else n for n in BUILTINS.names(kind)]


def test_options_name_registered_components():
    assert set(MODEL_OPTIONS) <= set(BUILTINS.names("models"))
    assert set(METRIC_SETTINGS) <= set(BUILTINS.names("metrics"))
    assert set(SLOW) <= set(BUILTINS.names("models"))


@pytest.mark.parametrize("name", builtins("models"))
def test_builtin_model_passes(name):
    report = check_model(name, BUILTINS, **MODEL_OPTIONS.get(name, {"train": ONE_EPOCH}))
    assert {"never-handed-test-rows", "predict", "deterministic",
            "unused-train-knobs", "predict-does-not-learn"} <= set(report.passed)
    if BUILTINS.get("models", name).has_features is False:
        assert "features" in report.skipped
    else:
        assert {"features", "features-head"} <= set(report.passed)


@pytest.mark.parametrize("name", builtins("datasets"))
def test_builtin_dataset_passes(name):
    report = check_dataset(name, BUILTINS)
    assert {"load", "arrays", "deterministic"} <= set(report.passed)


@pytest.mark.parametrize("name", builtins("clusterers"))
def test_builtin_clusterer_passes(name):
    report = check_clusterer(name, BUILTINS)
    assert {"labels", "deterministic", "degenerate-input"} <= set(report.passed)


@pytest.mark.parametrize("name", builtins("metrics"))
def test_builtin_metric_passes(name):
    report = check_metric(name, BUILTINS, settings=METRIC_SETTINGS.get(name))
    assert {"run", "scores", "aggregate-pure", "failed-trials", "empty-group"} <= set(
        report.passed)


def test_importing_the_kit_is_light():
    code = ("import sys, robench.testing; "
            "heavy = {'torch', 'sklearn'} & set(sys.modules); assert not heavy, heavy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- models: each check catches a broken one -------------------------------------------------


class Centroid:
    """A complete, correct classifier: nearest class mean; features are negated distances."""

    has_features = True

    def __init__(self, ctx):
        self.ctx = ctx

    def fit(self, X, y, X_val, y_val):
        self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
        self.history_, self.n_epochs_, self.best_epoch_ = [], 0, 0
        # not self.predict: the subclasses below break predict, and only predict
        self.train_accuracy_ = float((self._classify(X) == y).mean())
        self.val_accuracy_ = float((self._classify(X_val) == y_val).mean())
        return self

    def _distances(self, X):
        return ((X[:, None, :] - self.means_[None]) ** 2).sum(-1)

    def _classify(self, X):
        return self._distances(X).argmin(1).astype(np.int64)

    def predict(self, X):
        return self._classify(X)

    def features(self, X):
        return -self._distances(X)


def model(cls, **kw):
    return ModelSpec(kw.pop("name", "broken"), cls, "a model for the kit's tests", **kw)


def fails(check, fn, *args, match=None, **kw):
    """Assert fn(*args, **kw) raises ConformanceError for ``check``; return the error."""
    with pytest.raises(ConformanceError) as info:
        fn(*args, **kw)
    assert info.value.check == check, str(info.value)
    assert isinstance(info.value, AssertionError)
    if match:
        assert match in str(info.value), str(info.value)
    return info.value


def test_correct_model_passes_and_reports_what_it_checked():
    report = check_model(model(Centroid, has_features=True))
    assert report.component == "model 'broken'"
    for check in ("spec", "build", "unused-train-knobs", "never-handed-test-rows",
                  "fit-returns-self", "fitted-attributes", "predict", "has-features",
                  "features", "predict-does-not-learn", "deterministic", "build-fresh"):
        assert check in report.passed
    assert "features-head" in report.skipped and "predict-proba" in report.skipped
    assert "skipped features-head" in str(report)


def test_wrong_dtype():
    class Float(Centroid):
        def predict(self, X):
            return super().predict(X).astype(np.float64)

    err = fails("predict-dtype", check_model, model(Float), match="float64")
    assert "model 'broken'" in str(err) and "int64" in err.fix


def test_wrong_length():
    class Short(Centroid):
        def predict(self, X):
            return super().predict(X)[:-1]

    fails("predict-shape", check_model, model(Short))


def test_nan_predictions():
    class NaN(Centroid):
        def predict(self, X):
            out = super().predict(X).astype(float)
            out[0] = np.nan
            return out

    fails("predict-finite", check_model, model(NaN), match="NaN")


def test_classes_out_of_range():
    class OneBased(Centroid):
        def predict(self, X):
            return super().predict(X) + 1

    fails("predict-range", check_model, model(OneBased), match="0..2")


def test_non_deterministic_model():
    class Unseeded(Centroid):
        def predict(self, X):
            return np.random.default_rng().integers(0, self.ctx.n_classes, len(X))

    fails("deterministic", check_model, model(Unseeded), match="ctx.seed")


def test_model_that_learns_from_the_rows_it_predicts():
    class PeeksAtTest(Centroid):
        """Transductive: moves its class means towards every batch it predicts."""

        def predict(self, X):
            pred = super().predict(X)
            for c in np.unique(pred):
                self.means_[c] = 0.5 * self.means_[c] + 0.5 * X[pred == c].mean(0)
            return pred

    fails("predict-does-not-learn", check_model, model(PeeksAtTest), match="means_")


def test_fit_path_that_hands_test_rows_to_the_model(monkeypatch):
    real = kit_models._robench_fit_path()

    def early_stops_on_test(spec, dataset, train_idx, val_idx, test_idx, **kw):
        return real(spec, dataset, train_idx, np.concatenate([val_idx, test_idx]), test_idx,
                    **kw)

    monkeypatch.setattr(kit_models, "_robench_fit_path", lambda: early_stops_on_test)
    fails("never-handed-test-rows", check_model, model(Centroid), match="24 of them test rows")


def test_fit_path_that_hands_views_of_the_data(monkeypatch):
    def with_views(spec, dataset, train_idx, val_idx, test_idx, *, seed, train_budget):
        ctx = ModelContext(dataset.n_features, dataset.n_classes, None, seed, train_budget)
        X, y = dataset.X, dataset.y
        # slices are views: X.base would expose every row, test rows included
        spec.build(ctx).fit(X[:60], y[:60], X[60:80], y[60:80])

    monkeypatch.setattr(kit_models, "_robench_fit_path", lambda: with_views)
    fails("fit-inputs-are-copies", check_model, model(Centroid), match="X.base")


def test_build_that_spreads_ctx_train_into_torch_classifier():
    def build(ctx):
        from robench.learn.train import DEFAULT_TRAIN, MLP, TorchClassifier

        module = functools.partial(MLP, ctx.n_features, ctx.n_classes, hidden=(8,))
        return TorchClassifier(module, seed=ctx.seed, **{**DEFAULT_TRAIN, **ctx.train})

    err = fails("unused-train-knobs", check_model, model(build), train={"max_epochs": 1},
                match="mc_samples")
    assert "from_context" in err.fix


def test_model_without_fitted_attributes():
    class Bare(Centroid):
        def fit(self, X, y, X_val, y_val):
            self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
            return self

    fails("fitted-attributes", check_model, model(Bare), match="history_")


def test_fit_that_does_not_return_self():
    class ReturnsNone(Centroid):
        def fit(self, X, y, X_val, y_val):
            super().fit(X, y, X_val, y_val)

    fails("fit-returns-self", check_model, model(ReturnsNone))


def test_build_without_predict():
    class NoPredict:
        def __init__(self, ctx):
            pass

        def fit(self, X, y, X_val, y_val):
            return self

    fails("build", check_model, model(NoPredict), match="no predict")


def test_build_that_returns_the_same_object_twice():
    shared = {}

    def build(ctx):
        return shared.setdefault("model", Centroid(ctx))

    fails("build-fresh", check_model, model(build))


def test_has_features_disagrees_with_the_spec():
    fails("has-features", check_model, model(Centroid, has_features=False))


def test_features_with_nan():
    class NaNFeatures(Centroid):
        def features(self, X):
            Z = super().features(X)
            Z[:, 0] = np.nan
            return Z

    fails("features", check_model, model(NaNFeatures), match="NaN")


def test_model_that_cannot_fit_names_the_error():
    class Crash(Centroid):
        def fit(self, X, y, X_val, y_val):
            raise RuntimeError("out of coffee")

    fails("fit", check_model, model(Crash), match="RuntimeError: out of coffee")


def test_min_accuracy():
    class Constant(Centroid):
        def predict(self, X):
            return np.zeros(len(X), dtype=np.int64)

    fails("accuracy", check_model, model(Constant), min_accuracy=0.9)


def test_torch_head_must_map_features_to_logits():
    def build(ctx):
        from torch import nn

        from robench.learn.train import MLP, TorchClassifier

        def module(ctx):
            # forward does not go through head, whose width does not match the features
            net = MLP(ctx.n_features, ctx.n_classes, hidden=(8,))
            net.head = nn.Linear(4, ctx.n_classes)
            net.forward = lambda x: net.body(x)[:, :ctx.n_classes]
            return net

        return TorchClassifier.from_context(ctx, module)

    fails("features-head", check_model, model(build), train=ONE_EPOCH)


# --- data sets -------------------------------------------------------------------------------


def dataset(load, **kw):
    kw.setdefault("has_sources", True)  # synthetic_dataset has sources
    return DatasetSpec(kw.pop("name", "blobs"), load, "a data set for the kit's tests", **kw)


def blobs(**kw):
    return synthetic_dataset(name="blobs", **kw)


def test_correct_dataset_passes():
    report = check_dataset(dataset(lambda: blobs()))
    assert "sources" in report.passed and "image-shape" in report.skipped
    check_dataset(dataset(lambda: blobs(image_shape=(1, 4, 4)), is_image=True,
                          image_shape=(1, 4, 4)))


def test_load_must_return_a_dataset():
    fails("load", check_dataset, dataset(lambda: (blobs().X, blobs().y)), match="tuple")


def test_dataset_named_otherwise():
    fails("load", check_dataset, dataset(lambda: synthetic_dataset(name="other")),
          match="'other'")


def test_dataset_changed_after_construction():
    def load():
        ds = blobs()
        ds.X[0, 0] = np.nan
        return ds

    fails("arrays", check_dataset, dataset(load), match="NaN")


def test_non_deterministic_load():
    fails("deterministic", check_dataset,
          dataset(lambda: blobs(seed=int(np.random.default_rng().integers(1 << 30)))))


def test_has_sources_without_sources():
    def load():
        ds = blobs()
        return Dataset("blobs", ds.X, ds.y)

    fails("sources", check_dataset, dataset(load, has_sources=True), match="no sources")
    fails("sources", check_dataset, dataset(lambda: blobs(), has_sources=False),
          match="has_sources=False")


def test_a_class_with_a_single_source():
    fails("sources", check_dataset, dataset(lambda: blobs(n_sources=1), has_sources=True),
          match="fewer than 2")


def test_image_shape_differs_from_the_spec():
    fails("image-shape", check_dataset, dataset(lambda: blobs(image_shape=(1, 4, 4)),
                                                is_image=True, image_shape=(1, 2, 8)))
    fails("image-shape", check_dataset, dataset(lambda: blobs(image_shape=(1, 4, 4))))


def test_images_out_of_range():
    def load():
        ds = blobs(image_shape=(1, 4, 4))
        return Dataset("blobs", ds.X * 255, ds.y, sources=ds.sources, image_shape=(1, 4, 4))

    fails("image-range", check_dataset, dataset(load, is_image=True),
          match="[0, 1]")


# --- clusterers ------------------------------------------------------------------------------


def kmeans(Z, k, *, seed, true_sources=None):
    from sklearn.cluster import KMeans

    if len(Z) < k:
        raise ValueError(f"cannot make {k} clusters of {len(Z)} rows")
    return KMeans(n_clusters=k, n_init=2, random_state=seed).fit_predict(Z)


def clusterer(fn, **kw):
    return ClustererSpec("broken", fn, "a clusterer for the kit's tests", **kw)


def test_correct_clusterer_passes():
    report = check_clusterer(clusterer(kmeans))
    assert "requires-true-sources" in report.skipped


def test_labels_out_of_range():
    fails("labels", check_clusterer,
          clusterer(lambda Z, k, seed, true_sources=None: kmeans(Z, k, seed=seed) + 1),
          match="k=3")


def test_labels_of_the_wrong_length():
    fails("labels", check_clusterer,
          clusterer(lambda Z, k, seed, true_sources=None: kmeans(Z, k, seed=seed)[1:]))


def test_float_labels():
    fails("labels", check_clusterer,
          clusterer(lambda Z, k, seed, true_sources=None: kmeans(Z, k, seed=seed) * 1.0),
          match="float64")


def test_unseeded_clusterer():
    fails("deterministic", check_clusterer, clusterer(
        lambda Z, k, seed, true_sources=None: np.random.default_rng().integers(0, k, len(Z))))


def test_requires_true_sources_but_runs_without_them():
    def uses_them_if_given(Z, k, *, seed, true_sources=None):
        return kmeans(Z, k, seed=seed) if true_sources is None else np.asarray(true_sources)

    fails("requires-true-sources", check_clusterer,
          clusterer(uses_them_if_given, requires_true_sources=True))
    # the oracle-style refusal passes
    def oracle(Z, k, *, seed, true_sources=None):
        if true_sources is None:
            raise ValueError("needs true source ids")
        return np.unique(true_sources, return_inverse=True)[1]

    assert "requires-true-sources" in check_clusterer(
        clusterer(oracle, requires_true_sources=True)).passed


def test_degenerate_input_must_fail_with_a_value_error():
    def crashes(Z, k, *, seed, true_sources=None):
        if len(np.unique(Z, axis=0)) < k:
            raise IndexError("list index out of range")
        return kmeans(Z, k, seed=seed)

    fails("degenerate-input", check_clusterer, clusterer(crashes), match="IndexError")


# --- metrics ---------------------------------------------------------------------------------


def metric_registry(aggregate, **kw):
    """Return built-ins + tests/plugins/tiny.py + one metric 'broken' computed by ``aggregate``."""
    from tests.plugins import tiny

    spec = MetricSpec(name="broken", description="a metric for the kit's tests",
                      protocol=kw.pop("protocol", "source-aware"), aggregate=aggregate,
                      definition="rho, broken somehow.", **kw)

    class Plugin:
        @hookimpl
        def register_metrics(self, register):
            register(spec)

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(tiny, name="tests.plugins.tiny")
    pm.register(Plugin(), name="broken-metric")
    return Registry(pm, infos)


def check_broken(aggregate, **kw):
    return check_metric("broken", metric_registry(aggregate, **kw), dataset="tiny",
                        model="centroid", clusterer="oracle", k=3)


def renamed(group, trials):
    return [dataclasses.replace(s, metric="broken") for s in aggregate_rho(group, trials)]


def test_correct_metric_passes():
    report = check_broken(renamed)
    assert {"run", "scores", "aggregate-pure", "failed-trials", "empty-group"} <= set(
        report.passed)


def test_score_with_the_wrong_metric_name():
    err = fails("score-metric", check_broken, aggregate_rho, match="metric='rho'")
    assert "'broken'" in err.fix


def test_score_for_another_data_set():
    fails("score-group", check_broken, lambda g, t: [
        dataclasses.replace(s, dataset="digits") for s in renamed(g, t)])


def test_nan_score():
    fails("score-values", check_broken, lambda g, t: [
        dataclasses.replace(s, value=float("nan")) for s in renamed(g, t)], match="nan")


def test_confidence_interval_that_does_not_hold_the_value():
    fails("score-ci", check_broken, lambda g, t: [
        dataclasses.replace(s, ci_low=2.0, ci_high=3.0) if s.value is not None else s
        for s in renamed(g, t)])


def test_aggregate_that_returns_dicts():
    fails("scores", check_broken, lambda g, t: [dataclasses.asdict(s) for s in renamed(g, t)])


def test_duplicate_sub_scores():
    fails("score-name", check_broken, lambda g, t: renamed(g, t) * 2, match="twice")


def test_aggregate_that_is_not_a_function_of_its_rows():
    fails("aggregate-pure", check_broken, lambda g, t: [Score(
        g["dataset"], g["model"], g["clusterer"], "broken", "broken",
        float(np.random.default_rng().random()))])


def test_aggregate_that_chokes_on_failed_trials():
    def mean_accuracy(group, trials):  # forgets that failed trials have no accuracy
        accs = [t["accuracy"] for t in trials]
        return [Score(group["dataset"], group["model"], group["clusterer"], "broken", "broken",
                      sum(accs) / len(accs) if accs else None)]

    fails("failed-trials", check_broken, mean_accuracy, match="TypeError")


def test_aggregate_that_chokes_on_an_empty_group():
    def last_repeat(group, trials):
        r = max(t["repeat"] for t in trials)
        return [Score(group["dataset"], group["model"], group["clusterer"], "broken", "broken",
                      float(r))]

    fails("empty-group", check_broken, last_repeat, match="ValueError")


def test_unknown_protocol():
    fails("spec-protocol", check_broken, renamed, protocol="no-such-protocol")


def test_run_whose_trials_fail():
    with pytest.raises(ConformanceError, match="6 of 6 trials") as info:
        check_metric("broken", metric_registry(renamed), dataset="tiny", model="boom",
                     clusterer="oracle", k=3)
    assert info.value.check == "run" and "boom" in str(info.value)


# --- the checks as named pieces: generators, collect-all, expected failures, pytest ----------


def test_the_model_generator_yields_named_checks_in_order_and_trains_nothing():
    builds = []

    def build(ctx):
        builds.append(ctx.seed)
        return Centroid(ctx)

    checks = list(kit.model_checks(model(build), min_accuracy=0.5))
    assert [c.name for c in checks] == [
        "spec", "build", "fit", "unused-train-knobs", "fit-inputs-are-copies", "predict",
        "predict-type", "predict-shape", "predict-finite", "predict-dtype", "predict-range",
        "never-handed-test-rows", "fit-returns-self", "fitted-attributes", "predict-proba",
        "has-features", "features", "features-head", "predict-does-not-learn",
        "deterministic", "build-fresh", "accuracy"]
    assert [c.name for c in kit.model_checks(model(build))][-1] == "build-fresh"
    assert checks[9].id == "model[broken]-predict-dtype"
    assert {c.kind for c in checks} == {"model"} and len({id(c.case) for c in checks}) == 1
    assert builds == []  # nothing trained until a check needs it
    checks[checks.index(next(c for c in checks if c.name == "never-handed-test-rows"))]()
    assert len(builds) == 1  # the first training, for the check that needed it
    with pytest.raises(unittest.SkipTest, match="no predict_proba"):  # pytest: skipped
        checks[14]()
    report = kit.run_checks(checks)
    assert len(builds) == 2  # two trainings in all, shared by every check
    assert report.passed == [c.name for c in checks
                             if c.name not in ("predict-proba", "features-head")]


def test_the_other_generators_yield_named_checks_in_order():
    assert [c.name for c in kit.dataset_checks(dataset(lambda: blobs()))] == [
        "spec", "load", "arrays", "sources", "image-shape", "image-range", "deterministic"]
    assert [c.name for c in kit.clusterer_checks(clusterer(kmeans))] == [
        "spec", "fit-predict", "labels", "deterministic", "requires-true-sources",
        "degenerate-input"]
    metric_names = [c.name for c in kit.metric_checks("rho", BUILTINS)]
    assert metric_names == ["spec", "spec-protocol", "run", "scores", "aggregate-pure",
                            "run-scores", "failed-trials", "empty-group"]
    assert metric_names == list(kit.METRIC_CHECKS)
    assert [c.id for c in kit.checks_of(("clusterers", "kmeans"), BUILTINS)][1] == \
        "clusterer[kmeans]-fit-predict"
    assert next(iter(kit.checks_of("digits", BUILTINS))).kind == "dataset"
    with pytest.raises(ValueError, match="not registered"):
        kit.checks_of("no-such-component", BUILTINS)


class FloatLabelsNoHistory(Centroid):
    """Two independent breakages: float labels, and no fitted attributes."""

    def fit(self, X, y, X_val, y_val):
        self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
        return self

    def predict(self, X):
        return super().predict(X).astype(np.float64)


def test_the_default_stops_at_the_first_failure():
    err = fails("predict-dtype", check_model, model(FloatLabelsNoHistory))
    assert err.failures == [err]
    assert "fit" in err.report.passed and "fitted-attributes" not in err.report.passed
    assert list(err.report.failed) == ["predict-dtype"]


def test_collect_all_reports_every_failure_at_once():
    with pytest.raises(ConformanceError) as info:
        check_model(model(FloatLabelsNoHistory), collect_all=True)
    err = info.value
    assert [f.check for f in err.failures] == ["predict-dtype", "fitted-attributes"]
    assert err.check == "predict-dtype, fitted-attributes"
    message = str(err)
    assert message.startswith("model 'broken' fails 2 checks:")
    assert "float64" in message and "history_" in message and "How to fix" in message
    # every other check ran and passed (the float labels were replaced in the fit path)
    assert {"never-handed-test-rows", "features", "deterministic",
            "build-fresh"} <= set(err.report.passed)
    assert list(err.report.failed) == ["predict-dtype", "fitted-attributes"]


def test_collect_all_skips_what_needs_a_failed_prerequisite():
    class Crash(Centroid):
        def fit(self, X, y, X_val, y_val):
            raise RuntimeError("out of coffee")

    with pytest.raises(ConformanceError) as info:
        check_model(model(Crash), collect_all=True)
    err = info.value
    assert err.check == "fit" and err.failures == [err] and "out of coffee" in str(err)
    assert err.report.passed == ["spec", "build"]
    assert err.report.skipped["predict"] == "'fit' failed"
    assert err.report.skipped["build-fresh"] == "'fit' failed"
    assert "skipped deterministic: 'fit' failed" in str(err.report)


def test_expected_failures_are_recorded_and_do_not_raise():
    report = check_model(model(FloatLabelsNoHistory), expected_failures={
        "predict-dtype": "float labels until 2.0", "fitted-attributes": "no history yet"})
    assert report.xfailed == {"predict-dtype": "float labels until 2.0",
                              "fitted-attributes": "no history yet"}
    assert report.failed == {} and "deterministic" in report.passed
    assert "expected failure predict-dtype: float labels until 2.0" in str(report)
    # the others still count
    fails("fitted-attributes", check_model, model(FloatLabelsNoHistory),
          expected_failures={"predict-dtype": "float labels until 2.0"})


def test_an_expected_failure_that_passes_is_a_failure():
    err = fails("build-fresh", check_model, model(Centroid),
                expected_failures={"build-fresh": "shares its model"},
                match="listed in expected_failures ('shares its model') but passed")
    assert "remove 'build-fresh'" in err.fix


def test_an_expected_failure_that_names_no_check_is_refused():
    with pytest.raises(ValueError, match="'predict_dtype', not a check"):
        check_dataset(dataset(lambda: blobs()), expected_failures={"predict_dtype": "typo"})


def test_collect_all_on_a_dataset_and_a_clusterer():
    def load():
        ds = blobs(image_shape=(1, 4, 4))
        return Dataset("other", ds.X * 255, ds.y, sources=ds.sources, image_shape=(1, 4, 4))

    with pytest.raises(ConformanceError) as info:
        check_dataset(dataset(load, is_image=True), collect_all=True)
    assert [f.check for f in info.value.failures] == ["load", "image-range"]

    def unseeded_floats(Z, k, *, seed, true_sources=None):
        return np.random.default_rng().integers(0, k, len(Z)) * 1.0

    with pytest.raises(ConformanceError) as info:
        check_clusterer(clusterer(unseeded_floats), collect_all=True)
    assert [f.check for f in info.value.failures] == ["labels", "deterministic", "labels"]
    assert list(info.value.report.failed) == ["labels", "deterministic", "degenerate-input"]


PARAMETRIZED = '''
import numpy as np
from robench.specs import ModelSpec
from robench.testing import parametrize_with_checks


class Floaty:
    has_features = False

    def __init__(self, ctx):
        self.ctx = ctx

    def fit(self, X, y, X_val, y_val):
        self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
        self.history_, self.n_epochs_, self.best_epoch_ = [], 0, 0
        self.train_accuracy_, self.val_accuracy_ = 1.0, None
        return self

    def predict(self, X):
        d = ((X[:, None, :] - self.means_[None]) ** 2).sum(-1)
        return d.argmin(1).astype(np.float64)


FLOATY = ModelSpec("floaty", Floaty, "float labels", has_features=False)


@parametrize_with_checks([FLOATY], expected_failures={"predict-dtype": "float labels"})
def test_floaty(check):
    check()


@parametrize_with_checks([FLOATY], expected_failures={"build-fresh": "stale entry"})
def test_stale(check):
    check()
'''


def test_parametrize_with_checks_makes_one_test_per_check(tmp_path):
    mark = kit.parametrize_with_checks(
        [model(Centroid)], expected_failures={"predict-proba": "not yet"}, train={})
    argnames, params = mark.args
    assert argnames == "check"
    assert [p.id for p in params] == [f"model[broken]-{name}" for name in kit.MODEL_CHECKS[:-1]]
    xfails = {p.id: m for p in params for m in p.marks}
    assert list(xfails) == ["model[broken]-predict-proba"]
    assert xfails["model[broken]-predict-proba"].kwargs == {"reason": "not yet", "strict": True}
    with pytest.raises(ValueError, match="'nope', not a check"):
        kit.parametrize_with_checks([model(Centroid)], expected_failures={"nope": "?"})

    # as pytest runs it: the expected failure xfails, the stale one fails the test (strict)
    (tmp_path / "test_floaty.py").write_text(PARAMETRIZED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p",
                             "no:cacheprovider", str(tmp_path / "test_floaty.py")],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    out = result.stdout
    assert "XFAIL test_floaty.py::test_floaty[model[floaty]-predict-dtype]" in out, out
    assert "PASSED test_floaty.py::test_floaty[model[floaty]-predict-shape]" in out, out
    assert ("SKIPPED [1] test_floaty.py:28: the classifier has no feature space" in out
            or "the classifier has no feature space (has_features is False)" in out), out
    assert "FAILED test_floaty.py::test_stale[model[floaty]-build-fresh]" in out, out
    assert "FAILED test_floaty.py::test_stale[model[floaty]-predict-dtype]" in out, out
    assert result.returncode == 1, out
