"""Seed derivation: independent, reproducible random streams from tuples of integers."""

from __future__ import annotations

import numpy as np


def derived_seed(*parts: int) -> int:
    """Return a 31-bit seed derived from integers (independent streams per tuple)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)
