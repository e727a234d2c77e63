"""Data: the container, references, sources, splitters, corruptions, cache, boundary checks.

Re-exports what plugin authors use: ``Dataset``, ``Rows``, ``DatasetError`` and the
cross-validators ``SourceExclusiveSplit``, ``SourceInclusiveSplit`` (imported on first use).
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
