"""The data set container every component reads, and its validation."""

from __future__ import annotations

import hashlib
from typing import Optional

import numpy as np

#: The only compact representation: uint8 pixels, value / 255 in float32.
PIXEL_SCALE = 255


class DatasetError(ValueError):
    """A data set is malformed; the message says what is wrong."""


def pixels_to_float(rows: np.ndarray) -> np.ndarray:
    """Return uint8 pixel rows as float32 in [0, 1] (value / 255, rounded once in float32)."""
    return np.asarray(rows).astype(np.float32) / np.float32(PIXEL_SCALE)


class Dataset:
    """Arrays X (n, d) float32 and y (n,) int64, plus optional true sources and image shape.

    ``X`` is flat: an image data set stores each image as a row of ``C*H*W`` values in
    ``[0, 1]`` and sets ``image_shape = (C, H, W)``. ``sources`` holds true source ids where the
    data set has them (the ``oracle`` clusterer reads them). Classes are ``0..n_classes-1``.

    Image data can be held compactly: with ``pixels=True``, ``X`` is given as uint8 values
    0..255 and kept so (4x smaller; possibly a memory map shared by the workers); the float
    value of a pixel is ``value / 255`` in float32. ``raw`` is the array as held; ``X`` is
    always float32 (for compact data it is converted once, when first read, and kept);
    ``rows(idx)`` converts only the rows asked for. Models that convert per batch
    (``accepts_uint8 = True``, as :class:`robench.train.TorchClassifier`) are handed ``raw``.
    Without ``pixels``, ``X`` is converted to float32 as given (no scaling).
    """

    def __init__(self, name: str, X, y, sources=None, image_shape=None, class_names=None,
                 *, pixels: bool = False):
        self.name = name
        if pixels:
            X = np.asanyarray(X)  # a memory map stays one
            if X.dtype != np.uint8:
                raise DatasetError(f"data set '{name}': pixels=True needs uint8 values, "
                                   f"got {X.dtype}")
            self.raw = X if X.flags.c_contiguous else np.ascontiguousarray(X)
        else:
            self.raw = np.ascontiguousarray(X, dtype=np.float32)
        self._X = None
        self.y = np.asarray(y)
        self.sources = None if sources is None else np.asarray(sources, dtype=np.int64)
        self.image_shape = image_shape
        self.class_names = list(class_names or [])
        validate(self)
        self.y = self.y.astype(np.int64)
        if not self.class_names:
            self.class_names = [str(c) for c in range(self.n_classes)]
        self._fingerprint = None

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, n={self.n_samples}, d={self.n_features}, "
                f"classes={self.n_classes}, {self.raw.dtype})")

    @property
    def pixels(self) -> bool:
        """True if X is held as uint8 pixels (value / 255)."""
        return self.raw.dtype == np.uint8

    @property
    def X(self) -> np.ndarray:
        """Return all rows as float32 (converted once and kept, for compact data)."""
        if not self.pixels:
            return self.raw
        if self._X is None:
            self._X = pixels_to_float(self.raw)
        return self._X

    def rows(self, idx=None) -> np.ndarray:
        """Return the rows ``idx`` (all if None) as float32, converting only those."""
        if not self.pixels:
            return self.raw if idx is None else self.raw[idx]
        if self._X is not None:
            return self._X if idx is None else self._X[idx]
        return pixels_to_float(self.raw if idx is None else self.raw[idx])

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1

    @property
    def n_samples(self) -> int:
        return int(self.raw.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.raw.shape[1])

    @property
    def nbytes(self) -> int:
        """Return the size of X as held (uint8 pixels: a quarter of float32)."""
        return int(self.raw.nbytes)

    def fingerprint(self) -> str:
        """Return a content hash of X, y, sources and shape (the cache key of this data).

        Compact (uint8) data hashes its pixels and says so; float32 data hashes exactly as
        before compact data existed, so its keys did not change.
        """
        if self._fingerprint is None:
            h = hashlib.sha256()
            for arr in (self.raw, self.y, self.sources):
                if arr is not None:
                    h.update(str(arr.shape).encode())
                    h.update(np.ascontiguousarray(arr).tobytes())
            h.update(repr(self.image_shape).encode())
            if self.pixels:
                h.update(b"uint8-pixels/255")
            self._fingerprint = h.hexdigest()[:20]
        return self._fingerprint


def validate(ds: Dataset) -> None:
    """Raise DatasetError naming the first problem found in ``ds``."""
    X, y = ds.raw, ds.y
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
    if not ds.pixels and not _all_finite(X):
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
    elif ds.pixels:
        raise DatasetError(f"data set '{ds.name}': pixels=True needs an image_shape")
    if ds.class_names and len(ds.class_names) != len(classes):
        raise DatasetError(
            f"data set '{ds.name}': {len(ds.class_names)} class names for {len(classes)} classes"
        )


def _all_finite(X: np.ndarray, chunk: int = 1 << 22) -> bool:
    """Return whether every value of X is finite, in chunks (no full-size temporary)."""
    flat = X.reshape(-1)
    return all(np.isfinite(flat[i:i + chunk]).all() for i in range(0, flat.size, chunk))
