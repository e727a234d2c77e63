"""An exact permutation test for a correlation over a model zoo (docs/intervals.md says why)."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

import numpy as np

#: Largest zoo enumerated exactly (9! = 362,880 pairings).
EXACT_MAX = 9
#: Random pairings of a larger zoo.
DRAWS = 20_000


@functools.lru_cache(maxsize=4)
def _pairings(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def _standardise(v: np.ndarray) -> np.ndarray:
    v = v - v.mean()
    norm = math.sqrt(float((v * v).sum()))
    return v / norm if norm > 0 else v * 0.0


def correlation_test(x: Sequence, y: Sequence, seed: int = 0) -> dict:
    """Return Pearson's r of (x, y) with one-sided permutation p-values ``p_greater``, ``p_less``
    (every pairing up to :data:`EXACT_MAX` values, else Monte Carlo; counting the observed r)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = len(x)
    out = {"n": n, "exact": n <= EXACT_MAX}
    zx, zy = _standardise(x), _standardise(y)
    if n < 3 or not zx.any() or not zy.any():
        return {**out, "r": float("nan"), "p_greater": 1.0, "p_less": 1.0}
    r = float(zx @ zy)
    tol = 1e-12
    if n <= EXACT_MAX:
        rs = zy[_pairings(n)] @ zx
        return {**out, "r": r, "p_greater": float(np.mean(rs >= r - tol)),
                "p_less": float(np.mean(rs <= r + tol))}
    rng = np.random.default_rng(seed)
    rs = np.array([zx @ zy[rng.permutation(n)] for _ in range(DRAWS)])
    return {**out, "r": r, "p_greater": float((1 + np.sum(rs >= r - tol)) / (1 + DRAWS)),
            "p_less": float((1 + np.sum(rs <= r + tol)) / (1 + DRAWS))}
