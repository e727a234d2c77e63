"""``robench.evaluate``: score a model on data from Python, without writing a plugin.

It plans, runs and stores through what ``robench run`` uses (the same trial keys: a second call
trains nothing); docs/data-and-models.md ("From Python") has how models and arrays are named.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
import warnings
from dataclasses import replace
from typing import Any, Iterable, Optional

import numpy as np

from robench.specs import DatasetSpec, ModelContext, ModelSpec
from robench.data import Dataset, DatasetError
from robench.builtin.references import image_rows
from robench.data.cache import set_cache_dir
from robench.plugins import make_registry
from robench.present.progress import Progress
from robench.run import execution
from robench.run.config import check_value, knob_sections, parse_duration
from robench.run.execution import choose
from robench.run import prepare as preparation  # preparation.prepare: tests replace it
from robench.storage.store import Store, default_path

#: The columns of every returned row, in order.
ROW_COLUMNS = ("dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high",
               "n", "higher_is_better", "details")
_API_PLUGIN = "robench.evaluate"


class Rows(list):
    """The score rows ``evaluate`` returns (a list of dicts), with ``run``: what the run did."""
    run: dict = {}


def _digest(*parts) -> str:
    blob = json.dumps(parts, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:8]


class SklearnClassifier:
    """Adapter: a scikit-learn estimator as a robench classifier (fresh clone per fit).

    ``seed`` becomes the clone's ``random_state`` where the estimator's is None.
    """

    has_features = False

    def __init__(self, estimator, *, seed: int = 0):
        self.estimator, self.seed = estimator, seed

    def __repr__(self) -> str:
        return f"SklearnClassifier({self.estimator!r}, seed={self.seed})"

    def fit(self, X, y, X_val, y_val) -> "SklearnClassifier":
        """Fit a clone on (X, y); (X_val, y_val) only sets ``val_accuracy_``."""
        from sklearn.base import clone

        model = clone(self.estimator)
        if model.get_params(deep=False).get("random_state", 0) is None:
            model.set_params(random_state=self.seed)
        self.model_ = model.fit(X, y)
        self.history_, self.n_epochs_, self.best_epoch_ = [], 0, 0
        self.train_accuracy_ = float(np.mean(self.predict(X) == y))
        self.val_accuracy_ = (float(np.mean(self.predict(X_val) == y_val))
                              if X_val is not None and len(X_val) else None)
        return self

    def predict(self, X) -> np.ndarray:
        """Return the predicted class of each row of ``X`` as int64."""
        return np.asarray(self.model_.predict(X)).astype(np.int64)


#: A default name longer than this shows the class and a digest of the parameters only.
NAME_MAX = 80


def _shown(value) -> Optional[str]:
    """Return how a parameter value is written in a default name, or None if not exactly."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if np.isfinite(value) else None
    return None


def sklearn_model_name(estimator) -> str:
    """Return the default name of an estimator, ``sklearn:LogisticRegression(C=0.5)``.

    A digest of every parameter is added where a value cannot be written exactly or the name
    would pass ``NAME_MAX`` characters, so different parameters never share a name.
    """
    params = estimator.get_params(deep=True)
    cls = type(estimator).__name__
    try:
        defaults = type(estimator)().get_params(deep=True)
    except Exception:  # noqa: BLE001 - no default constructor (a Pipeline): class and digest
        return f"sklearn:{cls}-{_digest(cls, params)}"
    changed = {k: v for k, v in sorted(params.items())
               if k not in defaults or repr(defaults[k]) != repr(v)}
    if not changed:
        return f"sklearn:{cls}"
    shown = {k: _shown(v) for k, v in changed.items()}
    exact = all(v is not None for v in shown.values())
    text = ", ".join(f"{k}={v}" for k, v in shown.items() if v is not None)
    name = f"sklearn:{cls}({text})"
    if exact and len(name) <= NAME_MAX:
        return name
    if len(name) > NAME_MAX - 9:  # cut after the last whole parameter that fits
        room = NAME_MAX - 9 - len(f"sklearn:{cls}(, ...)")
        kept = text[:room + 2].rsplit(", ", 1)[0] if len(text) > room else text
        name = f"sklearn:{cls}({kept[:room]}, ...)"
    return f"{name}-{_digest(cls, params)}"


def sklearn_model_spec(estimator, name: Optional[str] = None) -> ModelSpec:
    """Return the ModelSpec of a scikit-learn estimator (named by :func:`sklearn_model_name`)."""
    import sklearn

    digest = _digest(type(estimator).__name__, estimator.get_params(deep=True))
    return ModelSpec(sklearn_model_name(estimator) if name is None else name,
                     lambda ctx: SklearnClassifier(estimator, seed=ctx.seed),
                     f"scikit-learn {estimator!r} (robench.evaluate)",
                     version=f"sklearn-{sklearn.__version__}+{digest}",
                     has_features=False, plugin=_API_PLUGIN)


def _takes_context(factory) -> bool:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    required = [p for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(required) >= 1


def torch_model_spec(factory, ctx: ModelContext, name: Optional[str] = None) -> ModelSpec:
    """Return the ModelSpec of an ``nn.Module`` factory, checked by building it once."""
    import torch

    takes_ctx = _takes_context(factory)

    def build_module(ctx):
        return factory(ctx) if takes_ctx else factory()

    probe = build_module(ctx)
    if not isinstance(probe, torch.nn.Module):
        raise TypeError(f"the model factory {factory!r} returned {type(probe).__name__}, not a "
                        "torch nn.Module")
    has_features = callable(getattr(probe, "features", None))
    qualname = getattr(factory, "__qualname__", type(factory).__name__)
    try:
        source = inspect.getsource(factory)
    except (OSError, TypeError):
        source = qualname
    name = name or f"torch:{qualname.replace('<', '').replace('>', '')}"

    def build(ctx: ModelContext):
        from robench.learn.train import TorchClassifier

        clf = TorchClassifier.from_context(ctx, build_module)
        if not has_features:
            clf.has_features = False  # no features(): feature-space metrics do not apply
        return clf

    return ModelSpec(name, build, f"torch module from {qualname} (robench.evaluate)",
                     version=f"torch+{_digest(qualname, source)}", has_features=has_features,
                     plugin=_API_PLUGIN, requires_image=False)


def _codes(values, what: str):
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"evaluate: {what} must be 1-D (one per sample), got shape "
                         f"{values.shape}")
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64), [str(u) for u in uniques]


def arrays_dataset(data, name: Optional[str] = None):
    """Return a validated Dataset from ``(X, y)`` or ``(X, y, groups)``."""
    if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
        raise ValueError("evaluate: data must be a data set name or reference, a "
                         "robench.data.Dataset, or a tuple (X, y) or (X, y, groups)")
    X, y = np.asarray(data[0]), data[1]
    if len(y) != len(X):
        raise DatasetError(f"evaluate: X has {len(X)} rows and y has {len(y)} labels")
    y, classes = _codes(y, "y")
    groups = _codes(data[2], "groups")[0] if len(data) == 3 and data[2] is not None else None
    if X.ndim == 2:
        if not np.issubdtype(X.dtype, np.number) and X.dtype != np.bool_:
            raise DatasetError(f"evaluate: X must be numeric, got dtype {X.dtype}")
        flat, shape, pixels = X.astype(np.float32), None, False
    else:
        # uint8 images stay uint8 pixels (value / 255), converted per batch by torch models
        flat, shape, pixels = image_rows(X, "evaluate: X")
    ds = Dataset(name or "arrays", flat, y, sources=groups, image_shape=shape,
                 class_names=classes, pixels=pixels)
    # readable and unique: the shape as given, then the content fingerprint
    ds.name = name or f"arrays:{'x'.join(str(n) for n in X.shape)}-{ds.fingerprint()[:12]}"
    return ds


def dataset_spec(ds) -> DatasetSpec:
    """Return a DatasetSpec serving the in-memory Dataset ``ds``."""
    return DatasetSpec(ds.name, lambda: ds, f"in-memory arrays, {ds.n_samples} x "
                       f"{ds.n_features} (robench.evaluate)", version="1",
                       has_sources=ds.sources is not None, is_image=ds.image_shape is not None,
                       image_shape=ds.image_shape, fingerprint=ds.fingerprint,
                       plugin=_API_PLUGIN)


def evaluate(model, data, metrics: Optional[Iterable[str]] = None, *, clusterers=None,
             name: Optional[str] = None, data_name: Optional[str] = None,
             profile: str = "quick", repeats: Optional[int] = None, k: Optional[int] = None,
             seed: int = 0, settings: Optional[dict] = None, device: str = "auto",
             executor: str = "local", jobs: int = 1, db: Optional[str] = None,
             cache_dir: Optional[str] = None, rescore: bool = False,
             until: Optional[str] = None, budget=None, precision: Optional[float] = None,
             progress: bool = True, as_frame=None, registry=None):
    """Score ``model`` on ``data`` with ``metrics``; return the scores as rows.

    Parameters
    ----------
    model : str, scikit-learn estimator, nn.Module factory or robench.specs.ModelSpec
        A registered model name or reference (``"cnn-2"``, ``"timm:resnet18"``), an (unfitted)
        scikit-learn classifier, or a class/function returning a fresh torch ``nn.Module``
        (called with no argument, or with the trial's ModelContext).
    data : str, tuple or robench.data.Dataset
        A registered data set or reference (``"digits"``, ``"npz:x.npz"``), ``(X, y)`` or
        ``(X, y, groups)`` arrays, or a Dataset.
    metrics, clusterers : iterable of str, optional
        Names (``robench list``). Default: what ``robench run --all`` uses in ``profile``
        (inapplicable ones skipped).
    name, data_name : str, optional
        Names to store the model and the data under instead of the derived ones.
    profile, repeats, k, seed : as ``robench run --profile/-r/-k/--seed``.
    settings : dict, optional
        Knob values by section, e.g. ``{"train": {"max_epochs": 2}}`` (``robench knobs``).
    device : str
        ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (:mod:`robench.learn.devices`).
    executor, jobs : str, int
        Where trials run; in-memory models and arrays need ``local``.
    db, cache_dir : str, optional
        Results database (``$ROBENCH_DB`` or ``robench.db``) and cache directory
        (``$ROBENCH_CACHE_DIR`` or ``~/.cache/robench``).
    rescore : bool
        Recompute scores even where the stored ones are up to date.
    until, budget, precision : optional
        As ``robench run --until/--budget/--precision`` (``budget``: seconds or ``"10m"``);
        default: a race when ``budget`` is given, else every repeat at once.
    progress : bool
        Print the plan and each trial's progress on stderr, as ``robench run`` does.
    as_frame : bool, optional
        Return a pandas DataFrame (default: when pandas is installed) or a list of dicts.
    registry : robench.plugins.Registry, optional
        Registry to use (default: a fresh one with the installed plugins).

    Returns
    -------
    Rows or pandas.DataFrame
        One row per score (:data:`ROW_COLUMNS`). What the run did (``run_id``, ``planned``,
        ``stored``, ``ran``, ``failed``, ``skipped``, ``seconds``, ``db``, ``interrupted``,
        ``adaptive``) is in ``rows.run`` (``df.attrs["run"]`` for a DataFrame).

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression  # doctest: +SKIP
    >>> rows = robench.evaluate(LogisticRegression(max_iter=500), (X, y))
    >>> robench.evaluate("timm:resnet18", "digits", budget="10m")
    """
    if cache_dir:
        set_cache_dir(cache_dir)
    reg = registry if registry is not None else make_registry()
    seconds = parse_duration(budget) if isinstance(budget, str) else budget
    race = dict(until=choose(until, seconds, precision), budget=seconds, precision=precision)
    # the data first: a torch factory is probed with the data's shape
    dname, data_here = _add_data(reg, data, data_name)
    mname, model_here = _add_model(reg, model, name, dname, seed)
    in_memory = data_here + model_here
    if in_memory and executor != "local":
        raise ValueError(f"evaluate: {' and '.join(in_memory)} live(s) in this process; use "
                         "executor='local', or pass registered names / references (workers "
                         "read data by path, e.g. 'npz:/shared/x.npz')")
    prepared = preparation.prepare(reg, profile=profile, datasets=[dname], models=[mname],
                       clusterers=[clusterers] if isinstance(clusterers, str) else clusterers or (),
                       metrics=[metrics] if isinstance(metrics, str) else metrics or (),
                       repeats=repeats, k=k, seed=seed,
                       settings=_check_settings(settings or {}, reg), executor=executor,
                       jobs=jobs, device=device)
    execution.check(prepared, reg, **race)
    db = db or default_path()
    with Store(db) as store:
        report = execution.execute(prepared, reg, store, **race, max_repeats=repeats,
                                   command=f"robench.evaluate({mname!r}, {dname!r})",
                                   on_event=Progress() if progress else None, rescore=rescore)
    return _as_frame(_rows(report, db), as_frame)


def _add_data(registry, data, data_name: Optional[str]) -> tuple:
    """Return (the data set's name, [how it lives here] if in memory) after registering it."""
    if isinstance(data, str):
        return registry.get("datasets", data).name, []
    ds = data if isinstance(data, Dataset) else arrays_dataset(data, data_name)
    if data_name and isinstance(data, Dataset):
        ds.name = data_name
    registry.add("datasets", dataset_spec(ds))
    return ds.name, [f"data set '{ds.name}'"]


def _add_model(registry, model, name: Optional[str], dname: str, seed: int) -> tuple:
    """Return (the model's name, [how it lives here] if in memory) after registering it."""
    if isinstance(model, str):
        return registry.get("models", model).name, []
    if isinstance(model, ModelSpec):
        spec = model
    elif (torch := sys.modules.get("torch")) is not None and isinstance(model, torch.nn.Module):
        raise TypeError("evaluate: pass a factory (the module's class, or a function "
                        "returning a fresh module), not a module instance: every trial "
                        "trains a freshly initialised module")
    elif all(callable(getattr(model, a, None)) for a in ("fit", "predict", "get_params")):
        spec = sklearn_model_spec(model, name)
    elif callable(model):
        loaded = registry.load_dataset(dname)
        ctx = ModelContext(loaded.n_features, loaded.n_classes, loaded.image_shape, seed, {})
        spec = torch_model_spec(model, ctx, name)
    else:
        raise TypeError(f"evaluate: model must be a registered name or reference, a "
                        f"scikit-learn estimator or an nn.Module factory, got "
                        f"{type(model).__name__}")
    if name and spec.name != name:
        spec = replace(spec, name=name)
    registry.add("models", spec)
    return spec.name, [f"model '{spec.name}'"]


def _rows(report, db) -> Rows:
    """Return the report's scores as Rows, warning once if trials failed."""
    if report.failed:
        first = (report.failed[0].get("error") or "").splitlines()[0]
        warnings.warn(f"robench.evaluate: {len(report.failed)} trial(s) failed; the first: "
                      f"{first} (robench query \"select * from trials where status='failed'\")",
                      RuntimeWarning, stacklevel=3)
    rows = Rows({c: _plain(getattr(s, c)) for c in ROW_COLUMNS} for s in report.scores)
    rows.run = {"run_id": report.run_id, "planned": report.n_planned,
                "stored": report.n_cached, "ran": report.n_ran, "failed": len(report.failed),
                "skipped": list(report.skipped), "seconds": report.seconds, "db": str(db),
                "interrupted": report.interrupted, "adaptive": list(report.adaptive or [])}
    return rows


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, np.floating) else value


def _check_settings(settings: dict, registry) -> dict:
    """Return ``settings`` ({section: {knob: value}}) checked like ``--set`` values."""
    if not isinstance(settings, dict):
        raise ValueError("evaluate: settings must be a dict {section: {knob: value}}, e.g. "
                         "{'train': {'max_epochs': 2}}")
    sections = knob_sections(registry)
    out = {}
    for section, values in settings.items():
        if section not in sections or not isinstance(values, dict):
            raise ValueError(f"evaluate: settings section '{section}' is not one of "
                             f"{', '.join(sorted(sections))} (or its value is not a dict)")
        knobs = {k.name: k for k in sections[section][1]}
        for key, value in values.items():
            if key not in knobs:
                raise ValueError(f"evaluate: unknown {section} knob '{key}'; known: "
                                 f"{', '.join(sorted(knobs))}")
            out.setdefault(section, {})[key] = check_value(section, knobs[key], value,
                                                           convert=True)
    return out


def _as_frame(rows: Rows, as_frame):
    """Return ``rows`` as a pandas DataFrame where asked (default: when pandas is installed)."""
    if not (as_frame if as_frame is not None else importlib.util.find_spec("pandas")):
        return rows
    import pandas as pd

    frame = pd.DataFrame(list(rows), columns=list(ROW_COLUMNS))
    frame.attrs["run"] = dict(rows.run)
    return frame
