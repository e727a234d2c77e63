"""The reference model: one model per (data set, model, seed) trained on a standard split.

Metrics that read a trained model share it: repeat 0's random split (validation from the
training part), seeded like that trial, its weights cached under a content key.
"""

from __future__ import annotations

import time

import numpy as np

from robench.data.cache import content_key
from robench.stats.seeds import derived_seed
from robench.data.splitters import KIND_CODES, partition_rng, test_mask, validation_split
from robench.data.boundary import check_model_input
from robench.learn.features import train_reference
from robench.learn.inputs import model_inputs
from robench.specs import ModelContext


#: Stream of the derived seeds of repeats r > 0 (:func:`reference_seed`); the coverage
#: protocol's ``repeat_seed`` uses the same, so repeat r's reference model is shared.
REPEAT_STREAM = 0xC0FE


def reference_seed(seed: int, repeat: int) -> int:
    """Return repeat ``repeat``'s reference seed: ``seed`` for repeat 0, else a derived one."""
    return int(seed) if int(repeat) == 0 else derived_seed(int(seed), int(repeat), REPEAT_STREAM)


def reference_split(y, *, seed: int, test_size: float, val_fraction: float) -> tuple:
    """Return (fit, val, test) indices: the stratified random split of repeat 0."""
    mask = test_mask("random", y, None, seed=seed, repeat=0, test_size=test_size)
    fit, val = validation_split(np.flatnonzero(~mask), y, val_fraction,
                                partition_rng(seed, 0, "random", 1))
    return fit, val, np.flatnonzero(mask)


def fit_reference(spec: dict, env, dataset, *, applicable=None, build=None) -> dict:
    """Build and train (or load from the cache) the reference model of a trial spec."""
    params, seed = spec["params"], int(spec["seed"])
    y = dataset.y
    fit, val, test = reference_split(y, seed=seed, test_size=params["test_size"],
                                     val_fraction=params["val_fraction"])
    train_seed = derived_seed(seed, 0, KIND_CODES["random"])
    ctx = ModelContext(dataset.n_features, dataset.n_classes, dataset.image_shape, train_seed,
                       dict(params["train"]))
    build = build or env.registry.get("models", spec["model"]).build
    clf = build(ctx)
    out = {"fit": fit, "val": val, "test": test, "clf": clf, "hit": False, "model_key": None,
           "base": {"n_train": int(len(fit)), "n_val": int(len(val)), "n_test": int(len(test))},
           "not_applicable": applicable(clf) if applicable else None}
    if out["not_applicable"]:
        return out
    out["model_key"] = content_key("reference-model", dataset.fingerprint(), spec["model"],
                                   spec["versions"]["model"], params["train"],
                                   params["test_size"], params["val_fraction"], seed)

    # The splits as the model takes them (robench.learn.inputs.model_inputs): Rows read a batch at a
    # time for a torch model, the split's rows alone for others; never the data set as float32.
    fit_X, val_X, X = model_inputs(clf, dataset, fit, val)
    check_model_input(X, spec["model"], f"rows of data set '{dataset.name}'")
    out["clf"], out["hit"] = train_reference(clf, fit_X, y[fit], val_X, y[val],
                                             key=out["model_key"])
    return out


def trial_row(base: dict, clf, accuracy: float, extra: dict, t0: float) -> dict:
    """Return the stored row of a reference-model trial: sizes, accuracy, training log, extra."""
    return {**base, "accuracy": accuracy,
            "train_accuracy": _maybe_float(getattr(clf, "train_accuracy_", None)),
            "val_accuracy": _maybe_float(getattr(clf, "val_accuracy_", None)),
            "epochs": int(getattr(clf, "n_epochs_", 0) or 0),
            "best_epoch": int(getattr(clf, "best_epoch_", 0) or 0),
            "history": list(getattr(clf, "history_", []) or []), "not_applicable": None,
            "extra": extra, "seconds": time.perf_counter() - t0}


def not_applicable_row(base: dict, reason: str, t0: float) -> dict:
    """Return the stored row of a reference trial whose model the protocol cannot measure."""
    return {**base, "accuracy": None, "not_applicable": reason,
            "extra": {"not_applicable": reason}, "seconds": time.perf_counter() - t0}


def _maybe_float(v):
    return None if v is None else float(v)
