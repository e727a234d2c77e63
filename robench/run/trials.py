"""What every protocol shares: combinations, trial specs and keys (:func:`make_spec`), the
worker environment (:class:`TrialEnv`), fit-and-score.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from robench.stats.bits import pack_bits
from robench.data.boundary import check_model_input, predict_checked
from robench.data.cache import content_key
from robench.data import Rows, pixels_to_float
from robench.learn.inputs import model_inputs
from robench.specs import ClustererSpec, DatasetSpec, ModelContext, ModelSpec


@dataclass(frozen=True)
class Combo:
    """One (dataset, model, clusterer) combination a metric is evaluated on."""

    dataset: DatasetSpec
    model: ModelSpec
    clusterer: Optional[ClustererSpec]


def trial_key(spec: dict) -> str:
    """Return the key of a trial: a hash of the sorted JSON of exactly what defines it."""
    return content_key("trial", spec)


def keyed_spec(protocol: str, version: str, *, dataset: str, model: str, kind: str,
               repeat: int, seed: int, params: dict, versions: dict,
               clusterer: str = "") -> dict:
    """Return a trial spec keyed by a hash of the whole spec (for trials not per combination: a
    baseline, a model zoo); ``versions`` are those of what it uses beyond the protocol."""
    spec = {"protocol": protocol, "dataset": dataset, "model": model, "clusterer": clusterer,
            "kind": kind, "repeat": int(repeat), "seed": seed, "params": params,
            "versions": {"protocol": version, **versions}}
    spec["key"] = trial_key(spec)
    return spec


def make_spec(protocol: str, version: str, combo: Combo, cfg, registry, *, kind: str,
              repeat: int, params: dict, with_clusterer: bool) -> dict:
    """Return a keyed trial spec; without a clusterer the trial is shared by every clusterer."""
    versions = {**registry.dataset_versions(combo.dataset.name),
                "model": registry.component_version("models", combo.model.name)}
    if with_clusterer:
        versions["clusterer"] = registry.component_version("clusterers", combo.clusterer.name)
    return keyed_spec(protocol, version, dataset=combo.dataset.name, model=combo.model.name,
                      clusterer=combo.clusterer.name if with_clusterer else "", kind=kind,
                      repeat=repeat, seed=cfg.seed, params=params, versions=versions)


class TrialEnv:
    """What a trial can reach in its worker: the registry and its loaded data sets."""

    def __init__(self, registry):
        self.registry = registry

    def dataset(self, name: str):
        """Return the loaded data set ``name`` (loaded once per registry, so per worker)."""
        return self.registry.load_dataset(name)


def accuracy_per_class(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> list:
    """Return the accuracy of every class (None where the class has no test sample)."""
    masks = [y_true == c for c in range(n_classes)]
    return [float((y_pred[m] == c).mean()) if m.any() else None for c, m in enumerate(masks)]


def fit_and_score(model_spec: ModelSpec, dataset, train_idx, val_idx, test_idx, *,
                  seed: int, train_budget: dict) -> dict:
    """Train a fresh model on train (early stopping on val) and score it on test; ``fit`` sees
    the training and validation partitions only (robench invariant 1)."""
    y = dataset.y
    ctx = ModelContext(dataset.n_features, dataset.n_classes, dataset.image_shape, seed,
                       dict(train_budget))
    t0 = time.perf_counter()
    model = model_spec.build(ctx)
    fit_X, val_X, X = model_inputs(model, dataset, train_idx, val_idx)
    # The whole data set is handed to the model (fit, validation, then one prediction pass):
    # check it at the boundary, once per data set held in this process (its rows do not
    # change between trials; a scan of mnist-5k's every trial was fixed cost, issue 49).
    if getattr(dataset, "_rows_checked", None) is not dataset.raw:
        check_model_input(X, model_spec.name, f"rows of data set '{dataset.name}'")
        dataset._rows_checked = dataset.raw
    # A model offering defer_train_accuracy (robench.learn.train.TorchClassifier) skips its own pass
    # over the fit rows: the prediction below covers them, and gives the same accuracy.
    if getattr(model, "defer_train_accuracy", None) is False:
        model.defer_train_accuracy = True
    _before_fit(model)
    model.fit(fit_X, y[train_idx], val_X, y[val_idx])
    del fit_X, val_X  # a model that needed them whole keeps what it keeps, not this frame
    # One prediction pass over the whole data set gives test accuracy and, for free, the
    # whole-data-set accuracy and per-sample correctness (what estimators of a lost test set
    # read) and, for a model that deferred it, the accuracy on the fit rows.
    correct_all = predict_rows(model, X, dataset.n_classes, model_spec.name) == y
    train_accuracy = getattr(model, "train_accuracy_", None)
    if train_accuracy is None and getattr(model, "defer_train_accuracy", False):
        train_accuracy = model.train_accuracy_ = float(correct_all[train_idx].mean())
    pred = np.where(correct_all[test_idx], y[test_idx], -1)
    return {
        "accuracy": float(correct_all[test_idx].mean()), "all_accuracy": float(correct_all.mean()),
        "correct": pack_bits(correct_all),
        "per_class": accuracy_per_class(y[test_idx], pred, dataset.n_classes),
        "train_accuracy": _maybe_float(train_accuracy),
        "val_accuracy": _maybe_float(getattr(model, "val_accuracy_", None)),
        "n_train": int(len(train_idx)), "n_val": int(len(val_idx)), "n_test": int(len(test_idx)),
        "epochs": int(getattr(model, "n_epochs_", 0) or 0),
        "best_epoch": int(getattr(model, "best_epoch_", 0) or 0),
        "history": list(getattr(model, "history_", []) or []),
        "seconds": time.perf_counter() - t0,
    }


#: Rows per ``predict`` call in the prediction pass of a model that takes arrays: its float32
#: copy of a chunk is 4,096 x d (CIFAR-10: 50 MB) instead of the whole data set (737 MB).
PREDICT_CHUNK = 4096


def predict_rows(model, X, n_classes: int, name: str) -> np.ndarray:
    """Return the checked predictions of ``model`` for every row of ``X`` (array or Rows; a
    model that does not ``accepts_rows`` gets arrays in chunks of :data:`PREDICT_CHUNK` rows)."""
    if not isinstance(X, Rows) or getattr(model, "accepts_rows", False):
        return predict_checked(model, X, n_classes, name)
    to_float = X.dataset.pixels and not getattr(model, "accepts_uint8", False)
    chunks = (X[start:start + PREDICT_CHUNK] for start in range(0, max(len(X), 1), PREDICT_CHUNK))
    return np.concatenate([predict_checked(model, pixels_to_float(c) if to_float else c,
                                           n_classes, name) for c in chunks])


def _before_fit(model) -> None:
    """Show a model that is not a TorchClassifier to the active fit hook before its ``fit``
    (batched training's first pass then stops the trial before it trains in vain)."""
    train = sys.modules.get("robench.learn.train")
    hook = train.FIT_HOOK.get() if train is not None else None
    if hook is not None and not isinstance(model, train.TorchClassifier):
        hook(model, None, None, None, None)


def _maybe_float(v):
    return None if v is None else float(v)
