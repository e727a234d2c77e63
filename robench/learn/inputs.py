"""The splits of a data set as a model takes them: views, uint8 pixels or float32 rows."""

from __future__ import annotations

from robench.data.references import compact_data


def model_inputs(model, dataset, train_idx, val_idx) -> tuple:
    """Return (training rows, validation rows, all rows) as ``model`` takes them.

    * A model with ``accepts_rows`` (:class:`robench.learn.train.TorchClassifier`) gets
      :class:`robench.data.Rows` views: it reads a mini-batch at a time, so no split is copied
      and a memory-mapped data set is read from its file a batch at a time.
    * Any other model gets arrays: uint8 pixels as held if it ``accepts_uint8``, else float32
      rows converted for the split alone (never the whole data set).
    * With ``ROBENCH_COMPACT_DATA=0`` (the float32 path before issue 21, kept to compare) every
      model gets float32 arrays and the splits are copied whole, as they were.
    """
    if not compact_data():
        X = dataset.X
        return X[train_idx], X[val_idx], X
    if getattr(model, "accepts_rows", False):
        return dataset.view(train_idx), dataset.view(val_idx), dataset.view()
    if dataset.pixels and getattr(model, "accepts_uint8", False):
        return dataset.take(train_idx), dataset.take(val_idx), dataset.view()
    return dataset.rows(train_idx), dataset.rows(val_idx), dataset.view()
