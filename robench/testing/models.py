"""The model checks: a model trained twice through robench's own fit path, one check per rule."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import dataclass
from typing import Mapping, Optional, Union

import numpy as np

from robench.data import Dataset
from robench.specs import ModelSpec
from robench.testing.core import (Case, CheckReport, Unavailable, check_spec_fields,
                                  default_registry, make_checks, resolve, run_checks, shared,
                                  skip)
from robench.testing.datasets import synthetic_dataset
from robench.learn.features import feature_space
from robench.run.trials import fit_and_score

#: Knobs that ``check_model`` adds to ``ModelContext.train`` (unless the caller sets them):
#: ``mc_samples`` is what the shifted-cv protocol sends to every model, the other one no model
#: knows. A ``build`` must ignore budget keys it does not use.
UNUSED_TRAIN_KNOBS = {"mc_samples": 2, "unknown_knob_added_by_robench_testing": 1}

#: The names of the model checks, in the order they run (``accuracy`` only with
#: ``min_accuracy``).
MODEL_CHECKS = (
    "spec", "build", "fit", "unused-train-knobs", "fit-inputs-are-copies", "predict",
    "predict-type", "predict-shape", "predict-finite", "predict-dtype", "predict-range",
    "never-handed-test-rows", "fit-returns-self", "fitted-attributes", "predict-proba",
    "has-features", "features", "features-head", "predict-does-not-learn", "deterministic",
    "build-fresh", "accuracy")


def model_checks(model: Union[str, ModelSpec], registry=None, *,
                 dataset: Union[None, str, Dataset] = None,
                 image_shape: Optional[tuple] = None, train: Optional[dict] = None,
                 seed: int = 0, min_accuracy: Optional[float] = None):
    """Yield the checks of one model, in the order they run (options as :func:`check_model`'s)."""
    spec, registry = resolve("models", ModelSpec, model, registry)
    case = ModelCase(spec, registry, dataset=dataset, image_shape=image_shape, train=train,
                     seed=seed, min_accuracy=min_accuracy)
    names = MODEL_CHECKS if min_accuracy is not None else MODEL_CHECKS[:-1]
    yield from make_checks(case, "model", ((name, RULES[name]) for name in names))


def check_model(model: Union[str, ModelSpec], registry=None, *,
                dataset: Union[None, str, Dataset] = None, image_shape: Optional[tuple] = None,
                train: Optional[dict] = None, seed: int = 0,
                min_accuracy: Optional[float] = None,
                expected_failures: Optional[Mapping[str, str]] = None,
                collect_all: bool = False) -> CheckReport:
    """Check that a model follows the classifier contract robench relies on.

    The model is trained twice with the same seed through robench's own fit path on a
    stratified 60/20/20 split, spied on; docs/plugin-hooks.md lists what each check of
    :data:`MODEL_CHECKS` verifies.

    Parameters
    ----------
    model : str or ModelSpec
        The spec, or the name of a model in ``registry``.
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry (installed plugins).
    dataset : None, str or Dataset
        Data to train on. None: :func:`synthetic_dataset` (120 rows, 3 classes), images of
        ``image_shape`` if given, else of the model's first ``image_shapes`` entry, else 1x8x8
        when the model ``requires_image``, else 10 tabular features. A string names a data set
        in ``registry``.
    image_shape : tuple of int, optional
        ``(C, H, W)`` of the synthetic images.
    train : dict, optional
        ``ModelContext.train`` (e.g. ``{"max_epochs": 1}`` keeps a check fast); default ``{}``.
    seed : int
        ``ModelContext.seed`` of both builds, and the seed of the split.
    min_accuracy : float, optional
        Fail if the test accuracy is lower (meaningful on real data such as ``"digits"``).
    expected_failures, collect_all
        As :func:`robench.testing.run_checks` takes them.

    Returns
    -------
    CheckReport
        What the checks found; a failure raises :class:`robench.testing.ConformanceError`.
    """
    return run_checks(model_checks(model, registry, dataset=dataset, image_shape=image_shape,
                                   train=train, seed=seed, min_accuracy=min_accuracy),
                      expected_failures=expected_failures, collect_all=collect_all)


@dataclass
class Fit:
    """One training of the model through robench's fit path, as the spy saw it."""

    inner: object  # the classifier build(ctx) returned
    spy: "Spy"
    result: dict  # what fit_and_score returned
    budget: dict  # the ctx.train it was built with


@dataclass
class Training:
    """The first training: with the unused knobs, then, if that raised, without them."""

    fit: Optional[Fit]  # the training the other checks read; None if none worked
    build_problem: str = ""  # build(ctx) returned something without fit or predict
    error: Optional[Exception] = None  # what training with the unused knobs raised


class BuildRefused(Exception):
    """build(ctx) returned no classifier: training stops there."""


class ModelCase(Case):
    """One model under check: its options, data, split and trainings (computed on first use)."""

    def __init__(self, spec: ModelSpec, registry, *, dataset, image_shape, train, seed,
                 min_accuracy):
        super().__init__("model", spec)
        self.registry, self.dataset_option, self.image_shape = registry, dataset, image_shape
        self.train, self.seed, self.min_accuracy = dict(train or {}), seed, min_accuracy
        self.budget = {**UNUSED_TRAIN_KNOBS, **self.train}

    @shared(owner="fit")
    def data(self) -> Dataset:
        """The data the model trains on (see ``check_model``'s ``dataset``)."""
        spec, dataset, image_shape = self.spec, self.dataset_option, self.image_shape
        if isinstance(dataset, Dataset):
            return dataset
        if isinstance(dataset, str):
            registry = self.registry if self.registry is not None else default_registry()
            return registry.load_dataset(dataset)
        if image_shape is None and spec.image_shapes:
            image_shape = tuple(spec.image_shapes[0])
        if image_shape is None and spec.requires_image:
            image_shape = (1, 8, 8)
        return synthetic_dataset(image_shape=image_shape, seed=self.seed)

    @shared(owner="fit")
    def split(self) -> tuple:
        """Stratified (train, validation, test) row indices, 60/20/20 of every class."""
        dataset = self.data
        rng = np.random.default_rng(self.seed)
        parts = ([], [], [])
        for c in range(dataset.n_classes):
            idx = rng.permutation(np.flatnonzero(dataset.y == c))
            n = max(1, round(0.2 * idx.size))  # test and validation rows each
            parts[2].append(idx[:n])
            parts[1].append(idx[n:2 * n])
            parts[0].append(idx[2 * n:])
        return tuple(np.sort(np.concatenate(p)) for p in parts)

    @property
    def test_rows(self) -> np.ndarray:
        return self.data.X[self.split[2]]

    def fit_once(self, budget: dict) -> Fit:
        """Build and train the model once through robench's fit path, spied on."""
        ds, (train_idx, val_idx, test_idx) = self.data, self.split
        built = []  # the spy of the one build

        def build(ctx):
            inner = self.spec.build(ctx)
            missing = [m for m in ("fit", "predict") if not callable(getattr(inner, m, None))]
            if missing:
                raise BuildRefused(f"build(ctx) returned {type(inner).__name__}, which has no "
                                   f"{' or '.join(missing)} method")
            built.append(Spy(inner, ds))
            return built[-1]

        result = _robench_fit_path()(dataclasses.replace(self.spec, build=build), ds,
                                     train_idx, val_idx, test_idx, seed=self.seed,
                                     train_budget=budget)
        return Fit(built[0]._kit_inner, built[0], result, dict(budget))

    @shared(owner="fit")
    def training(self) -> Training:
        """Train with ``train`` plus the unused knobs; if that raises, once without them."""
        self.data, self.split  # noqa: B018 - data that does not load is no finding on the model
        try:
            return Training(self.fit_once(self.budget))
        except BuildRefused as refused:
            return Training(None, build_problem=str(refused))
        except Exception as exc:  # noqa: BLE001 - the model's own error is the finding
            # Did the knobs the model does not use cause it? Try once without them.
            try:
                plain = self.fit_once(dict(self.train))
            except Exception:  # noqa: BLE001 - fails either way: report the first error
                return Training(None, error=exc)
            return Training(plain, error=exc)

    @property
    def first(self) -> Fit:
        """The first training, or :class:`Unavailable` naming the check that failed."""
        training = self.training
        if training.fit is None:
            raise Unavailable("build" if training.build_problem else "fit")
        return training.fit

    @shared(owner="deterministic")
    def second(self) -> Fit:
        """A second training with the same seed and budget."""
        budget = self.first.budget
        with self.calling("deterministic", "a second build and fit with the same seed"):
            return self.fit_once(budget)

    @shared(owner="predict")
    def test_predictions(self) -> np.ndarray:
        """What ``predict`` returns for the test rows (as returned)."""
        inner, Xt = self.first.inner, self.test_rows
        with self.calling("predict", f"predict on {len(Xt)} test rows"):
            return inner.predict(Xt)

    @property
    def predictions(self) -> list:
        """[(rows, what predict returned)]: the fit path's prediction pass, then the test rows."""
        return [*self.first.spy._kit_predictions, (len(self.test_rows), self.test_predictions)]


def _robench_fit_path():
    """Return the function robench's protocols train and score a model with (the path checked)."""
    return fit_and_score


class Spy:
    """Wrap a built classifier: forward everything, record what fit and predict exchange.

    It never raises for the model; predictions that break the contract are recorded and
    replaced by zeros, so training completes and every other rule can be checked.
    """

    def __init__(self, inner, dataset: Dataset):
        self._kit_inner = inner
        self._kit_dataset = dataset
        self._kit_views = []  # names of fit arguments that share memory with the data set
        self._kit_fit_args = self._kit_fit_returned = self._kit_state_after_fit = None
        self._kit_predictions = []  # (rows given, what predict returned)

    def __getattr__(self, name):
        if name.startswith("_kit_"):  # not set yet (e.g. while copying): never recurse
            raise AttributeError(name)
        return getattr(self._kit_inner, name)

    def fit(self, X, y, X_val, y_val):
        full = self._kit_dataset.X
        self._kit_views = [what for what, arr in (("X", X), ("X_val", X_val))
                           if isinstance(arr, np.ndarray) and np.may_share_memory(arr, full)]
        self._kit_fit_args = tuple(np.array(a, copy=True) for a in (X, y, X_val, y_val))
        self._kit_fit_returned = self._kit_inner.fit(X, y, X_val, y_val)
        self._kit_state_after_fit = _state_digest(self._kit_inner)
        return self

    def predict(self, X):
        out = self._kit_inner.predict(X)
        self._kit_predictions.append(
            (len(X), np.array(out, copy=True) if isinstance(out, np.ndarray) else out))
        if _label_problem(out, len(X), self._kit_dataset.n_classes) is None:
            return out
        return np.zeros(len(X), dtype=np.int64)


PREDICT_FIX = ("return np.asarray(pred, dtype=np.int64), one class index per row "
               "(a torch model: logits.argmax(1))")


def _label_problem(out, n: int, n_classes: int, only: Optional[str] = None):
    """Return (rule, problem, fix) of the first rule (or only ``only``) ``out`` breaks, or None."""
    fix = PREDICT_FIX
    if not isinstance(out, np.ndarray):
        return ("predict-type", f"predict returned {type(out).__name__}, not a numpy array",
                fix)
    found = []
    if out.shape != (n,):
        found.append(("predict-shape", f"predict returned shape {out.shape} for {n} rows; "
                      f"expected ({n},)", fix))
    if np.issubdtype(out.dtype, np.floating) and not np.isfinite(out).all():
        found.append(("predict-finite", f"predict returned {int((~np.isfinite(out)).sum())} "
                      f"NaN or infinite values among {n}", "check the model for diverging "
                      "training (lr, normalisation) and " + fix))
    if out.dtype != np.int64:
        found.append(("predict-dtype", f"predict returned dtype {out.dtype}; robench expects "
                      "int64 class indices", fix))
    if out.size and np.issubdtype(out.dtype, np.number) and (
            out.min() < 0 or out.max() >= n_classes):
        found.append(("predict-range", f"predict returned classes in [{out.min()}, "
                      f"{out.max()}]; expected 0..{n_classes - 1} (ctx.n_classes={n_classes})",
                      "map outputs to class indices 0..ctx.n_classes-1"))
    return next((problem for problem in found if only in (None, problem[0])), None)


def predict_rule(rule: str):
    """Return the check of one rule of what ``predict`` returns, over every prediction."""
    def check(case: ModelCase) -> None:
        n_classes = case.data.n_classes
        for n, out in case.predictions:
            if rule != "predict-type" and not isinstance(out, np.ndarray):
                raise Unavailable("predict-type")
            problem = _label_problem(out, n, n_classes, only=rule)
            if problem is not None:
                case.fail(*problem)

    check.__name__ = rule.replace("-", "_")
    return check


def spec_fields(case: ModelCase) -> None:
    spec = case.spec
    check_spec_fields(case, ("build",), ("requires_image", "in_default_run"))
    if spec.has_features not in (None, True, False):
        case.fail("spec-flags", f"has_features is {spec.has_features!r}",
                  "set has_features to True, False or leave it None")
    for shape in spec.image_shapes:
        if len(tuple(shape)) != 3:
            case.fail("spec-image-shapes", f"image_shapes holds {shape!r}, not (C, H, W)",
                      "list every accepted shape as a (channels, height, width) tuple")


def build_returns_a_classifier(case: ModelCase) -> None:
    problem = case.training.build_problem
    if problem:
        case.fail("build", problem,
                  "return a classifier with fit(X, y, X_val, y_val) and predict(X) (a torch "
                  "model: robench.learn.train.TorchClassifier.from_context(ctx, "
                  "build_module))")


def fit_works(case: ModelCase) -> None:
    training = case.training
    if training.build_problem:
        raise Unavailable("build")
    if training.fit is None:
        ds, exc = case.data, training.error
        case.fail("fit", f"building and fitting on {ds.n_samples} rows of '{ds.name}' "
                  f"({ds.n_features} features, image_shape {ds.image_shape}) raised "
                  f"{type(exc).__name__}: {exc}")


def unused_train_knobs(case: ModelCase) -> None:
    case.first  # noqa: B018 - skipped when nothing trained
    exc = case.training.error
    if exc is not None:
        case.fail(
            "unused-train-knobs",
            f"build(ctx) or fit raised {type(exc).__name__}: {exc} when ctx.train held keys "
            f"the model does not use ({', '.join(sorted(UNUSED_TRAIN_KNOBS))}), and worked "
            "without them; protocols add their own knobs (mc_samples, for one)",
            "read only the keys you need: robench.learn.train.TorchClassifier.from_context(ctx, "
            "build_module), or robench.learn.train.training_budget(ctx.train), never **ctx.train")


def fit_inputs_are_copies(case: ModelCase) -> None:
    views = case.first.spy._kit_views
    if views:
        what = views[0]
        case.fail("fit-inputs-are-copies",
                  f"the {what} handed to fit shares memory with the whole data set, so the "
                  f"model could read the test rows through {what}.base",
                  "hand fit copies of the training rows (index with an array: X[train_idx])")


def predict_works(case: ModelCase) -> None:
    case.test_predictions  # noqa: B018 - predicting the test rows raised nothing


def never_handed_test_rows(case: ModelCase) -> None:
    fitted, ds = case.first, case.data
    train_idx, val_idx, test_idx = case.split
    X_fit, y_fit, X_val, y_val = fitted.spy._kit_fit_args
    rows = lambda A: sorted(r.tobytes() for r in np.ascontiguousarray(A))  # noqa: E731
    test_rows = {r.tobytes() for r in ds.X[test_idx]}
    for what, got, idx in (("fit rows (X)", X_fit, train_idx),
                           ("validation rows (X_val)", X_val, val_idx)):
        if rows(got) != rows(ds.X[idx]):
            leaked = sum(r.tobytes() in test_rows for r in np.ascontiguousarray(got))
            case.fail("never-handed-test-rows",
                      f"the {what} handed to fit are not the split's {len(idx)} rows: got "
                      f"{len(got)}, {leaked} of them test rows",
                      "train and early-stop on the training partition only; the test "
                      "partition is for the score alone")
    if not (np.array_equal(y_fit, ds.y[train_idx]) and np.array_equal(y_val, ds.y[val_idx])):
        case.fail("never-handed-test-rows", "the labels handed to fit are not the split's",
                  "hand fit y[train_idx] and y[val_idx]")


def fit_returns_self(case: ModelCase) -> None:
    fitted = case.first
    if fitted.spy._kit_fit_returned is not fitted.inner:
        case.fail("fit-returns-self", f"fit returned {fitted.spy._kit_fit_returned!r}, not the "
                  "classifier", "end fit with `return self`")


def fitted_attributes(case: ModelCase) -> None:
    inner = case.first.inner

    def attr(name):
        if not hasattr(inner, name):
            case.fail("fitted-attributes", f"after fit the classifier has no {name}",
                      "set history_ (list of per-epoch dicts, [] without epochs), n_epochs_, "
                      "best_epoch_, train_accuracy_ and val_accuracy_ in fit; robench stores "
                      "them with every trial (TorchClassifier does it for you)")
        return getattr(inner, name)

    history = attr("history_")
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        case.fail("fitted-attributes", f"history_ is {type(history).__name__}, not a list "
                  "of dicts", "one dict per epoch, [] for a model without epochs")
    n_epochs, best = attr("n_epochs_"), attr("best_epoch_")
    for name, v in (("n_epochs_", n_epochs), ("best_epoch_", best)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            case.fail("fitted-attributes", f"{name} is {v!r}, not an integer >= 0")
    if best > max(n_epochs, 1):
        case.fail("fitted-attributes", f"best_epoch_={best} exceeds n_epochs_={n_epochs}")
    for name, optional in (("train_accuracy_", False), ("val_accuracy_", True)):
        v = attr(name)
        if (v is not None or not optional) and (
                not isinstance(v, (float, int, np.floating)) or not 0.0 <= float(v) <= 1.0):
            case.fail("fitted-attributes", f"{name} is {v!r}, not a fraction in [0, 1]")


def predict_proba(case: ModelCase) -> None:
    inner, Xt, n_classes = case.first.inner, case.test_rows, case.data.n_classes
    proba = getattr(inner, "predict_proba", None)
    if not callable(proba):
        skip("the classifier has no predict_proba (optional)")
    with case.calling("predict-proba", "predict_proba"):
        P = np.asarray(proba(Xt))
    if P.shape != (len(Xt), n_classes) or not np.isfinite(P).all() or not np.allclose(
            P.sum(axis=1), 1.0, atol=1e-4) or P.min() < 0:
        case.fail("predict-proba", f"predict_proba returned shape {P.shape}; expected "
                  f"({len(Xt)}, {n_classes}) finite probabilities, rows summing to 1",
                  "return softmax probabilities, one row per row of X")


def has_features(case: ModelCase) -> None:
    spec, inner = case.spec, case.first.inner
    has = getattr(inner, "has_features", False)
    if spec.has_features is not None and bool(has) != spec.has_features:
        case.fail("has-features", f"ModelSpec.has_features is {spec.has_features} but the "
                  f"built classifier's has_features is {has!r}",
                  "make them agree: feature-space metrics plan by the spec and read the "
                  "classifier")


def features(case: ModelCase) -> None:
    inner = case.first.inner
    if not getattr(inner, "has_features", False):
        skip("the classifier has no feature space (has_features is False); feature-space "
             "metrics skip it")
    if not callable(getattr(inner, "features", None)):
        case.fail("features", "has_features is True but the classifier has no features "
                  "method", "define features(X) returning penultimate activations, or set "
                  "has_features = False")
    Xt = case.test_rows
    with case.calling("features", "features(X)"):
        Z = inner.features(Xt)
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.shape[0] != len(Xt) or Z.shape[1] < 1:
        case.fail("features", f"features returned shape {Z.shape} for {len(Xt)} rows; "
                  "expected (n, d) with d >= 1", "return one feature row per input row")
    if not np.issubdtype(Z.dtype, np.floating) or not np.isfinite(Z).all():
        case.fail("features", f"features returned dtype {Z.dtype} with "
                  f"{int((~np.isfinite(Z.astype(float))).sum())} NaN or infinite values",
                  "return finite float activations")


def features_head(case: ModelCase) -> None:
    inner = case.first.inner
    if not getattr(inner, "has_features", False):
        skip("no feature space")
    if getattr(inner, "module_", None) is None and not callable(
            getattr(inner, "coverage_space", None)):
        skip("not a torch classifier (no module_) and no coverage_space(): a metric on its "
             "feature space records it as not applicable")

    Xt, n_classes = case.test_rows, case.data.n_classes
    with case.calling("features-head", "robench.learn.features.feature_space(classifier)"):
        space, why = feature_space(inner)
    if space is None:
        skip(f"no layer with a head to read: {why}")
    with case.calling("features-head", f"the {space.layer} layer's encode and head"):
        L = np.asarray(space.logits(space.encode(Xt)))
    if L.shape != (len(Xt), n_classes) or not np.isfinite(L).all():
        case.fail("features-head", f"the module's head gave shape {L.shape} (finite: "
                  f"{bool(np.isfinite(L).all())}) on its {space.layer} features; expected "
                  f"({len(Xt)}, {n_classes}) finite logits",
                  "the module's head (nn.Linear) must map features(x) to the logits")


def predict_does_not_learn(case: ModelCase) -> None:
    """The fitted state after the fit path's prediction pass (every row, the test rows
    among them) and the checks before this one is the state fit left."""
    fitted = case.first
    case.test_predictions  # noqa: B018 - the test rows predicted at least once
    before, after = fitted.spy._kit_state_after_fit, _state_digest(fitted.inner)
    changed = sorted(k for k in before if after.get(k) != before[k])
    if changed:
        case.fail("predict-does-not-learn",
                  f"predicting changed the fitted classifier ({', '.join(changed)}): it "
                  "learns from the rows it is asked about, such as the test partition",
                  "leave the model as fit left it in predict and features (torch: eval "
                  "mode, no running statistics updated on test data)")


def deterministic(case: ModelCase) -> None:
    first, second = case.first, case.second
    p1, p2 = first.spy._kit_predictions[0][1], second.spy._kit_predictions[0][1]
    if not np.array_equal(p1, p2):
        n = len(np.asarray(p1))
        differ = int((np.asarray(p1) != np.asarray(p2)).sum()) if np.shape(p1) == np.shape(
            p2) else n
        case.fail("deterministic", f"two builds with the same ctx.seed predicted "
                  f"{differ} of {n} rows differently",
                  "seed everything random from ctx.seed (torch.manual_seed, "
                  "np.random.default_rng(ctx.seed), random_state=ctx.seed)")
    if getattr(first.inner, "has_features", False):
        Xt = case.test_rows
        z1 = np.asarray(first.inner.features(Xt), dtype=np.float64)
        z2 = np.asarray(second.inner.features(Xt), dtype=np.float64)
        if z1.shape != z2.shape or not np.allclose(z1, z2, rtol=1e-5, atol=1e-6):
            case.fail("deterministic", "two builds with the same ctx.seed gave different "
                      "features", "seed everything random from ctx.seed")


def build_fresh(case: ModelCase) -> None:
    if case.first.inner is case.second.inner:
        case.fail("build-fresh", "build(ctx) returned the same object twice",
                  "return a new, untrained classifier from every build(ctx) call")


def accuracy(case: ModelCase) -> None:
    first = case.first
    for rule in MODEL_CHECKS[MODEL_CHECKS.index("predict-type"):
                             MODEL_CHECKS.index("predict-range") + 1]:
        for n, out in first.spy._kit_predictions:
            if _label_problem(out, n, case.data.n_classes, only=rule) is not None:
                raise Unavailable(rule)  # the accuracy of replaced predictions means nothing
    acc, name = first.result["accuracy"], case.data.name
    if acc < case.min_accuracy:
        case.fail("accuracy", f"test accuracy {acc:.3f} on '{name}' is below "
                  f"min_accuracy={case.min_accuracy}", "check the model learns (budget, lr)")


RULES = {
    "spec": spec_fields, "build": build_returns_a_classifier, "fit": fit_works,
    "unused-train-knobs": unused_train_knobs, "fit-inputs-are-copies": fit_inputs_are_copies,
    "predict": predict_works,
    **{rule: predict_rule(rule) for rule in ("predict-type", "predict-shape", "predict-finite",
                                             "predict-dtype", "predict-range")},
    "never-handed-test-rows": never_handed_test_rows, "fit-returns-self": fit_returns_self,
    "fitted-attributes": fitted_attributes, "predict-proba": predict_proba,
    "has-features": has_features, "features": features, "features-head": features_head,
    "predict-does-not-learn": predict_does_not_learn, "deterministic": deterministic,
    "build-fresh": build_fresh, "accuracy": accuracy,
}


def _state_digest(obj) -> dict:
    """Return {attribute: digest} of an object's fitted state (arrays, tensors, numbers)."""
    return {name: _digest(value, 0, set()) for name, value in sorted(vars(obj).items())}


def _hash(arr) -> str:
    arr = np.ascontiguousarray(arr)
    return f"{arr.dtype}{arr.shape}:" + hashlib.sha1(arr.tobytes()).hexdigest()


def _digest(value, depth: int, seen: set):
    if value is None or isinstance(value, (bool, int, float, str, bytes, np.generic)):
        return repr(value)
    if isinstance(value, np.ndarray):
        return _hash(value) if value.dtype != object else repr(value.tolist())
    torch = sys.modules.get("torch")  # only a model that imported torch can hold tensors
    if torch is not None:
        if isinstance(value, torch.nn.Module):
            return {"training": value.training,
                    **{k: _hash(v.detach().cpu().numpy()) for k, v in value.state_dict().items()}}
        if isinstance(value, torch.Tensor):
            return _hash(value.detach().cpu().numpy())
    if id(value) in seen:
        return "<seen>"
    seen.add(id(value))
    if isinstance(value, dict):
        return {str(k): _digest(v, depth, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_digest(v, depth, seen) for v in value]
    if callable(value):
        return "<callable>"
    if depth < 4 and hasattr(value, "__dict__"):
        return {"<type>": type(value).__name__,
                **{k: _digest(v, depth + 1, seen) for k, v in vars(value).items()}}
    return type(value).__name__
