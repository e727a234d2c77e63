"""Built-in data set references: npz:, npy:, csv: and imagefolder: files, no plugin needed.

Parsed once and cached (robench.data.references.FileDataset); docs/data-and-models.md.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from robench import hookimpl
from robench.data import Dataset, DatasetError
from robench.data.references import FileDataset, file_dataset_spec, npy_header, reference_name
from robench.specs import ResolverSpec
from robench.data.dataset import MAX_IMAGE_SIDE, check_memory

#: Image file suffixes imagefolder: reads (torchvision's IMG_EXTENSIONS, lowercase).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

NPZ_FORMAT = ("a NumPy .npz with arrays X (n, d), (n, H, W), (n, C, H, W) or (n, H, W, C), "
              "y (n,) integer labels and optionally groups (n,) integer true source ids")


def _need_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.is_file():
        where = "a folder" if p.is_dir() else "nothing"
        raise DatasetError(f"data file not found: {p} ({where} there); expected {what}")
    return p


def _need_dir(path: str, what: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise DatasetError(f"data folder not found: {p}; expected {what}")
    return p


def parse_shape(text: str, ref: str) -> tuple:
    """Return the (C, H, W) of a ``shape=C,H,W`` option."""
    try:
        shape = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise DatasetError(f"{ref}: shape must be C,H,W (three positive integers), got '{text}'")
    return shape


def image_rows(X: np.ndarray, where: str) -> tuple:
    """Return (flat rows, (C, H, W), pixels) of an image array X (NHW, NCHW or NHWC).

    1, 3 or 4 channels; uint8 (or integers in 0..255) stay uint8 pixels; floats lie in [0, 1].
    """
    if X.ndim == 3:
        X = X[:, None]
    elif X.ndim == 4:
        if X.shape[1] not in (1, 3, 4) and X.shape[3] in (1, 3, 4):
            X = X.transpose(0, 3, 1, 2)
        elif X.shape[1] not in (1, 3, 4):
            raise DatasetError(f"{where}: X of shape {X.shape} is neither (n, C, H, W) nor "
                               "(n, H, W, C) with 1, 3 or 4 channels")
    else:
        raise DatasetError(f"{where}: X must be (n, d), (n, H, W), (n, C, H, W) or "
                           f"(n, H, W, C); got shape {X.shape}")
    shape = tuple(int(s) for s in X.shape[1:])
    rows = _scaled(X.reshape(X.shape[0], -1), where)
    return rows, shape, rows.dtype == np.uint8


def _scaled(X: np.ndarray, where: str) -> np.ndarray:
    """Return image values as uint8 pixels (integers 0..255) or float32 in [0, 1] (checked)."""
    if X.dtype == np.uint8:
        return np.ascontiguousarray(X)
    if np.issubdtype(X.dtype, np.integer) or X.dtype == np.bool_:
        lo, hi = (int(X.min()), int(X.max())) if X.size else (0, 0)
        if lo < 0 or hi > 255:
            raise DatasetError(f"{where}: integer image values must lie in 0..255, got "
                               f"{lo}..{hi}")
        return X.astype(np.uint8)
    _check_finite(X, where)
    lo, hi = float(X.min()), float(X.max())
    if lo < 0 or hi > 1:
        raise DatasetError(f"{where}: float image values must lie in [0, 1] (or give uint8 "
                           f"0..255), got {lo:g}..{hi:g}")
    return X.astype(np.float32)


def _check_finite(X: np.ndarray, where: str) -> None:
    if np.issubdtype(X.dtype, np.floating):
        bad = ~np.isfinite(X)
        if bad.any():
            rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(1))
            raise DatasetError(f"{where}: X has {int(bad.sum())} NaN or infinite value(s) in "
                               f"{rows.size} row(s), the first in row {int(rows[0])}")


def labels(y: np.ndarray, where: str, class_names=None) -> tuple:
    """Return (labels 0..C-1 by rank, class names from the labels) of integer labels ``y``."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise DatasetError(f"{where}: y must be 1-D (one label per sample), got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"{where}: y must hold integer class labels, got dtype {y.dtype} "
                           "(save y.astype(int), or map names to integers)")
    if class_names is not None:
        names = [str(c) for c in np.asarray(class_names).tolist()]
        if y.size and (y.min() < 0 or y.max() >= len(names)):
            raise DatasetError(f"{where}: labels must be 0..{len(names) - 1} for the "
                               f"{len(names)} class_names, got {int(y.min())}..{int(y.max())}")
        return y.astype(np.int64), names
    classes, codes = np.unique(y, return_inverse=True)
    return codes.astype(np.int64), [str(c) for c in classes.tolist()]


def group_ids(groups, n: int, where: str):
    """Return true source ids as int64, or None."""
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != (n,):
        raise DatasetError(f"{where}: groups must hold one source id per sample ({n}), got "
                           f"shape {g.shape}")
    if not np.issubdtype(g.dtype, np.integer):
        raise DatasetError(f"{where}: groups must be integer source ids, got dtype {g.dtype}")
    return g.astype(np.int64)


def arrays_dataset(name: str, X, y, groups=None, *, shape=None, class_names=None,
                   where: str = "") -> Dataset:
    """Return a validated Dataset from raw arrays as a file holds them."""
    where = where or name
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise DatasetError(f"{where}: X must be numeric, got dtype {X.dtype}")
    if X.ndim < 2 or X.shape[0] == 0:
        raise DatasetError(f"{where}: X must have one row per sample, got shape {X.shape}")
    if 0 in X.shape[1:]:
        raise DatasetError(f"{where}: X has no features (shape {X.shape}); each row needs at "
                           "least one value")
    if y is None:
        raise DatasetError(f"{where}: no labels (array y)")
    if np.asarray(y).shape[:1] != X.shape[:1]:
        raise DatasetError(f"{where}: X has {X.shape[0]} samples and y has "
                           f"{np.asarray(y).shape[0] if np.asarray(y).ndim else 0}")
    y, names = labels(y, where, class_names)
    if shape is not None:
        if X.ndim != 2 or X.shape[1] != int(np.prod(shape)):
            raise DatasetError(f"{where}: shape={','.join(map(str, shape))} needs X of shape "
                               f"(n, {int(np.prod(shape))}), got {X.shape}")
        X = X.reshape(X.shape[0], *shape)
    if X.ndim == 2:
        _check_finite(X, where)
        rows, image_shape, pixels = X.astype(np.float32), None, False
    else:
        rows, image_shape, pixels = image_rows(X, where)
    return Dataset(name, rows, y, sources=group_ids(groups, X.shape[0], where),
                   image_shape=image_shape, class_names=names, pixels=pixels)


def _check_header(fh, where: str) -> None:
    """Refuse an .npy whose header asks for more memory than the ceiling (nothing is read)."""
    try:
        shape, _, dtype = npy_header(fh)
    except Exception:  # noqa: BLE001 - not an .npy header: np.load says why
        return
    values = math.prod(int(n) for n in shape)  # Python ints: a hostile shape cannot overflow
    check_memory(max(values, values * dtype.itemsize // 4), where, f"an array of shape {shape}")


def _read_npz(path: Path, name: str, shape) -> Dataset:
    if not zipfile.is_zipfile(path):
        raise DatasetError(f"cannot read {path}: not a NumPy .npz (zip) archive; expected "
                           f"{NPZ_FORMAT}")
    try:
        with zipfile.ZipFile(path) as archive:  # sizes from the headers, before any load
            for member in archive.namelist():
                if member.endswith(".npy"):
                    with archive.open(member) as fh:
                        _check_header(fh, f"{path} ({member[:-4]})")
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's
        raise DatasetError(f"cannot read {path} as a NumPy .npz: {type(exc).__name__}: "
                           f"{exc}") from None
    missing = [k for k in ("X", "y") if k not in arrays]
    if missing:
        raise DatasetError(f"{path}: no array {' or '.join(missing)} (it has "
                           f"{', '.join(sorted(arrays)) or 'none'}); expected {NPZ_FORMAT}")
    return arrays_dataset(name, arrays["X"], arrays["y"], arrays.get("groups"), shape=shape,
                          class_names=arrays.get("class_names"), where=str(path))


def resolve_npz(target: str, options: dict):
    """Resolve ``npz:PATH``."""
    shape = parse_shape(options["shape"], f"npz:{target}") if "shape" in options else None
    name = reference_name("npz", target, options)
    data = FileDataset(name, lambda: [_need_file(target, NPZ_FORMAT)],
                       lambda: _read_npz(Path(target), name, shape))
    return file_dataset_spec(data, f"arrays from {target}")


def _npy_files(folder: str) -> list:
    d = _need_dir(folder, "a folder with X.npy, y.npy and optionally groups.npy")
    files = [_need_file(str(d / f), what) for f, what in (
        ("X.npy", "X.npy (n, d) or image arrays, as npz:'s X"),
        ("y.npy", "y.npy (n,) integer labels"))]
    if (d / "groups.npy").exists():
        files.append(d / "groups.npy")
    return files


def _read_npy(folder: str, name: str, shape) -> Dataset:
    arrays = {}
    for f in _npy_files(folder):
        with open(f, "rb") as fh:
            _check_header(fh, str(f))
        try:
            arrays[f.stem] = np.load(f, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - any reader error is the file's
            raise DatasetError(f"cannot read {f} as a NumPy .npy: {type(exc).__name__}: "
                               f"{exc}") from None
    return arrays_dataset(name, arrays["X"], arrays["y"], arrays.get("groups"), shape=shape,
                          where=folder)


def resolve_npy(target: str, options: dict):
    """Resolve ``npy:FOLDER`` (X.npy, y.npy, optional groups.npy)."""
    shape = parse_shape(options["shape"], f"npy:{target}") if "shape" in options else None
    name = reference_name("npy", target, options)
    data = FileDataset(name, lambda: _npy_files(target), lambda: _read_npy(target, name, shape))
    return file_dataset_spec(data, f"arrays from {target}/X.npy, y.npy")


def _read_csv(path: Path, name: str, target: str, groups_col) -> Dataset:
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's
        raise DatasetError(f"cannot read {path} as CSV: {type(exc).__name__}: {exc}") from None
    where = str(path)
    for col, what in ((target, "target"), (groups_col, "groups")):
        if col is not None and col not in frame.columns:
            names = [str(c) for c in frame.columns]
            close = difflib.get_close_matches(str(col), names, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise DatasetError(f"{where}: no {what} column '{col}'.{hint} Columns: "
                               f"{', '.join(names)}")
    y_raw = frame[target]
    if y_raw.isna().any():
        raise DatasetError(f"{where}: target column '{target}' has {int(y_raw.isna().sum())} "
                           "empty value(s)")
    classes = sorted(y_raw.unique().tolist(), key=lambda v: (isinstance(v, str), v))
    codes = {c: i for i, c in enumerate(classes)}
    y = y_raw.map(codes).to_numpy(dtype=np.int64)
    groups = None if groups_col is None else np.unique(
        frame[groups_col].astype(str).to_numpy(), return_inverse=True)[1]
    features = frame.drop(columns=[c for c in (target, groups_col) if c is not None])
    if features.shape[1] == 0:
        raise DatasetError(f"{where}: no feature columns besides the target '{target}'")
    bad = [c for c in features.columns if not (pd.api.types.is_numeric_dtype(features[c])
                                                or pd.api.types.is_bool_dtype(features[c]))]
    if bad:
        example = features[bad[0]].dropna().astype(str).head(1).tolist()
        raise DatasetError(f"{where}: feature column(s) {', '.join(map(str, bad))} are not "
                           f"numeric (e.g. {example[0] if example else ''!r}); encode them as "
                           "numbers or drop them")
    empty = features.isna().sum()
    if empty.any():
        col = empty[empty > 0].index[0]
        raise DatasetError(f"{where}: feature column '{col}' has {int(empty[col])} empty "
                           "value(s); fill or drop them")
    X = features.to_numpy(dtype=np.float64)
    _check_finite(X, where)
    return Dataset(name, X.astype(np.float32), y, sources=groups,
                   class_names=[str(c) for c in classes])


def resolve_csv(target: str, options: dict):
    """Resolve ``csv:PATH?target=COLUMN[&groups=COLUMN]``."""
    if not options.get("target"):
        raise DatasetError(f"csv:{target} needs the label column: csv:PATH?target=COLUMN")
    name = reference_name("csv", target, options)
    what = "a CSV file with a header row, numeric feature columns and the target column"
    data = FileDataset(name, lambda: [_need_file(target, what)],
                       lambda: _read_csv(Path(target), name, options["target"],
                                         options.get("groups")))
    return file_dataset_spec(data, f"table {target}, target column '{options['target']}'")


def _image_files(root: str) -> list:
    """Return [(class name, path)] of ROOT/CLASS/FILE images, classes sorted (as ImageFolder)."""
    d = _need_dir(root, "one sub-folder per class holding its image files")
    classes = sorted(e.name for e in os.scandir(d) if e.is_dir() and not e.name.startswith("."))
    if not classes:
        raise DatasetError(f"{d}: no class sub-folders; imagefolder: reads ROOT/CLASS/IMAGE "
                           f"files ({', '.join(IMAGE_SUFFIXES)})")
    out = []
    for c in classes:
        files = sorted(p for p in (d / c).rglob("*")
                       if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))
        if not files:
            raise DatasetError(f"{d / c}: class folder '{c}' has no image files "
                               f"({', '.join(IMAGE_SUFFIXES)})")
        out.extend((c, p) for p in files)
    return out


def parse_size(text: str, ref: str) -> tuple:
    """Return (H, W) of ``size=N`` or ``size=HxW``."""
    try:
        parts = [int(v) for v in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or min(parts) < 1 or max(parts) > MAX_IMAGE_SIDE:
        raise DatasetError(f"{ref}: size must be N or HxW (integers from 1 to {MAX_IMAGE_SIDE}),"
                           f" got '{text[:40]}'")
    return tuple(parts)


def _read_imagefolder(root: str, name: str, size, mode) -> Dataset:
    items = _image_files(root)
    class_names = sorted({c for c, _ in items})
    index = {c: i for i, c in enumerate(class_names)}
    headers = [_header(p) for _, p in items]
    if mode is None:
        mode = "gray" if all(m in GREY_MODES for m, _ in headers) else "rgb"
    if size is None:
        sizes = {s for _, s in headers}
        if len(sizes) > 1:
            listed = ", ".join(f"{w}x{h}" for w, h in sorted(sizes)[:4])
            raise DatasetError(f"{root}: images differ in size ({listed}, ...); give one with "
                               f"imagefolder:{root}?size=N (or HxW)")
        w, h = sizes.pop()
        size = (h, w)
    h, w = size
    channels = 1 if mode == "gray" else 3
    check_memory(len(items) * channels * h * w, root,
                 f"{len(items)} images of {w}x{h} x {channels} channel(s)")
    X = np.stack([_pixels(p, "L" if mode == "gray" else "RGB", w, h) for _, p in items])
    y = np.array([index[c] for c, _ in items], dtype=np.int64)
    rows, shape, pixels = image_rows(X, root)
    return Dataset(name, rows, y, image_shape=shape, class_names=class_names, pixels=pixels)


GREY_MODES = {"1", "L", "LA", "I", "I;16", "F", "P;L"}


@contextlib.contextmanager
def _image(p, header: bool = False):
    """Open image file ``p`` with PIL; DatasetError saying why it cannot be (``header``: sizing)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(p) as im:
            yield im
    except Image.DecompressionBombError as exc:
        raise DatasetError(f"refused image {p}: its header claims more pixels than PIL decodes "
                           f"safely ({exc}); a decompression bomb, or an image far larger than "
                           "a benchmark needs: shrink it") from None
    except OSError as exc:  # UnidentifiedImageError included
        if not header:
            raise DatasetError(f"cannot read image {p} ({type(exc).__name__}: a damaged or "
                               "truncated file)") from None
        if isinstance(exc, UnidentifiedImageError):
            raise DatasetError(f"cannot read image {p}: not an image format PIL can decode "
                               "(a damaged or mislabelled file)") from None
        raise DatasetError(f"cannot read image {p}: {exc}") from None


def _header(p) -> tuple:
    """Return (mode, size) of image file ``p`` from its header."""
    with _image(p, header=True) as im:
        return im.mode, im.size


def _pixels(p, pil_mode: str, w: int, h: int) -> np.ndarray:
    """Return image file ``p`` as uint8 (C, h, w) in ``pil_mode``, resized where it differs."""
    from PIL import Image

    with _image(p) as im:
        im = im.convert(pil_mode)
        arr = np.asarray(im if im.size == (w, h) else im.resize((w, h), Image.Resampling.BILINEAR),
                         dtype=np.uint8)
    return arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)


def resolve_imagefolder(target: str, options: dict):
    """Resolve ``imagefolder:ROOT[?size=N|HxW][&mode=gray|rgb]``."""
    ref = f"imagefolder:{target}"
    size = parse_size(options["size"], ref) if "size" in options else None
    mode = options.get("mode")
    if mode is not None and mode not in ("gray", "rgb"):
        raise DatasetError(f"{ref}: mode must be gray or rgb, got '{mode}'")
    name = reference_name("imagefolder", target, options)

    data = FileDataset(name, lambda: [Path(target)] + [p for _, p in _image_files(target)],
                       lambda: _read_imagefolder(target, name, size, mode))
    return file_dataset_spec(data, f"images under {target}, one folder per class")


@hookimpl
def register_dataset_resolvers(register):
    """Register npz:, npy:, csv: and imagefolder:."""
    for scheme, resolver, description, syntax, options in (
        ("npz", resolve_npz, "NumPy .npz with X, y and optional groups (true source ids: the "
         "oracle clusterer applies); uint8 images are scaled to [0, 1]",
         "npz:PATH[?shape=C,H,W]", ("shape",)),
        ("npy", resolve_npy, "a folder of X.npy, y.npy and optional groups.npy (as npz:)",
         "npy:FOLDER[?shape=C,H,W]", ("shape",)),
        ("csv", resolve_csv, "a CSV table: numeric feature columns, a categorical target column, "
         "optionally a column of true source ids",
         "csv:PATH?target=COLUMN[&groups=COLUMN]", ("target", "groups")),
        ("imagefolder", resolve_imagefolder, "ROOT/CLASS/IMAGE files (as torchvision's "
         "ImageFolder), resized to one size, grey or RGB",
         "imagefolder:ROOT[?size=N|HxW][&mode=gray|rgb]", ("size", "mode")),
    ):
        register(ResolverSpec(scheme, resolver, description, syntax=syntax, options=options))
