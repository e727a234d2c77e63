"""Conformance checks for plugin components, in the style of scikit-learn's ``check_estimator``.

A plugin's tests can be a few lines::

    from robench.plugins import make_registry
    from robench.testing import check_model

    def test_my_model_follows_the_contract():
        registry = make_registry(modules=["robench_my_model"], load_entrypoints=False)
        check_model("my-model", registry)

:func:`check_model`, :func:`check_dataset`, :func:`check_clusterer` and :func:`check_metric`
run one component on small data the way robench runs it and raise :class:`ConformanceError`
(an ``AssertionError``, so pytest reports a failed assertion) at the first broken rule; the
message names the component and the rule, says what was wrong and how to fix it. On success
they return a :class:`CheckReport` listing the checks that ran and the ones that did not
apply, each with the reason. :func:`check_all` checks every component of a registry, or of one
plugin.

Importing this module is cheap (numpy only): torch, scikit-learn and the runner are imported
by the checks that need them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np

from robench.data import Dataset, DatasetError, validate
from robench.specs import (ClustererSpec, DatasetSpec, MetricSpec, ModelSpec, Score,
                           check_slug)

#: Knobs that ``check_model`` adds to ``ModelContext.train`` (unless the caller sets them):
#: ``mc_samples`` is what the shifted-cv protocol sends to every model, the other one no model
#: knows. A ``build`` must ignore budget keys it does not use.
UNUSED_TRAIN_KNOBS = {"mc_samples": 2, "unknown_knob_added_by_robench_testing": 1}


class ConformanceError(AssertionError):
    """A component breaks robench's plugin contract.

    Attributes
    ----------
    component : str
        Which component, e.g. ``"model 'my-model' (plugin robench_my_model)"``.
    check : str
        The rule it broke, e.g. ``"predict-dtype"``.
    problem : str
        What was wrong.
    fix : str
        How to fix it ("" when the problem says it all).
    """

    def __init__(self, component: str, check: str, problem: str, fix: str = ""):
        self.component, self.check, self.problem, self.fix = component, check, problem, fix
        message = f"{component} fails check '{check}': {problem}"
        if fix:
            message += f"\nHow to fix: {fix}"
        super().__init__(message)


@dataclass
class CheckReport:
    """What a ``check_*`` function verified about one component.

    Attributes
    ----------
    component : str
        The component checked.
    passed : list of str
        The checks it passed, in the order they ran.
    skipped : dict
        Checks that do not apply to it, each with the reason (never skipped silently).
    """

    component: str
    passed: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.component}: {len(self.passed)} checks passed"]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


class _Checks:
    """Collect passed and skipped checks of one component; raise on the first failure."""

    def __init__(self, kind: str, spec):
        plugin = getattr(spec, "plugin", "")
        name = getattr(spec, "name", repr(spec))
        self.component = f"{kind} '{name}'" + (f" (plugin {plugin})" if plugin else "")
        self.report = CheckReport(self.component)

    def fail(self, check: str, problem: str, fix: str = ""):
        raise ConformanceError(self.component, check, problem, fix)

    def ok(self, check: str) -> None:
        if check not in self.report.passed:
            self.report.passed.append(check)

    def skip(self, check: str, why: str) -> None:
        self.report.skipped[check] = why

    @contextlib.contextmanager
    def calling(self, check: str, what: str, fix: str = ""):
        """Turn an exception raised by the component's code into a ConformanceError."""
        try:
            yield
        except ConformanceError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the plugin raised is the finding
            raise ConformanceError(self.component, check,
                                   f"{what} raised {type(exc).__name__}: {exc}", fix) from exc


# --- small data ------------------------------------------------------------------------------


def synthetic_dataset(n_classes: int = 3, n_per_class: int = 40, *, n_features: int = 10,
                      image_shape: Optional[tuple] = None, n_sources: int = 2, seed: int = 0,
                      name: str = "robench-testing") -> Dataset:
    """Return a small, easy data set: well-separated classes, each made of ``n_sources`` sources.

    Parameters
    ----------
    n_classes, n_per_class : int
        Classes and rows per class (rows are shuffled).
    n_features : int
        Width of a tabular data set; ignored when ``image_shape`` is given.
    image_shape : tuple of int or None
        ``(C, H, W)``: rows are images with values in [0, 1] (a random pattern per class and a
        small shift per source, plus noise).
    n_sources : int
        True sources per class (``Dataset.sources``), as robench's oracle clusterer reads them.
    seed : int
        Seeds everything.
    name : str
        The data set's name.

    Returns
    -------
    robench.data.Dataset
    """
    rng = np.random.default_rng(seed)
    groups = np.arange(n_classes * n_per_class) % (n_classes * n_sources)
    rng.shuffle(groups)
    y = groups // n_sources
    if image_shape is not None:
        image_shape = tuple(int(s) for s in image_shape)
        d = int(np.prod(image_shape))
        proto = rng.uniform(0.0, 1.0, (n_classes, d))
        shift = rng.normal(0.0, 0.05, (n_classes * n_sources, d))
        X = np.clip(proto[y] + shift[groups] + rng.normal(0.0, 0.1, (y.size, d)), 0.0, 1.0)
    else:
        means = rng.normal(0.0, 3.0, (n_classes, n_features))
        shift = rng.normal(0.0, 0.5, (n_classes * n_sources, n_features))
        X = means[y] + shift[groups] + rng.normal(0.0, 0.5, (y.size, n_features))
    return Dataset(name, X, y, sources=groups, image_shape=image_shape)


def _split(dataset: Dataset, seed: int) -> tuple:
    """Return stratified (train, validation, test) row indices, 60/20/20 of every class."""
    rng = np.random.default_rng(seed)
    parts = ([], [], [])
    for c in range(dataset.n_classes):
        idx = rng.permutation(np.flatnonzero(dataset.y == c))
        n_test = max(1, round(0.2 * idx.size))
        n_val = max(1, round(0.2 * idx.size))
        parts[2].append(idx[:n_test])
        parts[1].append(idx[n_test:n_test + n_val])
        parts[0].append(idx[n_test + n_val:])
    return tuple(np.sort(np.concatenate(p)) for p in parts)


def _resolve(kind: str, spec_cls, component, registry):
    """Return (spec, registry) for a spec or a registered name."""
    if isinstance(component, str):
        registry = registry if registry is not None else _default_registry()
        return registry.get(kind, component), registry
    if not isinstance(component, spec_cls):
        raise ConformanceError(
            f"{kind[:-1]} {component!r}", "spec",
            f"expected a {spec_cls.__name__} or the name of a registered {kind[:-1]}, got "
            f"{type(component).__name__}",
            f"register a robench.specs.{spec_cls.__name__}(...) and pass it or its name")
    return component, registry


def _default_registry():
    from robench.plugins import get_registry

    return get_registry()


def _check_common_fields(checks: _Checks, spec, callables: tuple, flags: tuple) -> None:
    """Check the fields every spec has: slug name, description, version, callables, flags."""
    try:
        # a spec resolved from a reference (SCHEME:TARGET) is named by it; its scheme is a slug
        check_slug(spec.name.split(":", 1)[0])
    except ValueError as exc:
        checks.fail("spec-name", str(exc), "use lowercase letters, digits and '-'")
    if not isinstance(spec.description, str) or not spec.description.strip():
        checks.fail("spec-description", f"description is {spec.description!r}",
                    "give a one-line description: `robench list` prints it")
    if not isinstance(spec.version, str) or not spec.version:
        checks.fail("spec-version", f"version is {spec.version!r}",
                    'use a non-empty string such as "1"; it is part of every trial key')
    for name in callables:
        if not callable(getattr(spec, name)):
            checks.fail("spec-callables", f"{name} is {getattr(spec, name)!r}, not callable",
                        f"pass the function itself as {name}=...")
    for name in flags:
        if not isinstance(getattr(spec, name), bool):
            checks.fail("spec-flags", f"{name} is {getattr(spec, name)!r}, not a bool",
                        f"set {name}=True or {name}=False")
    checks.ok("spec")


# --- models ----------------------------------------------------------------------------------


def check_model(model: Union[str, ModelSpec], registry=None, *,
                dataset: Union[None, str, Dataset] = None, image_shape: Optional[tuple] = None,
                train: Optional[dict] = None, seed: int = 0,
                min_accuracy: Optional[float] = None) -> CheckReport:
    """Check that a model follows the classifier contract robench relies on.

    The model is trained twice with the same seed through robench's own fit path
    (:func:`robench.run.trials.fit_and_score`) on a stratified 60/20/20 split, its
    classifier wrapped to record what ``fit`` and ``predict`` receive and return. Checked:

    * the spec's fields; ``build(ctx)`` returns a fresh object with ``fit`` and ``predict``;
    * ``build`` and ``fit`` accept a ``ctx.train`` holding knobs the model does not use
      (:data:`UNUSED_TRAIN_KNOBS` is added to ``train``);
    * ``fit`` receives exactly the training and validation rows, never a test row, and in
      arrays that share no memory with the data set (through which test rows could be read);
      it returns the classifier and sets ``history_``, ``n_epochs_``, ``best_epoch_``,
      ``train_accuracy_`` and ``val_accuracy_``;
    * ``predict`` returns an int64 array of one class in ``[0, n_classes)`` per row;
    * predicting and computing features leave the fitted state unchanged (the model does not
      learn from the rows it is asked about, such as the test partition);
    * ``has_features``: agrees with ``ModelSpec.has_features``; ``features(X)`` is a finite
      float array of shape ``(n, d)``; a torch model's head maps those features to logits;
      ``predict_proba``, if present, gives finite probabilities summing to 1;
    * the same seed gives the same predictions and features;
    * optionally, test accuracy of at least ``min_accuracy``.

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
        ``ModelContext.train``, the training budget (e.g. ``{"max_epochs": 1}`` keeps a check
        fast); default ``{}``, the model's own defaults.
    seed : int
        ``ModelContext.seed`` of both builds, and the seed of the split.
    min_accuracy : float, optional
        Fail if the test accuracy is lower (meaningful on real data such as ``"digits"``).

    Returns
    -------
    CheckReport

    Raises
    ------
    ConformanceError
        At the first rule the model breaks.
    """
    spec, registry = _resolve("models", ModelSpec, model, registry)
    checks = _Checks("model", spec)
    _check_common_fields(checks, spec, ("build",), ("requires_image", "in_default_run"))
    if spec.has_features not in (None, True, False):
        checks.fail("spec-flags", f"has_features is {spec.has_features!r}",
                    "set has_features to True, False or leave it None")
    for shape in spec.image_shapes:
        if len(tuple(shape)) != 3:
            checks.fail("spec-image-shapes", f"image_shapes holds {shape!r}, not (C, H, W)",
                        "list every accepted shape as a (channels, height, width) tuple")

    ds = _model_data(spec, registry, dataset, image_shape, seed)
    split = _split(ds, seed)
    budget = {**UNUSED_TRAIN_KNOBS, **(train or {})}

    first = _fit_checked(checks, spec, ds, split, seed, budget, train or {})
    _check_fitted(checks, first, ds, split)
    _check_features(checks, spec, first, ds, split)
    _check_state_unchanged(checks, first)
    second = _fit_checked(checks, spec, ds, split, seed, budget, train or {})
    _check_deterministic(checks, first, second, ds, split)
    if first.inner is second.inner:
        checks.fail("build-fresh", "build(ctx) returned the same object twice",
                    "return a new, untrained classifier from every build(ctx) call")
    checks.ok("build-fresh")
    if min_accuracy is not None:
        acc = first.result["accuracy"]
        if acc < min_accuracy:
            checks.fail("accuracy", f"test accuracy {acc:.3f} on '{ds.name}' is below "
                        f"min_accuracy={min_accuracy}", "check the model learns (budget, lr)")
        checks.ok("accuracy")
    return checks.report


def _model_data(spec, registry, dataset, image_shape, seed) -> Dataset:
    """Return the data check_model trains on (see its ``dataset`` parameter)."""
    if isinstance(dataset, Dataset):
        return dataset
    if isinstance(dataset, str):
        registry = registry if registry is not None else _default_registry()
        return registry.load_dataset(dataset)
    if image_shape is None and spec.image_shapes:
        image_shape = tuple(spec.image_shapes[0])
    if image_shape is None and spec.requires_image:
        image_shape = (1, 8, 8)
    return synthetic_dataset(image_shape=image_shape, seed=seed)


@dataclass
class _Fit:
    """One training of the model through robench's fit path, as the spy saw it."""

    inner: object  # the classifier build(ctx) returned
    spy: "_Spy"
    result: dict  # what fit_and_score returned


class _Spy:
    """Wrap a built classifier: forward everything, record what fit and predict exchange."""

    def __init__(self, inner, checks: _Checks, dataset: Dataset):
        self._kit_inner = inner
        self._kit_checks = checks
        self._kit_dataset = dataset
        self._kit_fit_args = None
        self._kit_fit_returned = None
        self._kit_state_after_fit = None
        self._kit_predictions = []  # (rows given, what predict returned)

    def __getattr__(self, name):
        if name.startswith("_kit_"):  # not set yet (e.g. while copying): never recurse
            raise AttributeError(name)
        return getattr(self._kit_inner, name)

    def fit(self, X, y, X_val, y_val):
        full = self._kit_dataset.X
        for what, arr in (("X", X), ("X_val", X_val)):
            if isinstance(arr, np.ndarray) and np.may_share_memory(arr, full):
                self._kit_checks.fail(
                    "fit-inputs-are-copies",
                    f"the {what} handed to fit shares memory with the whole data set, so the "
                    f"model could read the test rows through {what}.base",
                    "hand fit copies of the training rows (index with an array: X[train_idx])")
        self._kit_fit_args = tuple(np.array(a, copy=True) for a in (X, y, X_val, y_val))
        self._kit_fit_returned = self._kit_inner.fit(X, y, X_val, y_val)
        self._kit_state_after_fit = _state_digest(self._kit_inner)
        return self

    def predict(self, X):
        out = self._kit_inner.predict(X)
        _check_labels(self._kit_checks, out, len(X), self._kit_dataset.n_classes)
        self._kit_predictions.append((np.array(X, copy=True), np.array(out, copy=True)))
        return out


def _robench_fit_path():
    """Return the function robench's protocols train and score a model with.

    Coupling point with the core: the kit trains through this function so that it checks
    the path real trials take.
    """
    from robench.run.trials import fit_and_score

    return fit_and_score


def _fit_once(checks, spec, ds, split, seed, budget) -> _Fit:
    built = []

    def build(ctx):
        inner = spec.build(ctx)
        missing = [m for m in ("fit", "predict") if not callable(getattr(inner, m, None))]
        if missing:
            checks.fail("build", f"build(ctx) returned {type(inner).__name__}, which has no "
                        f"{' or '.join(missing)} method",
                        "return a classifier with fit(X, y, X_val, y_val) and predict(X) "
                        "(a torch model: robench.learn.train.TorchClassifier.from_context(ctx, "
                        "build_module))")
        spy = _Spy(inner, checks, ds)
        built.append(spy)
        return spy

    train_idx, val_idx, test_idx = split
    result = _robench_fit_path()(dataclasses.replace(spec, build=build), ds, train_idx,
                                 val_idx, test_idx, seed=seed, train_budget=budget)
    spy = built[0]
    return _Fit(spy._kit_inner, spy, result)


def _fit_checked(checks, spec, ds, split, seed, budget, train) -> _Fit:
    """Train once with ``budget`` (``train`` plus unused knobs); explain a failure."""
    try:
        fitted = _fit_once(checks, spec, ds, split, seed, budget)
    except ConformanceError:
        raise
    except Exception as exc:  # noqa: BLE001 - the model's own error is the finding
        # Did the knobs the model does not use cause it? Try once without them.
        try:
            _fit_once(checks, spec, ds, split, seed, dict(train))
        except Exception:  # noqa: BLE001 - fails either way: report the first error
            checks.fail("fit", f"building and fitting on {ds.n_samples} rows of '{ds.name}' "
                        f"({ds.n_features} features, image_shape {ds.image_shape}) raised "
                        f"{type(exc).__name__}: {exc}")
        checks.fail(
            "unused-train-knobs",
            f"build(ctx) or fit raised {type(exc).__name__}: {exc} when ctx.train held keys "
            f"the model does not use ({', '.join(sorted(UNUSED_TRAIN_KNOBS))}), and worked "
            "without them; protocols add their own knobs (shifted-cv sends mc_samples)",
            "read only the keys you need: robench.learn.train.TorchClassifier.from_context(ctx, "
            "build_module), or robench.learn.train.training_budget(ctx.train), never **ctx.train")
    checks.ok("build")
    checks.ok("unused-train-knobs")
    return fitted


def _check_labels(checks, out, n: int, n_classes: int) -> None:
    """Check what predict returned for ``n`` rows."""
    fix = ("return np.asarray(pred, dtype=np.int64), one class index per row "
           "(a torch model: logits.argmax(1))")
    if not isinstance(out, np.ndarray):
        checks.fail("predict-type", f"predict returned {type(out).__name__}, not a numpy array",
                    fix)
    if out.shape != (n,):
        checks.fail("predict-shape", f"predict returned shape {out.shape} for {n} rows; "
                    f"expected ({n},)", fix)
    if np.issubdtype(out.dtype, np.floating) and not np.isfinite(out).all():
        checks.fail("predict-finite", f"predict returned {int((~np.isfinite(out)).sum())} "
                    f"NaN or infinite values among {n}", "check the model for diverging "
                    "training (lr, normalisation) and " + fix)
    if out.dtype != np.int64:
        checks.fail("predict-dtype", f"predict returned dtype {out.dtype}; robench expects "
                    "int64 class indices", fix)
    if n and (out.min() < 0 or out.max() >= n_classes):
        checks.fail("predict-range", f"predict returned classes in [{out.min()}, {out.max()}]; "
                    f"expected 0..{n_classes - 1} (ctx.n_classes={n_classes})",
                    "map outputs to class indices 0..ctx.n_classes-1")
    checks.ok("predict")


def _check_fitted(checks, fitted: _Fit, ds: Dataset, split) -> None:
    """Check what fit received and left behind."""
    spy, inner = fitted.spy, fitted.inner
    train_idx, val_idx, test_idx = split
    X_fit, y_fit, X_val, y_val = spy._kit_fit_args
    rows = lambda A: sorted(r.tobytes() for r in np.ascontiguousarray(A))  # noqa: E731
    test_rows = {r.tobytes() for r in ds.X[test_idx]}
    for what, got, idx in (("fit rows (X)", X_fit, train_idx),
                           ("validation rows (X_val)", X_val, val_idx)):
        if rows(got) != rows(ds.X[idx]):
            leaked = sum(r.tobytes() in test_rows for r in np.ascontiguousarray(got))
            checks.fail("never-handed-test-rows",
                        f"the {what} handed to fit are not the split's {len(idx)} rows: got "
                        f"{len(got)}, {leaked} of them test rows",
                        "train and early-stop on the training partition only; the test "
                        "partition is for the score alone")
    if not (np.array_equal(y_fit, ds.y[train_idx]) and np.array_equal(y_val, ds.y[val_idx])):
        checks.fail("never-handed-test-rows", "the labels handed to fit are not the split's",
                    "hand fit y[train_idx] and y[val_idx]")
    checks.ok("never-handed-test-rows")

    if spy._kit_fit_returned is not inner:
        checks.fail("fit-returns-self", f"fit returned {spy._kit_fit_returned!r}, not the "
                    "classifier", "end fit with `return self`")
    checks.ok("fit-returns-self")

    def attr(name):
        if not hasattr(inner, name):
            checks.fail("fitted-attributes", f"after fit the classifier has no {name}",
                        "set history_ (list of per-epoch dicts, [] without epochs), n_epochs_, "
                        "best_epoch_, train_accuracy_ and val_accuracy_ in fit; robench stores "
                        "them with every trial (TorchClassifier does it for you)")
        return getattr(inner, name)

    history = attr("history_")
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        checks.fail("fitted-attributes", f"history_ is {type(history).__name__}, not a list "
                    "of dicts", "one dict per epoch, [] for a model without epochs")
    n_epochs, best = attr("n_epochs_"), attr("best_epoch_")
    for name, v in (("n_epochs_", n_epochs), ("best_epoch_", best)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            checks.fail("fitted-attributes", f"{name} is {v!r}, not an integer >= 0")
    if best > max(n_epochs, 1):
        checks.fail("fitted-attributes", f"best_epoch_={best} exceeds n_epochs_={n_epochs}")
    for name, optional in (("train_accuracy_", False), ("val_accuracy_", True)):
        v = attr(name)
        if v is None and optional:
            continue
        if not isinstance(v, (float, int, np.floating)) or not 0.0 <= float(v) <= 1.0:
            checks.fail("fitted-attributes", f"{name} is {v!r}, not a fraction in [0, 1]")
    checks.ok("fitted-attributes")

    Xt = ds.X[test_idx]
    with checks.calling("predict", f"predict on {len(Xt)} test rows"):
        pred = inner.predict(Xt)
    _check_labels(checks, pred, len(Xt), ds.n_classes)
    proba = getattr(inner, "predict_proba", None)
    if callable(proba):
        with checks.calling("predict-proba", "predict_proba"):
            P = np.asarray(proba(Xt))
        if P.shape != (len(Xt), ds.n_classes) or not np.isfinite(P).all() or not np.allclose(
                P.sum(axis=1), 1.0, atol=1e-4) or P.min() < 0:
            checks.fail("predict-proba", f"predict_proba returned shape {P.shape}; expected "
                        f"({len(Xt)}, {ds.n_classes}) finite probabilities, rows summing to 1",
                        "return softmax probabilities, one row per row of X")
        checks.ok("predict-proba")
    else:
        checks.skip("predict-proba", "the classifier has no predict_proba (optional)")


def _check_features(checks, spec: ModelSpec, fitted: _Fit, ds: Dataset, split) -> None:
    """Check has_features against the spec, and features / the head where there are some."""
    inner = fitted.inner
    has = getattr(inner, "has_features", False)
    if spec.has_features is not None and bool(has) != spec.has_features:
        checks.fail("has-features", f"ModelSpec.has_features is {spec.has_features} but the "
                    f"built classifier's has_features is {has!r}",
                    "make them agree: feature-space metrics plan by the spec and read the "
                    "classifier")
    checks.ok("has-features")
    if not has:
        checks.skip("features", "the classifier has no feature space (has_features is False); "
                                "feature-space metrics skip it")
        checks.skip("features-head", "no feature space")
        return
    if not callable(getattr(inner, "features", None)):
        checks.fail("features", "has_features is True but the classifier has no features "
                    "method", "define features(X) returning penultimate activations, or set "
                    "has_features = False")
    Xt = ds.X[split[2]]
    with checks.calling("features", "features(X)"):
        Z = inner.features(Xt)
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.shape[0] != len(Xt) or Z.shape[1] < 1:
        checks.fail("features", f"features returned shape {Z.shape} for {len(Xt)} rows; "
                    "expected (n, d) with d >= 1", "return one feature row per input row")
    if not np.issubdtype(Z.dtype, np.floating) or not np.isfinite(Z).all():
        checks.fail("features", f"features returned dtype {Z.dtype} with "
                    f"{int((~np.isfinite(Z.astype(float))).sum())} NaN or infinite values",
                    "return finite float activations")
    checks.ok("features")
    if getattr(inner, "module_", None) is None and not callable(
            getattr(inner, "coverage_space", None)):
        checks.skip("features-head", "not a torch classifier (no module_) and no "
                                     "coverage_space(): coverage records it as not applicable")
        return
    from robench.learn.features import feature_space

    with checks.calling("features-head", "robench.learn.features.feature_space(classifier)"):
        space, why = feature_space(inner)
    if space is None:
        checks.skip("features-head", f"no layer with a head to read: {why}")
        return
    with checks.calling("features-head", f"the {space.layer} layer's encode and head"):
        L = np.asarray(space.logits(space.encode(Xt)))
    if L.shape != (len(Xt), ds.n_classes) or not np.isfinite(L).all():
        checks.fail("features-head", f"the module's head gave shape {L.shape} (finite: "
                    f"{bool(np.isfinite(L).all())}) on its {space.layer} features; expected "
                    f"({len(Xt)}, {ds.n_classes}) finite logits",
                    "the module's head (nn.Linear) must map features(x) to the logits")
    checks.ok("features-head")


def _check_state_unchanged(checks, fitted: _Fit) -> None:
    """Check predict/features/predict_proba left the fitted state as fit left it."""
    before, after = fitted.spy._kit_state_after_fit, _state_digest(fitted.inner)
    changed = sorted(k for k in before if after.get(k) != before[k])
    if changed:
        checks.fail("predict-does-not-learn",
                    f"predicting changed the fitted classifier ({', '.join(changed)}): it "
                    "learns from the rows it is asked about, such as the test partition",
                    "leave the model as fit left it in predict and features (torch: eval "
                    "mode, no running statistics updated on test data)")
    checks.ok("predict-does-not-learn")


def _check_deterministic(checks, first: _Fit, second: _Fit, ds, split) -> None:
    """Check two builds with the same seed predicted, and embed, the same."""
    p1, p2 = first.spy._kit_predictions[0][1], second.spy._kit_predictions[0][1]
    if not np.array_equal(p1, p2):
        checks.fail("deterministic", f"two builds with the same ctx.seed predicted "
                    f"{int((p1 != p2).sum())} of {len(p1)} rows differently",
                    "seed everything random from ctx.seed (torch.manual_seed, "
                    "np.random.default_rng(ctx.seed), random_state=ctx.seed)")
    if getattr(first.inner, "has_features", False):
        Xt = ds.X[split[2]]
        z1 = np.asarray(first.inner.features(Xt), dtype=np.float64)
        z2 = np.asarray(second.inner.features(Xt), dtype=np.float64)
        if z1.shape != z2.shape or not np.allclose(z1, z2, rtol=1e-5, atol=1e-6):
            checks.fail("deterministic", "two builds with the same ctx.seed gave different "
                        "features", "seed everything random from ctx.seed")
    checks.ok("deterministic")


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


def _plain(value):
    """Return ``value`` with numpy scalars and arrays made plain Python, for json."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


# --- data sets -------------------------------------------------------------------------------


def check_dataset(dataset: Union[str, DatasetSpec], registry=None) -> CheckReport:
    """Check that a data set loads as robench expects, and the same every time.

    Checked: the spec's fields; ``load()`` returns a :class:`robench.data.Dataset` named like
    the spec; ``X`` is finite, 2-D float32; ``y`` holds int64 labels ``0..C-1`` with every
    class present; ``sources`` exist if and only if ``has_sources`` (one id per row, at least
    two per class, so a source can be held out); images (``is_image``) have values in [0, 1]
    and an ``image_shape`` whose product is the number of features and which equals
    ``DatasetSpec.image_shape`` when declared; two loads give the same fingerprint.

    Parameters
    ----------
    dataset : str or DatasetSpec
        The spec, or the name of a data set in ``registry``.
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.

    Returns
    -------
    CheckReport

    Raises
    ------
    ConformanceError
        At the first rule the data set breaks.
    """
    spec, _ = _resolve("datasets", DatasetSpec, dataset, registry)
    checks = _Checks("data set", spec)
    _check_common_fields(checks, spec, ("load",), ("has_sources", "is_image"))
    if spec.image_shape is not None and len(tuple(spec.image_shape)) != 3:
        checks.fail("spec-image-shape", f"image_shape is {spec.image_shape!r}, not (C, H, W)")

    with checks.calling("load", "load()"):
        ds = spec.load()
    if not isinstance(ds, Dataset):
        checks.fail("load", f"load() returned {type(ds).__name__}, not a robench.data.Dataset",
                    "return robench.data.Dataset(name, X, y, sources=..., image_shape=...)")
    if ds.name != spec.name:
        checks.fail("load", f"load() returned a Dataset named {ds.name!r}",
                    f"name it {spec.name!r}, as registered: messages and caches use it")
    checks.ok("load")
    try:
        validate(ds)  # again: a plugin may have changed the arrays after construction
    except DatasetError as exc:
        checks.fail("arrays", str(exc))
    if ds.X.dtype != np.float32 or ds.y.dtype != np.int64:
        checks.fail("arrays", f"X is {ds.X.dtype} and y is {ds.y.dtype}; expected float32 and "
                    "int64", "let robench.data.Dataset convert them; do not replace them later")
    checks.ok("arrays")

    if spec.has_sources:
        if ds.sources is None:
            checks.fail("sources", "has_sources=True but load() returned no sources",
                        "pass sources=<one integer id per row> to Dataset, or set "
                        "has_sources=False")
        per_class = [np.unique(ds.sources[ds.y == c]).size for c in range(ds.n_classes)]
        thin = [c for c, m in enumerate(per_class) if m < 2]
        if thin:
            checks.fail("sources", f"classes {thin} have fewer than 2 true sources; a "
                        "source-exclusive partition holds one whole source of every class out",
                        "give every class at least two sources")
        checks.ok("sources")
    elif ds.sources is not None:
        checks.fail("sources", "load() returned sources but the spec says has_sources=False",
                    "set has_sources=True so the oracle clusterer can use them")
    else:
        checks.skip("sources", "has_sources is False")

    if spec.is_image:
        if ds.image_shape is None:
            checks.fail("image-shape", "is_image=True but the Dataset has no image_shape",
                        "pass image_shape=(C, H, W) to Dataset")
        if spec.image_shape is not None and tuple(spec.image_shape) != tuple(ds.image_shape):
            checks.fail("image-shape", f"DatasetSpec.image_shape {tuple(spec.image_shape)} "
                        f"differs from the loaded image_shape {tuple(ds.image_shape)}",
                        "declare the shape load() returns; models are planned by it")
        if ds.X.min() < 0 or ds.X.max() > 1:
            checks.fail("image-range", f"image values span [{ds.X.min():.3g}, "
                        f"{ds.X.max():.3g}]; images are stored in [0, 1]",
                        "scale the pixels to [0, 1] (corruptions and attacks assume it)")
        checks.ok("image-shape")
    elif ds.image_shape is not None or spec.image_shape is not None:
        checks.fail("image-shape", "the data set has an image_shape but is_image=False",
                    "set is_image=True (image models are planned by it) or drop image_shape")
    else:
        checks.skip("image-shape", "tabular data set (is_image is False)")

    with checks.calling("deterministic", "a second load()"):
        again = spec.load()
    if not isinstance(again, Dataset) or again.fingerprint() != ds.fingerprint():
        checks.fail("deterministic", "two calls of load() returned different data",
                    "seed any randomness in load(); the fingerprint keys every cache")
    checks.ok("deterministic")
    return checks.report


# --- clusterers ------------------------------------------------------------------------------


def check_clusterer(clusterer: Union[str, ClustererSpec], registry=None, *, k: int = 3,
                    seed: int = 0) -> CheckReport:
    """Check that a clusterer returns valid, reproducible labels and fails cleanly.

    Run on ``k`` well-separated blobs of 20 rows each (the rows of one class, as robench
    clusters one class at a time). Checked: the spec's fields; labels are a 1-D integer array
    with one label in ``[0, k)`` per row (``info`` JSON-able if it returns
    :class:`robench.data.sources.Labels`); the same seed gives the same labels; with
    ``requires_true_sources`` it uses the true sources and refuses to run without them
    (ValueError), and without it it runs with ``true_sources=None``; with fewer distinct rows
    than ``k`` (2 distinct points repeated, then 2 rows) it returns valid labels or raises a
    ValueError that says why.

    Parameters
    ----------
    clusterer : str or ClustererSpec
        The spec, or the name of a clusterer in ``registry``.
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.
    k : int
        Requested number of clusters (>= 2).
    seed : int
        The ``seed`` passed to ``fit_predict``.

    Returns
    -------
    CheckReport

    Raises
    ------
    ConformanceError
        At the first rule the clusterer breaks.
    """
    spec, _ = _resolve("clusterers", ClustererSpec, clusterer, registry)
    checks = _Checks("clusterer", spec)
    _check_common_fields(checks, spec, ("fit_predict",), ("requires_true_sources",
                                                          "in_default_run"))
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(k), 20)
    Z = (rng.normal(0.0, 6.0, (k, 4))[truth] + rng.normal(0.0, 0.5, (truth.size, 4))).astype(
        np.float32)
    order = rng.permutation(truth.size)
    Z, truth = Z[order], truth[order]
    sources = truth if spec.requires_true_sources else None

    def run(Z, k, true_sources, what):
        with checks.calling("fit-predict", f"fit_predict on {what}"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. k-means convergence warnings on duplicates
            return spec.fit_predict(Z, k, seed=seed, true_sources=true_sources)

    labels = run(Z, k, sources, f"{len(Z)} rows in {k} blobs")
    _check_cluster_labels(checks, labels, len(Z), k, "labels")
    again = run(Z, k, sources, "the same rows again")
    if not np.array_equal(np.asarray(labels), np.asarray(again)):
        checks.fail("deterministic", "two calls with the same seed returned different labels",
                    "seed every random step from `seed` (random_state=seed); robench caches "
                    "sources by seed")
    checks.ok("deterministic")

    if spec.requires_true_sources:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spec.fit_predict(Z, k, seed=seed, true_sources=None)
        except ValueError:
            checks.ok("requires-true-sources")
        except Exception as exc:  # noqa: BLE001
            checks.fail("requires-true-sources", f"without true_sources it raised "
                        f"{type(exc).__name__}: {exc}",
                        "raise ValueError('... needs a data set with true source ids')")
        else:
            checks.fail("requires-true-sources", "requires_true_sources=True but it ran "
                        "without true_sources", "raise ValueError when true_sources is None, "
                        "or set requires_true_sources=False")
    else:
        checks.skip("requires-true-sources", "requires_true_sources is False (it ran with "
                                             "true_sources=None above)")

    for what, Zd, td in (("2 distinct rows repeated 6 times", np.repeat(Z[:2], 6, axis=0),
                          np.repeat(truth[:2], 6)),
                         ("2 rows", Z[:2], truth[:2])):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = spec.fit_predict(Zd, k, seed=seed,
                                       true_sources=td if spec.requires_true_sources else None)
        except ValueError:
            continue  # a clear refusal is fine: robench records it against the run
        except Exception as exc:  # noqa: BLE001
            checks.fail("degenerate-input", f"with k={k} on {what} it raised "
                        f"{type(exc).__name__}: {exc}",
                        "return valid labels or raise ValueError saying k is too large")
        _check_cluster_labels(checks, got, len(Zd), k, f"labels on {what}")
    checks.ok("degenerate-input")
    return checks.report


def _check_cluster_labels(checks, labels, n: int, k: int, what: str) -> None:
    fix = "return one integer label in [0, k) per row, e.g. KMeans(...).fit_predict(Z)"
    arr = np.asarray(labels)
    if arr.shape != (n,):
        checks.fail("labels", f"{what}: shape {arr.shape} for {n} rows", fix)
    if not np.issubdtype(arr.dtype, np.integer):
        checks.fail("labels", f"{what}: dtype {arr.dtype}, not integer", fix)
    if n and (arr.min() < 0 or arr.max() >= k):
        checks.fail("labels", f"{what}: values in [{arr.min()}, {arr.max()}] with k={k}", fix)
    info = getattr(labels, "info", None)
    if info is not None:
        try:
            json.dumps(_plain(info))
        except (TypeError, ValueError) as exc:
            checks.fail("labels", f"Labels.info is not JSON-able: {exc}",
                        "keep info to dicts, lists, strings and numbers")
    checks.ok("labels")


# --- metrics ---------------------------------------------------------------------------------


def check_metric(metric: Union[str, MetricSpec], registry=None, *, dataset: str = "digits",
                 model: Optional[str] = None, clusterer: Optional[str] = None,
                 repeats: int = 2, k: int = 2, seed: int = 0, settings=None) -> CheckReport:
    """Check a metric end to end: a tiny real run, then its aggregate on normal and bad groups.

    The metric runs through robench's runner with the in-process executor on one
    (data set, model, clusterer) into a throw-away database. Checked: the spec's fields and
    its protocol; the run's trials succeed; ``aggregate`` returns a list of
    :class:`robench.specs.Score` named after the metric (``Score.metric``), for the group's
    data set, with distinct sub-score names, values finite or None,
    ``ci_low <= value <= ci_high`` where given, ``n`` >= 0 and ``details`` a dict; the same
    trials give the same scores; a group whose trials all failed, and an empty group, give
    valid scores (values may be None) instead of raising.

    Parameters
    ----------
    metric : str or MetricSpec
        The spec, or the name of a metric in ``registry`` (it must be registered there: the
        runner looks it up).
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.
    dataset : str
        A registered data set (default ``digits``: 1,797 rows).
    model : str, optional
        A registered model; default ``mlp`` if the metric ``needs_features``, else ``svm``.
    clusterer : str, optional
        A registered clusterer, for metrics that ``uses_clusterer`` (default ``kmeans``).
    repeats, k, seed : int
        The run's repeats, sources per class and seed.
    settings : list of str or dict, optional
        Knobs, as ``robench run --set`` takes them (``["train.max_epochs=1"]``) or as
        ``{"train": {"max_epochs": 1}}``; use them to keep a heavy protocol small.

    Returns
    -------
    CheckReport

    Raises
    ------
    ConformanceError
        At the first rule the metric breaks.
    """
    spec, registry = _resolve("metrics", MetricSpec, metric, registry)
    if registry is None:
        registry = _default_registry()
    checks = _Checks("metric", spec)
    _check_common_fields(checks, spec, ("aggregate",),
                         ("higher_is_better", "uses_clusterer", "in_default_run",
                          "needs_features"))
    if not isinstance(spec.definition, str) or not spec.definition.strip():
        checks.fail("spec-definition", "definition is empty",
                    "state exactly how the score is computed: it is stored with every score")
    known = _known_protocols(registry)
    if spec.protocol not in known:
        checks.fail("spec-protocol", f"protocol {spec.protocol!r} is unknown; known: "
                    f"{', '.join(sorted(known))}", "name a protocol robench knows")
    checks.ok("spec")

    if model is None:
        model = "mlp" if spec.needs_features else "svm"
    if spec.uses_clusterer and clusterer is None:
        clusterer = "kmeans"
    with tempfile.TemporaryDirectory(prefix="robench-testing-") as tmp:
        report, rows, error = _tiny_run(
            registry, spec, dataset=dataset, model=model,
            clusterer=clusterer if spec.uses_clusterer else None, repeats=repeats, k=k,
            seed=seed, settings=settings, db=Path(tmp) / "check.db")
    combo = f"({dataset}, {model}, {clusterer or '-'})"
    if not rows:
        if error is not None:
            checks.fail("run", f"a run on {combo} raised {error}")
        why = "; ".join(s["reason"] for s in report["skipped"]) or "no trials planned"
        checks.fail("run", f"the run on {combo} planned no trial: {why}",
                    "pick a data set, model and clusterer the metric applies to")
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        first = (failed[0].get("error") or "").strip().splitlines()
        checks.fail("run", f"{len(failed)} of {len(rows)} trials of a run on {combo} failed; "
                    f"the first: {first[0] if first else '?'}",
                    "run the same with `robench run` and read the stored error")

    # The aggregate is called directly first: its own mistakes get a precise message before
    # the runner stumbles over them.
    group = {"dataset": dataset, "model": model, "clusterer": clusterer or ""}
    with checks.calling("aggregate-pure", "aggregate on the run's trials"):
        a = spec.aggregate(dict(group), [dict(r) for r in rows])
        b = spec.aggregate(dict(group), [dict(r) for r in rows])
    _check_scores(checks, spec, group, a, "aggregate on the run's trials")
    if not a:
        checks.fail("scores", "aggregate returned no score for a group of successful trials",
                    "return at least one Score (the headline) for a group")
    if _score_json(a) != _score_json(b):
        checks.fail("aggregate-pure", "aggregate gave different scores for the same trials",
                    "make aggregate a pure function of its rows (seed any resampling)")
    checks.ok("aggregate-pure")
    if error is not None:
        checks.fail("run", f"a run on {combo} raised {error}")
    _check_scores(checks, spec, group, report["scores"], "the run's scores")
    checks.ok("run")

    failed_rows = [_as_failed(r) for r in rows]
    with checks.calling("failed-trials", "aggregate on a group whose trials all failed",
                        "skip trials whose status is not 'ok' and return scores with value "
                        "None"):
        scores = spec.aggregate(dict(group), failed_rows)
    _check_scores(checks, spec, group, scores, "aggregate on failed trials")
    checks.ok("failed-trials")
    with checks.calling("empty-group", "aggregate on a group without trials",
                        "return scores with value None (or []) when there are no trials"):
        scores = spec.aggregate(dict(group), [])
    _check_scores(checks, spec, group, scores, "aggregate on no trials")
    checks.ok("empty-group")
    return checks.report


def _check_scores(checks, spec: MetricSpec, group: dict, scores, what: str) -> None:
    if not isinstance(scores, list):
        checks.fail("scores", f"{what}: aggregate returned {type(scores).__name__}, not a list",
                    "return a list of robench.specs.Score")
    seen = set()
    for s in scores:
        if not isinstance(s, Score):
            checks.fail("scores", f"{what}: an item is {type(s).__name__}, not a Score",
                        "return robench.specs.Score(...) objects")
        label = f"{what}: score {s.score!r}"
        if s.metric != spec.name:
            checks.fail("score-metric", f"{label} has metric={s.metric!r}",
                        f"set metric={spec.name!r}, the registered name: scores are stored, "
                        "reused and ranked by it")
        if s.dataset != group["dataset"]:
            checks.fail("score-group", f"{label} has dataset={s.dataset!r}; the group's is "
                        f"{group['dataset']!r}", "copy dataset from the group argument")
        if not isinstance(s.model, str) or not isinstance(s.clusterer, str):
            checks.fail("score-group", f"{label} has model={s.model!r}, clusterer="
                        f"{s.clusterer!r}", "use the group's names ('' where the score does "
                        "not depend on one)")
        if not isinstance(s.score, str) or not s.score:
            checks.fail("score-name", f"{what}: a Score has score={s.score!r}",
                        "name every sub-score (the headline usually after the metric)")
        ident = (s.dataset, s.model, s.clusterer, s.score)
        if ident in seen:
            checks.fail("score-name", f"{label} appears twice for ({s.dataset}, {s.model}, "
                        f"{s.clusterer})", "give each sub-score its own name: scores are "
                        "stored by (dataset, model, clusterer, metric, score)")
        seen.add(ident)
        for name in ("value", "ci_low", "ci_high"):
            v = getattr(s, name)
            if v is not None and (not isinstance(v, (int, float, np.number))
                                  or isinstance(v, bool) or not math.isfinite(float(v))):
                checks.fail("score-values", f"{label} has {name}={v!r}",
                            "use a finite float, or None when there is no value")
        lo, v, hi = s.ci_low, s.value, s.ci_high
        if (lo is not None and hi is not None and lo > hi) or (
                v is not None and ((lo is not None and lo > v) or (hi is not None and v > hi))):
            checks.fail("score-ci", f"{label}: ci_low={lo}, value={v}, ci_high={hi} are not "
                        "ordered", "return ci_low <= value <= ci_high")
        if s.n is not None and (not isinstance(s.n, (int, np.integer)) or s.n < 0):
            checks.fail("score-values", f"{label} has n={s.n!r}", "n is a count >= 0 or None")
        if not isinstance(s.details, dict):
            checks.fail("score-values", f"{label} has details of type "
                        f"{type(s.details).__name__}", "details is a dict (stored as JSON)")
    checks.ok("scores")


def _score_json(scores) -> str:
    return json.dumps([_plain(dataclasses.asdict(s)) for s in scores], sort_keys=True,
                      default=str)


def _as_failed(row: dict) -> dict:
    """Return the stored row of the same trial had it failed: results empty, status failed."""
    keep = ("key", "run_id", "dataset", "model", "clusterer", "protocol", "kind", "repeat",
            "seed", "params", "versions", "spec", "finished_at")
    out = {name: (value if name in keep else None) for name, value in row.items()}
    out.update(status="failed", error="RuntimeError: a failure made up by robench.testing")
    return out


# --- the one place that knows the runner, the run configuration and the store ---------------


def _known_protocols(registry) -> set:
    """Return the names of the protocols a metric may name (the registered ones)."""
    return set(registry.names("protocols"))


def _tiny_run(registry, spec: MetricSpec, *, dataset: str, model: str,
              clusterer: Optional[str], repeats: int, k: int, seed: int, settings,
              db: Path) -> tuple:
    """Run one metric on one combination in-process.

    Returns (report, trial rows, error): ``report`` holds the run's ``scores`` and
    ``skipped`` combinations; ``error`` is "Type: message" if the run raised (then the rows
    are whatever was stored before), else None.
    """
    from robench.run.config import RunConfig, parse_settings
    from robench.run.runner import execute
    from robench.storage.store import Store

    if settings is None:
        sections = {}
    elif isinstance(settings, dict):
        sections = {name: dict(knobs) for name, knobs in settings.items()}
    else:
        sections = parse_settings(list(settings), registry)
    cfg = RunConfig(datasets=[dataset], models=[model],
                    clusterers=[clusterer] if clusterer else [], metrics=[spec.name],
                    repeats=repeats, k=k, seed=seed, executor="local", jobs=1,
                    settings=sections).resolve(registry)
    report, error = {"scores": [], "skipped": []}, None
    with Store(db) as store:
        try:
            done = execute(cfg, registry, store, command="robench.testing.check_metric")
            report = {"scores": done.scores, "skipped": done.skipped}
        except Exception as exc:  # noqa: BLE001 - reported by check_metric with the rows
            error = f"{type(exc).__name__}: {exc}"
        rows = store.trials()
    return report, rows, error


# --- everything at once ----------------------------------------------------------------------


def check_all(registry=None, *, plugin: Optional[str] = None,
              kinds: tuple = ("datasets", "models", "clusterers", "metrics")) -> dict:
    """Run every check on every component of ``registry`` (or of one plugin) with defaults.

    Parameters
    ----------
    registry : robench.plugins.Registry, optional
        Default: the process-wide registry.
    plugin : str, optional
        Only the components this plugin registered (its name in ``robench plugins``, or its
        module path when loaded with ``make_registry(modules=[...])``).
    kinds : tuple of str
        Which kinds to check. Metrics run a real run each: slow metrics are better checked
        one by one with :func:`check_metric` and small ``settings``.

    Returns
    -------
    dict
        ``{(kind, name): CheckReport}``; the first failure raises :class:`ConformanceError`.
    """
    registry = registry if registry is not None else _default_registry()
    run = {"datasets": check_dataset, "models": check_model, "clusterers": check_clusterer,
           "metrics": check_metric}
    reports = {}
    for kind in kinds:
        for spec in registry.all(kind):
            if plugin is None or spec.plugin == plugin:
                reports[(kind, spec.name)] = run[kind](spec.name, registry)
    return reports
