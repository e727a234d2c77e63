"""Checks at the model boundary: every array handed to a model is finite, predictions valid.

:func:`check_finite` where an array is made (a corruption, an attack), :func:`check_model_input`
where it is handed to a model; docs/guarantees.md ("How the science is pinned") says why.
"""

from __future__ import annotations

import numpy as np
from robench.data import Rows


class NonFiniteError(ValueError):
    """A made array (corrupted or attacked images) holds NaN or inf values."""


class NonFiniteModelInput(NonFiniteError):
    """An array about to be handed to a model holds NaN or inf values."""


#: Rows checked at a time when the rows are a :class:`robench.data.Rows` view (read in batches).
CHECK_BATCH = 4096


def nonfinite_rows(arrays) -> int:
    """Return how many rows of ``arrays`` hold a NaN or inf (Rows read in batches, never copied)."""
    if isinstance(arrays, Rows):
        if not np.issubdtype(arrays.dtype, np.inexact):
            return 0
        return sum(nonfinite_rows(b) for b in arrays.batches(CHECK_BATCH))
    a = np.asarray(arrays)
    if a.size == 0 or not np.issubdtype(a.dtype, np.inexact):
        return 0  # integers and booleans cannot hold NaN or inf
    if a.ndim == 0:
        return int(not np.isfinite(a))
    return int((~np.isfinite(a.reshape(a.shape[0], -1))).any(axis=1).sum())


def check_finite(arrays, what: str):
    """Return ``arrays`` unchanged, or raise :class:`NonFiniteError` naming their producer."""
    bad = nonfinite_rows(arrays)
    if bad:
        n = int(np.asarray(arrays).shape[0])
        raise NonFiniteError(f"{what}: {bad} of {n} images hold non-finite values (NaN or "
                             "inf); refusing to hand them to a model")
    return arrays


def check_model_input(arrays, model: str, what: str):
    """Return ``arrays`` unchanged, or raise :class:`NonFiniteModelInput`.

    ``model``: the model's name; ``what``: what the rows are and where they come from, e.g.
    "test rows of data set 'digits'".
    """
    bad = nonfinite_rows(arrays)
    if bad:
        n = len(arrays) if np.ndim(arrays) else 1
        raise NonFiniteModelInput(
            f"model '{model}' was about to receive {what} of which {bad} of {n} rows hold NaN "
            "or inf values; refused at the model boundary (every array handed to a model must "
            "be finite): fix the producer of these rows")
    return arrays


class BadPredictions(ValueError):
    """A model's ``predict`` returned something that is not one class label per row."""


def check_predictions(pred, n_rows: int, n_classes: int, model: str, what: str = "rows"):
    """Return ``pred`` as int64 labels, or raise BadPredictions naming the model and the fault."""
    arr = np.asarray(pred)
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise BadPredictions(f"model '{model}' predicted an array of shape {arr.shape} for "
                             f"{n_rows} {what}; predict must return one class label per row")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise BadPredictions(f"model '{model}' predicted {int((~np.isfinite(arr)).sum())} "
                                 f"NaN or infinite label(s) for {what}")
        if not (arr == np.round(arr)).all():
            raise BadPredictions(f"model '{model}' predicted non-integer labels for {what}")
    elif arr.dtype.kind not in "iu":
        raise BadPredictions(f"model '{model}' predicted labels of dtype {arr.dtype} for "
                             f"{what}; expected integer class labels")
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        bad = int(((arr < 0) | (arr >= n_classes)).sum())
        raise BadPredictions(f"model '{model}' predicted {bad} label(s) outside 0..{n_classes - 1} "
                             f"for {what} (e.g. {arr[(arr < 0) | (arr >= n_classes)][0]!r})")
    return arr.astype(np.int64)


def predict_checked(model, X, n_classes: int, name: str, what: str = "rows"):
    """Return ``model.predict(X)`` checked by :func:`check_predictions`."""
    return check_predictions(model.predict(X), len(X), n_classes, name, what)
