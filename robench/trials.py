"""What every protocol shares: combinations, trial specs and keys, the worker environment,
fit-and-score.

A protocol (:class:`robench.specs.ProtocolSpec`) plans trial specs with :func:`make_spec` and
runs each in a worker, where :class:`TrialEnv` gives it the registry and the loaded data sets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from robench.bits import pack_bits
from robench.boundary import check_model_input, predict_checked
from robench.cache import content_key
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


def make_spec(protocol: str, version: str, combo: Combo, cfg, registry, *, kind: str,
              repeat: int, params: dict, with_clusterer: bool) -> dict:
    """Return a keyed trial spec; without a clusterer the trial is shared by every clusterer."""
    versions = {
        "protocol": version,
        **registry.dataset_versions(combo.dataset.name),
        "model": registry.component_version("models", combo.model.name),
    }
    if with_clusterer:
        versions["clusterer"] = registry.component_version("clusterers", combo.clusterer.name)
    spec = {
        "protocol": protocol,
        "dataset": combo.dataset.name,
        "model": combo.model.name,
        "clusterer": combo.clusterer.name if with_clusterer else "",
        "kind": kind,
        "repeat": int(repeat),
        "seed": cfg.seed,
        "params": params,
        "versions": versions,
    }
    spec["key"] = trial_key(spec)
    return spec


class TrialEnv:
    """What a trial can reach in its worker: the registry and its loaded data sets."""

    def __init__(self, registry):
        self.registry = registry

    def dataset(self, name: str):
        """Return the loaded data set ``name`` (loaded once per registry, so per worker)."""
        return self.registry.load_dataset(name)


def accuracy_per_class(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> list:
    """Return the accuracy of every class (None where the class has no test sample)."""
    out = []
    for c in range(n_classes):
        m = y_true == c
        out.append(float((y_pred[m] == c).mean()) if m.any() else None)
    return out


def fit_and_score(model_spec: ModelSpec, dataset, train_idx, val_idx, test_idx, *,
                  seed: int, train_budget: dict) -> dict:
    """Train a fresh model on train (early stopping on val) and score it on test.

    The model's ``fit`` receives the training and validation partitions only; the test
    indices are used after training, once, to measure accuracy (robench invariant 1).
    """
    y = dataset.y
    ctx = ModelContext(dataset.n_features, dataset.n_classes, dataset.image_shape, seed,
                       dict(train_budget))
    t0 = time.perf_counter()
    model = model_spec.build(ctx)
    # Compact data (uint8 pixels, maybe a shared memory map) goes to a model that converts
    # per batch as it is held; any other model gets float32 rows.
    X = dataset.raw if dataset.pixels and getattr(model, "accepts_uint8", False) else dataset.X
    # The whole data set is handed to the model (fit, validation, then one prediction pass):
    # check it once at the boundary.
    check_model_input(X, model_spec.name, f"rows of data set '{dataset.name}'")
    # A model offering defer_train_accuracy (robench.train.TorchClassifier) skips its own pass
    # over the fit rows: the prediction below covers them, and gives the same accuracy.
    if getattr(model, "defer_train_accuracy", None) is False:
        model.defer_train_accuracy = True
    model.fit(X[train_idx], y[train_idx], X[val_idx], y[val_idx])
    # One prediction pass over the whole data set gives test accuracy and, for free, the
    # whole-data-set accuracy and per-sample correctness (what estimators of a lost test set
    # read) and, for a model that deferred it, the accuracy on the fit rows.
    correct_all = predict_checked(model, X, dataset.n_classes, model_spec.name) == y
    train_accuracy = getattr(model, "train_accuracy_", None)
    if train_accuracy is None and getattr(model, "defer_train_accuracy", False):
        train_accuracy = model.train_accuracy_ = float(correct_all[train_idx].mean())
    pred = np.where(correct_all[test_idx], y[test_idx], -1)
    y_test = y[test_idx]
    return {
        "accuracy": float(correct_all[test_idx].mean()),
        "all_accuracy": float(correct_all.mean()),
        "correct": pack_bits(correct_all),
        "per_class": accuracy_per_class(y_test, pred, dataset.n_classes),
        "train_accuracy": _maybe_float(train_accuracy),
        "val_accuracy": _maybe_float(getattr(model, "val_accuracy_", None)),
        "n_train": int(len(train_idx)),
        "n_val": int(len(val_idx)),
        "n_test": int(len(test_idx)),
        "epochs": int(getattr(model, "n_epochs_", 0) or 0),
        "best_epoch": int(getattr(model, "best_epoch_", 0) or 0),
        "history": list(getattr(model, "history_", []) or []),
        "seconds": time.perf_counter() - t0,
    }


def _maybe_float(v):
    return None if v is None else float(v)
