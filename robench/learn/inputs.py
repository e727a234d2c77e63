"""The splits of a data set as a model takes them: views, uint8 pixels or float32 rows."""

from __future__ import annotations

from robench.data.references import compact_data


def model_inputs(model, dataset, train_idx, val_idx) -> tuple:
    """Return (training rows, validation rows, all rows) as ``model`` takes them.

    ``accepts_rows``: :class:`robench.data.Rows` views; else arrays (uint8 if it
    ``accepts_uint8``), converted per split; ``ROBENCH_COMPACT_DATA=0``: float32, copied whole.
    """
    if not compact_data():
        X = dataset.X
        return X[train_idx], X[val_idx], X
    if getattr(model, "accepts_rows", False):
        return dataset.view(train_idx), dataset.view(val_idx), dataset.view()
    if dataset.pixels and getattr(model, "accepts_uint8", False):
        return dataset.take(train_idx), dataset.take(val_idx), dataset.view()
    return dataset.rows(train_idx), dataset.rows(val_idx), dataset.view()
