"""Data: the container and its fingerprint, data and model references, sources, splitters,
corruptions, the on-disk cache, and the checks at the model boundary (finite inputs,
valid predictions).

``robench.data`` re-exports the container (:mod:`robench.data.dataset`), the names plugin
authors use: ``Dataset``, ``Rows``, ``DatasetError``, and the scikit-learn cross-validators
``SourceExclusiveSplit`` and ``SourceInclusiveSplit`` (:mod:`robench.data.sklearn_splitters`,
imported on first use: scikit-learn takes seconds to import).
"""

from robench.data.dataset import PIXEL_SCALE, Dataset, DatasetError, Rows, pixels_to_float, validate

__all__ = ["PIXEL_SCALE", "Dataset", "DatasetError", "Rows", "pixels_to_float", "validate",
           "SourceExclusiveSplit", "SourceInclusiveSplit"]
_SKLEARN_NAMES = ("SourceExclusiveSplit", "SourceInclusiveSplit")


def __getattr__(name):
    if name in _SKLEARN_NAMES:
        from robench.data import sklearn_splitters

        return getattr(sklearn_splitters, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
