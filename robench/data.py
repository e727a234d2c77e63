"""The data set container every component reads, and its validation."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np


class DatasetError(ValueError):
    """A data set is malformed; the message says what is wrong."""


@dataclass
class Dataset:
    """Arrays X (n, d) float32 and y (n,) int64, plus optional true sources and image shape.

    ``X`` is flat: an image data set stores each image as a row of ``C*H*W`` values in
    ``[0, 1]`` and sets ``image_shape = (C, H, W)``. ``sources`` holds true source ids where the
    data set has them (the ``oracle`` clusterer reads them). Classes are ``0..n_classes-1``.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    sources: Optional[np.ndarray] = None
    image_shape: Optional[tuple] = None
    class_names: list = field(default_factory=list)

    def __post_init__(self):
        self.X = np.ascontiguousarray(self.X, dtype=np.float32)
        self.y = np.asarray(self.y)
        if self.sources is not None:
            self.sources = np.asarray(self.sources, dtype=np.int64)
        validate(self)
        self.y = self.y.astype(np.int64)
        if not self.class_names:
            self.class_names = [str(c) for c in range(self.n_classes)]
        self._fingerprint = None

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def fingerprint(self) -> str:
        """Return a content hash of X, y, sources and shape (the cache key of this data)."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for arr in (self.X, self.y, self.sources):
                if arr is not None:
                    h.update(str(arr.shape).encode())
                    h.update(np.ascontiguousarray(arr).tobytes())
            h.update(repr(self.image_shape).encode())
            self._fingerprint = h.hexdigest()[:20]
        return self._fingerprint


def validate(ds: Dataset) -> None:
    """Raise DatasetError naming the first problem found in ``ds``."""
    X, y = ds.X, ds.y
    if X.ndim != 2:
        raise DatasetError(f"data set '{ds.name}': X must be 2-D (n, d), got shape {X.shape}")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DatasetError(
            f"data set '{ds.name}': y must be 1-D with one label per row of X "
            f"(X has {X.shape[0]} rows, y has shape {y.shape})"
        )
    if X.shape[0] == 0:
        raise DatasetError(f"data set '{ds.name}' is empty")
    if not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"data set '{ds.name}': labels must be integers, got {y.dtype}")
    classes = np.unique(y)
    if classes[0] != 0 or classes[-1] != len(classes) - 1:
        raise DatasetError(
            f"data set '{ds.name}': labels must be 0..C-1 with every class present, "
            f"got {classes.tolist()[:20]}"
        )
    if len(classes) < 2:
        raise DatasetError(f"data set '{ds.name}' has a single class")
    if not np.isfinite(X).all():
        raise DatasetError(f"data set '{ds.name}': X contains NaN or infinite values")
    if ds.sources is not None and ds.sources.shape != y.shape:
        raise DatasetError(
            f"data set '{ds.name}': sources must have one id per sample "
            f"({y.shape[0]}), got shape {ds.sources.shape}"
        )
    if ds.image_shape is not None:
        shape = tuple(int(s) for s in ds.image_shape)
        if len(shape) != 3 or int(np.prod(shape)) != X.shape[1]:
            raise DatasetError(
                f"data set '{ds.name}': image_shape {ds.image_shape} must be (C, H, W) "
                f"with C*H*W == {X.shape[1]} features"
            )
        ds.image_shape = shape
    if ds.class_names and len(ds.class_names) != len(classes):
        raise DatasetError(
            f"data set '{ds.name}': {len(ds.class_names)} class names for {len(classes)} classes"
        )
