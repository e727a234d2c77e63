"""The data set container every component reads, and its validation."""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
from typing import Optional

import numpy as np
from robench.errors import DatasetError  # noqa: F401 (public here too)

#: Longest image side a data reference or a model option may ask for (pixels).
MAX_IMAGE_SIDE = 8192


def memory_ceiling() -> int:
    """Return the bytes one data set may take as float32: $ROBENCH_MEMORY_LIMIT, else half the RAM.

    ``ROBENCH_MEMORY_LIMIT`` is bytes or K/M/G/T; a data set over it is refused before anything
    is decoded (docs/guarantees.md, "Inputs within bounds").
    """
    raw = os.environ.get("ROBENCH_MEMORY_LIMIT", "").strip().upper()
    if raw:
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(raw[-1:], 1)
        try:
            value = float(raw[:-1] if scale > 1 else raw) * scale
        except ValueError:
            value = 0
        if value > 0 and value < float("inf"):
            return int(value)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 << 30


def check_memory(values: int, where: str, what: str) -> None:
    """Raise DatasetError if ``values`` float32 numbers are more than the memory ceiling."""
    need, ceiling = 4 * int(values), memory_ceiling()
    if need > ceiling:
        raise DatasetError(f"{where}: {what} would take {_bytes(need)} as float32, above the "
                           f"memory ceiling of {_bytes(ceiling)} (half this machine's memory "
                           "unless ROBENCH_MEMORY_LIMIT says otherwise)")


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} bytes"

#: The only compact representation: uint8 pixels, value / 255 in float32.
PIXEL_SCALE = 255


def pixels_to_float(rows: np.ndarray) -> np.ndarray:
    """Return uint8 pixel rows as float32 in [0, 1] (value / 255, rounded once in float32)."""
    return np.asarray(rows).astype(np.float32) / np.float32(PIXEL_SCALE)


class Dataset:
    """Arrays X (n, d) float32 and y (n,) int64, plus optional true sources and image shape.

    Images are flat rows of ``C*H*W`` values in [0, 1] with ``image_shape = (C, H, W)``;
    ``sources`` holds true source ids (read by ``oracle``). With ``pixels=True`` X is held as
    uint8 (``raw``; value / 255 in float32 when read): ``X`` converts all once, ``rows(idx)``
    some, ``take(idx)`` returns them as held and ``view(idx)`` gives :class:`Rows`.
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
        self._file_reader = None  # see take(): None (not looked for yet), False or a _FileRows
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
            return self.raw if idx is None else self.take(idx)
        if self._X is not None:
            return self._X if idx is None else self._X[idx]
        return pixels_to_float(self.raw if idx is None else self.take(idx))

    def take(self, idx) -> np.ndarray:
        """Return a new array of the rows ``idx`` (positions, in order), as held.

        Rows of a memory-mapped data set are read with ``preadv``, never through the map: one
        touched row could map 2 MiB into RSS (docs/data-and-models.md, "Memory").
        """
        idx = _positions(idx, self.n_samples).reshape(-1)
        reader = self._reader()
        if reader is None:
            return self.raw[idx]
        n = self.n_samples
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"row index out of range for data set '{self.name}' ({n} rows)")
        return reader.take(np.where(idx < 0, idx + n, idx))

    def view(self, idx=None) -> "Rows":
        """Return the rows ``idx`` (all if None) as :class:`Rows`, read a batch at a time."""
        return Rows(self, idx)

    def _reader(self):
        """Return the file reader of a memory-mapped data set, or None (held in memory)."""
        if self._file_reader is None:
            self._file_reader = _FileRows.of(self.raw) or False
        return self._file_reader or None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_file_reader"] = None  # an open file: reopened where the data set arrives
        return state

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
        """Return a content hash of X, y, sources and shape (float32 hashes as it always did)."""
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


class Rows:
    """Rows of a data set by position, read a batch at a time instead of copied whole.

    Handed by :func:`robench.run.trials.fit_and_score` to models with ``accepts_rows = True``;
    ``rows[positions]`` or ``rows[a:b]`` returns a new array in the data set's dtype and
    ``np.asarray(rows)`` reads all.

    Parameters
    ----------
    dataset : Dataset
        The data set the rows belong to.
    idx : array of int or None
        Row indices into the data set, in order; None for all of its rows.
    """

    def __init__(self, dataset: Dataset, idx=None):
        self.dataset = dataset
        self.idx = None if idx is None else np.asarray(idx, dtype=np.intp).reshape(-1)

    def __len__(self) -> int:
        return self.dataset.n_samples if self.idx is None else int(self.idx.shape[0])

    def __repr__(self) -> str:
        return f"Rows({self.dataset.name!r}, n={len(self)}, {self.dtype})"

    @property
    def shape(self) -> tuple:
        return (len(self), self.dataset.n_features)

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self):
        return self.dataset.raw.dtype

    def __getitem__(self, key) -> np.ndarray:
        """Return the rows at positions ``key`` (a slice, or integer / boolean positions)."""
        if isinstance(key, (int, np.integer)):
            return self[[key]][0]
        if isinstance(key, slice) and self.idx is None:
            start, stop, step = key.indices(len(self))
            if step == 1:  # consecutive rows: one read
                return self.dataset.take(np.arange(start, max(start, stop)))
        pos = _positions(key, len(self))
        return self.dataset.take(pos if self.idx is None else self.idx[pos])

    def batches(self, size: int):
        """Yield the rows in order, ``size`` at a time."""
        for start in range(0, len(self), size):
            yield self[start:start + size]

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)


def _positions(key, n: int) -> np.ndarray:
    """Return the integer positions of a slice (of ``n`` rows), a boolean mask or positions."""
    if isinstance(key, slice):
        return np.arange(*key.indices(n), dtype=np.intp)
    key = np.asarray(key)
    return np.flatnonzero(key) if key.dtype == bool else key.astype(np.intp, copy=False)


class _FileRows:
    """Read rows of a C-ordered 2-D array stored in a file (a .npy) with ``os.preadv``."""

    def __init__(self, filename: str, offset: int, shape: tuple, dtype):
        self.filename, self.offset = filename, int(offset)
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.row_bytes = int(shape[1]) * self.dtype.itemsize
        self._fd = None

    @classmethod
    def of(cls, arr) -> Optional["_FileRows"]:
        """Return a reader of ``arr`` if it is a whole memory-mapped 2-D array, else None."""
        if not hasattr(os, "preadv") or not isinstance(arr, np.memmap):
            return None
        mm, filename = getattr(arr, "_mmap", None), getattr(arr, "filename", None)
        if mm is None or not filename or arr.ndim != 2 or not arr.flags.c_contiguous:
            return None
        # A view of a memmap inherits its filename and offset; only the array that starts
        # where the map says (offset within the map's first granule) is the file's array.
        start = np.frombuffer(mm, dtype=np.uint8).__array_interface__["data"][0]
        if arr.__array_interface__["data"][0] - start != arr.offset % mmap.ALLOCATIONGRANULARITY:
            return None
        if len(mm) - arr.offset % mmap.ALLOCATIONGRANULARITY != arr.nbytes:
            return None  # a memmap of part of the file's array
        return cls(filename, arr.offset, arr.shape, arr.dtype)

    def take(self, idx: np.ndarray) -> np.ndarray:
        """Return the rows ``idx`` (non-negative, in range), reading runs of rows at once."""
        if self._fd is None:
            self._fd = os.open(self.filename, os.O_RDONLY)
        out = np.empty((idx.shape[0], self.shape[1]), dtype=self.dtype)
        if not idx.size:
            return out
        flat = out.reshape(-1).view(np.uint8)
        # runs of consecutive rows (a slice, a sorted batch) are read by one call each
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [idx.shape[0]])).tolist()
        rb = self.row_bytes
        for s, e, row in zip(starts, ends, idx[starts].tolist()):
            buf, pos = flat[s * rb:e * rb], self.offset + row * rb
            while buf.size:
                got = os.preadv(self._fd, [buf], pos)
                if got <= 0:
                    raise OSError(f"{self.filename}: short read at byte {pos}")
                buf, pos = buf[got:], pos + got
        return out

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)


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
    if X.shape[1] == 0:
        raise DatasetError(f"data set '{ds.name}' has no features (X has {X.shape[0]} rows and "
                           "0 columns)")
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
