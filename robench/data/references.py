"""Data sets by reference: ``-d SCHEME:TARGET?KEY=VALUE`` resolved by a registered scheme.

:func:`resolve` finds the scheme's resolver, checks the options, makes the reference
canonical and names file data by :func:`stable_name`; :class:`FileDataset` caches parsed
files by path, size and mtime. docs/data-and-models.md ("Data: by reference") has the rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import parse_qsl, unquote

import numpy as np

from robench.data import Dataset, DatasetError, pixels_to_float
from robench.data.cache import cache_dir, content_key
from robench.data.dataset import check_memory
from robench.errors import UnknownComponentError
from robench.specs import DatasetSpec


#: What a canonical name percent-encodes so that it parses back to the same parts: in the
#: target '%' and '?' (the target is percent-decoded), in option keys and values the
#: characters the query syntax gives a meaning ('&' separates, '=' assigns, '+' is a space).
_IN_TARGET = str.maketrans({c: f"%{ord(c):02X}" for c in "%?"})
_IN_KEY = str.maketrans({c: f"%{ord(c):02X}" for c in "%&+=#"})
_IN_VALUE = str.maketrans({c: f"%{ord(c):02X}" for c in "%&+#"})


def parse_reference(reference: str, what: str = "data set", error=DatasetError) -> tuple:
    """Return ``(scheme, target, options)`` of ``SCHEME:TARGET?KEY=VALUE&...``, percent-decoded.

    ``what`` and ``error`` name the kind of reference in the error a repeated option raises.
    """
    scheme, _, rest = reference.partition(":")
    target, _, query = rest.partition("?")
    options: dict = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in options:
            raise error(f"{what} reference '{reference}' gives option '{key}' twice")
        options[key] = value
    return scheme, unquote(target), options


def reference_name(scheme: str, target: str, options: dict) -> str:
    """Return ``SCHEME:TARGET?KEY=VALUE&...``, options sorted, parsing back to the same parts."""
    query = "&".join(f"{k.translate(_IN_KEY)}={v.translate(_IN_VALUE)}"
                     for k, v in sorted(options.items()))
    return f"{scheme}:{target.translate(_IN_TARGET)}" + (f"?{query}" if query else "")


def canonical_reference(resolver, target: str, options: dict) -> str:
    """Return the one name a reference is stored under: absolute path, options sorted."""
    if resolver.takes_path:
        target = os.path.abspath(os.path.expanduser(target))
    return reference_name(resolver.name, target, options)


def checked_reference(registry, resolvers: str, reference: str, what: str = "data set",
                      error=DatasetError, listing: str = "datasets",
                      extra: tuple = ()) -> tuple:
    """Return ``(resolver, target, options)`` of a reference whose parts are checked.

    The scheme is registered, a target follows it and every option is the resolver's (or in
    ``extra``, robench's own for path resolvers); else ``error`` in one line (``listing``: the
    ``robench list`` kind). Model references use it too.
    """
    scheme, target, options = parse_reference(reference, what, error)
    try:
        resolver = registry.get(resolvers, scheme)
    except UnknownComponentError:
        known = ", ".join(f"{r.name}:" for r in registry.all(resolvers)) or "(none)"
        raise error(
            f"unknown {what} '{reference}': no {what} or reference scheme '{scheme}:' is "
            f"registered. Known schemes: {known} (see `robench list {listing}`)") from None
    if not target:
        raise error(f"{what} reference '{reference}' names nothing after "
                    f"'{scheme}:'; usage: {resolver.syntax}")
    unknown = sorted(set(options) - set(resolver.options)
                     - (set(extra) if getattr(resolver, "takes_path", False) else set()))
    if unknown:
        allowed = ", ".join(resolver.options) or "none"
        raise error(f"{what} reference '{reference}': unknown option(s) "
                    f"{', '.join(unknown)} (options of {scheme}: {allowed}); usage: "
                    f"{resolver.syntax}")
    return resolver, target, options


#: A data set's own name given in its reference (``npz:PATH?name=NAME``).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
#: Hex digits of the content fingerprint in a file data set's name.
NAME_DIGITS = 8


def stable_name(scheme: str, target: str, given, fingerprint: str) -> str:
    """Return the name a data set read from a file is stored under (never its path).

    ``SCHEME:NAME`` with ``name=NAME``, else ``SCHEME:STEM-FFFFFFFF``: the base name without
    suffix and :data:`NAME_DIGITS` hex digits of the content fingerprint.
    """
    if given is not None:
        if not _NAME.fullmatch(given):
            raise DatasetError(
                f"data set name {given[:90]!r} (option name=) must be 1-80 letters, digits, "
                "'.', '_' or '-', starting with a letter or digit")
        return f"{scheme}:{given}"
    stem = Path(target.rstrip("/\\")).name.split(".")[0] or "data"
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")[:40] or "data"
    return f"{scheme}:{stem}-{str(fingerprint)[:NAME_DIGITS]}"


def _index_path(name: str) -> Path:
    return cache_dir() / "datasets" / "names" / (
        hashlib.sha256(name.encode("utf-8")).hexdigest()[:32] + ".json")


def _remember(name: str, reference: str) -> None:
    """Record on this machine where the data set ``name`` was read from (a worker process,
    ``robench verify`` and a later run find it by its name alone)."""
    path = _index_path(name)
    try:
        if path.is_file() and json.loads(path.read_text()).get("reference") == reference:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump({"name": name, "reference": reference}, f)
        os.replace(tmp, path)
    except (OSError, ValueError):  # a read-only cache: names resolve in this process only
        pass


def remembered(name: str):
    """Return the reference data set ``name`` was last read from on this machine, or None."""
    try:
        found = json.loads(_index_path(name).read_text())
    except (OSError, ValueError):
        return None
    return found.get("reference") if isinstance(found, dict) and found.get(
        "name") == name else None


def resolve(registry, reference: str):
    """Return the DatasetSpec ``reference`` names (path data: :func:`stable_name`, remembered)."""
    earlier = remembered(reference)
    if earlier is not None and earlier != reference:
        spec = resolve(registry, earlier)
        if spec.name != reference:
            raise DatasetError(
                f"data set '{reference}' was read from {earlier}, which now holds other data "
                f"(named '{spec.name}' now); put the original file back there, or run on the "
                f"new data under its own name")
        return spec
    resolver, target, options = checked_reference(registry, "resolvers", reference,
                                                  extra=("name",))
    given = options.pop("name", None) if resolver.takes_path else None
    if resolver.takes_path:
        target = os.path.abspath(os.path.expanduser(target))
    name = reference_name(resolver.name, target, options)
    spec = resolver.resolve(target, dict(options))
    if resolver.takes_path:
        located = reference_name(resolver.name, target,
                                 {**options, **({"name": given} if given is not None else {})})
        fingerprint = spec.fingerprint() if spec.fingerprint is not None else None
        if fingerprint is None and given is None:
            fingerprint = spec.load().fingerprint()
        name = stable_name(resolver.name, target, given, fingerprint)
        _remember(name, located)
        spec = replace(spec, load=_named(spec.load, name))
    return replace(spec, name=name, plugin=resolver.plugin,
                   version=f"{resolver.version}/{spec.version}")


def _named(load: Callable, name: str) -> Callable:
    """Return ``load`` giving its data set the name ``name``."""

    def named():
        ds = load()
        if isinstance(ds, Dataset):
            ds.name = name
        return ds

    return named


def file_stamps(paths: Iterable) -> list:
    """Return ``[path, size, mtime_ns]`` of each file; a missing one is a DatasetError."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            raise DatasetError(f"data file not found: {p}") from None
        out.append([str(p), int(st.st_size), int(st.st_mtime_ns)])
    return out


def _cache_root() -> Path:
    return cache_dir() / "datasets" / "files"


class FileDataset:
    """A data set parsed from files, cached by the files' path, size and mtime.

    ``name``: the canonical reference; ``files()``: the paths read (DatasetError saying where
    when one is missing); ``parse()``: a validated Dataset, called only on a cache miss;
    ``version``: the parser's (a new one invalidates the cache).
    """

    def __init__(self, name: str, files: Callable[[], list], parse: Callable[[], Dataset],
                 version: str = "1"):
        self.name, self.files, self.parse, self.version = name, files, parse, version

    def entry(self) -> Path:
        """Return the cache folder of the files as they are now, parsing them if it is missing."""
        key = content_key("file-dataset", self.version, self.name, file_stamps(self.files()))
        path = _cache_root() / key
        if (path / "meta.json").exists():
            return path
        _write_entry(path, self.parse())
        return path

    def meta(self) -> dict:
        """Return what the cache entry records: fingerprint, shapes, sources, class names."""
        return json.loads((self.entry() / "meta.json").read_text())

    def fingerprint(self) -> str:
        """Return the content fingerprint, from the cache when the files are unchanged."""
        return self.meta()["fingerprint"]

    def load(self) -> Dataset:
        """Return the data set from the cache entry (parsed first if the files changed).

        X is held as stored (uint8 pixels for images), memory-mapped above :func:`mmap_threshold`
        bytes; ``ROBENCH_COMPACT_DATA=0`` reads it whole as float32 (same values and fingerprint).
        """
        path = self.entry()
        meta = json.loads((path / "meta.json").read_text())
        compact = compact_data()
        x_file = path / "X.npy"
        pixels = bool(meta.get("pixels"))
        if pixels and not compact:
            X, pixels = _read_as_float(x_file), False
        else:
            mmap = "c" if compact and x_file.stat().st_size > mmap_threshold() else None
            X = np.load(x_file, mmap_mode=mmap, allow_pickle=False)
        arrays = {k: np.load(path / f"{k}.npy", allow_pickle=False)
                  for k in ("y", "sources") if (path / f"{k}.npy").exists()}
        ds = Dataset(self.name, X, arrays["y"], sources=arrays.get("sources"),
                     image_shape=tuple(meta["image_shape"]) if meta["image_shape"] else None,
                     class_names=meta["class_names"], pixels=pixels)
        ds._fingerprint = meta["fingerprint"]
        return ds


def _read_as_float(path: Path, chunk: int = 4096) -> np.ndarray:
    """Read a uint8 .npy as float32 pixels chunk by chunk (no uint8 copy of the whole array)."""
    with open(path, "rb") as f:
        shape, fortran, dtype = npy_header(f)
        if dtype != np.uint8 or fortran or len(shape) != 2:
            raise DatasetError(f"{path}: expected a C-ordered 2-D uint8 array")
        out = np.empty(shape, dtype=np.float32)
        row = shape[1]
        for start in range(0, shape[0], chunk):
            n = min(chunk, shape[0] - start)
            buf = np.frombuffer(f.read(n * row), dtype=np.uint8).reshape(n, row)
            out[start:start + n] = pixels_to_float(buf)
    return out


def npy_header(f) -> tuple:
    """Return (shape, fortran order, dtype) from the header of the .npy file open as ``f``."""
    major, _ = np.lib.format.read_magic(f)
    return (np.lib.format.read_array_header_1_0 if major == 1
            else np.lib.format.read_array_header_2_0)(f)


def mmap_threshold() -> int:
    """Return the size (bytes) above which cached data is memory-mapped: $ROBENCH_MMAP_BYTES, 64 MiB."""
    return int(os.environ.get("ROBENCH_MMAP_BYTES", 64 << 20))


def compact_data() -> bool:
    """Return False when ``ROBENCH_COMPACT_DATA=0`` asks for float32 data in every process."""
    return os.environ.get("ROBENCH_COMPACT_DATA", "1") not in ("0", "false", "no")


def _write_entry(path: Path, ds: Dataset) -> None:
    """Write a data set's arrays and meta.json into ``path`` atomically (rename into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tmp-"))
    try:
        np.save(tmp / "X.npy", ds.raw)
        np.save(tmp / "y.npy", ds.y)
        if ds.sources is not None:
            np.save(tmp / "sources.npy", ds.sources)
        meta = {"name": ds.name, "fingerprint": ds.fingerprint(),
                "image_shape": list(ds.image_shape) if ds.image_shape else None,
                "class_names": list(ds.class_names), "has_sources": ds.sources is not None,
                "pixels": ds.pixels,
                "n_samples": ds.n_samples, "n_features": ds.n_features}
        (tmp / "meta.json").write_text(json.dumps(meta))
        try:
            os.rename(tmp, path)
        except OSError:  # another process wrote the same entry first: keep theirs
            pass
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def file_dataset_spec(file_data: FileDataset, description: str, version: str = "1"):
    """Return the DatasetSpec of a FileDataset (parsed now if it is not cached yet)."""
    meta = file_data.meta()
    # a parsed copy in the cache is held to the ceiling in force now, too
    check_memory(int(meta.get("n_samples") or 0) * int(meta.get("n_features") or 0),
                 file_data.name, f"{meta.get('n_samples')} rows of {meta.get('n_features')} values")
    shape = tuple(meta["image_shape"]) if meta["image_shape"] else None
    return DatasetSpec(
        file_data.name.split(":", 1)[0], file_data.load, description, version=version,
        has_sources=bool(meta["has_sources"]), is_image=shape is not None, image_shape=shape,
        fingerprint=file_data.fingerprint,
    )
