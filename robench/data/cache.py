"""On-disk cache keyed by content: safe to delete at any time, rebuilt on demand."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

_OVERRIDE: list = []  # set by the CLI's --cache-dir; beats the environment


def cache_dir() -> Path:
    """Return the cache directory: --cache-dir, else $ROBENCH_CACHE_DIR, else the user cache."""
    if _OVERRIDE:
        root = Path(_OVERRIDE[-1])
    elif os.environ.get("ROBENCH_CACHE_DIR"):
        root = Path(os.environ["ROBENCH_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        root = Path(base) / "robench"
    return root.expanduser()


def check_cache_dir() -> Path:
    """Return the cache directory, created if missing; ValueError (one line) if it cannot be."""
    root = cache_dir()
    where = ("--cache-dir" if _OVERRIDE else "$ROBENCH_CACHE_DIR"
             if os.environ.get("ROBENCH_CACHE_DIR") else "the cache directory")
    fix = ("pick a folder robench can write" + (" (or unset ROBENCH_CACHE_DIR)"
                                                if where == "$ROBENCH_CACHE_DIR" else ""))
    if root.exists() and not root.is_dir():
        raise ValueError(f"{where} {root} is a file, not a folder; {fix}")
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as exc:
        raise ValueError(f"{where} {root} cannot be used: {exc.strerror or exc}; {fix}") from None
    return root


def set_cache_dir(path) -> None:
    """Use ``path`` as the cache directory for this process (and the workers it starts)."""
    _OVERRIDE[:] = [str(path)] if path else []
    if path:
        os.environ["ROBENCH_CACHE_DIR"] = str(path)


def content_key(*parts) -> str:
    """Return a stable hash of JSON-serialisable parts (sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def cached_arrays(namespace: str, key: str, compute: Callable[[], dict]) -> tuple:
    """Return (arrays, hit) from ``namespace/key.npz``, or ``compute()``d and stored atomically."""
    path = cache_dir() / namespace / f"{key}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}, True
        except Exception:  # noqa: BLE001 - a corrupt entry is recomputed, never fatal
            path.unlink(missing_ok=True)
    arrays = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    os.close(fd)
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return arrays, False
