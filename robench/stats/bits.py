"""Compact per-sample boolean vectors (which samples a model got right), stored as text."""

from __future__ import annotations

import base64

import numpy as np


def pack_bits(mask: np.ndarray) -> str:
    """Return a boolean vector as base64 of its packed bits (compact enough to store per trial)."""
    return base64.b64encode(np.packbits(np.asarray(mask, dtype=bool)).tobytes()).decode("ascii")


def unpack_bits(text: str, n: int) -> np.ndarray:
    """Return the boolean vector of length ``n`` stored by :func:`pack_bits`."""
    return np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8), count=n).astype(bool)
