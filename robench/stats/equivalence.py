"""Two one-sided tests (TOST): is a difference inside a stated margin, or decidedly outside it?

Paired or Welch, skew-corrected (Hall) intervals of a difference; :func:`repeats_to_decide`
plans an undecided one. docs/intervals.md ("Equivalence of two means in claims") has the
argument, the reference (Schuirmann 1987) and the measured error rates.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import (skew_corrected_bounds, skewness, skewness_se,
                                     smallest_fitting, t_quantile)

#: Level of each one-sided test (the interval checked against the margin is 1 - 2 alpha).
ALPHA = 0.05
#: Standard errors of the estimated skewness allowed for with two independent samples, where
#: each sample's skewness is estimated on its own: one (as for paired differences) let a
#: skewed difference through 6.4% at 8 repeats per side, 1.5 5.1% (tests/stats/
#: test_equivalence.py).
TWO_SAMPLE_SKEW_SE = 1.5
EQUIVALENT, NOT_EQUIVALENT, UNDECIDED = "equivalent", "not equivalent", "undecided"


def _clean(values) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))],
                      float)


def difference_interval(a: Sequence, b: Sequence, level: float, *, paired: bool,
                        skew_corrected: bool = True) -> dict:
    """Return the ``level`` interval of mean(a) - mean(b): paired or Welch, Hall's or Student's."""
    if paired:
        pairs = [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]
        d = np.asarray([x - y for x, y in pairs if math.isfinite(x) and math.isfinite(y)], float)
        n = int(d.size)
        out = {"paired": True, "n": n, "estimate": float(d.mean()) if n else None}
        if n < 2:
            return {**out, "low": None, "high": None, "se": None, "df": None,
                    "reason": f"{n} complete pair(s): a spread needs at least 2"}
        sd = float(d.std(ddof=1))
        se, df = sd / math.sqrt(n), float(n - 1)
        skew, skew_se = skewness(d) / math.sqrt(n), float(skewness_se(n)) / math.sqrt(n)
        out["sd"] = sd
    else:
        xa, xb = _clean(a), _clean(b)
        n = (int(xa.size), int(xb.size))
        out = {"paired": False, "n": list(n),
               "estimate": float(xa.mean() - xb.mean()) if min(n) else None}
        if min(n) < 2:
            return {**out, "low": None, "high": None, "se": None, "df": None,
                    "reason": f"{n[0]} and {n[1]} values: each side needs at least 2"}
        sa, sb = float(xa.std(ddof=1)), float(xb.std(ddof=1))
        va, vb = sa * sa / n[0], sb * sb / n[1]
        se = math.sqrt(va + vb)
        df = ((va + vb) ** 2 / (va ** 2 / (n[0] - 1) + vb ** 2 / (n[1] - 1))
              if se > 0 else float(min(n) - 1))
        if se > 0:
            ka, kb = sa ** 3 / n[0] ** 2, sb ** 3 / n[1] ** 2
            skew = (skewness(xa) * ka - skewness(xb) * kb) / se ** 3
            skew_se = math.hypot(ka * float(skewness_se(n[0])),
                                 kb * float(skewness_se(n[1]))) / se ** 3
        out["sd"] = math.sqrt(sa * sa + sb * sb)
    if not se > 0:
        return {**out, "low": None, "high": None, "se": 0.0, "df": df,
                "reason": "no spread in the differences: no interval"}
    t = float(t_quantile(level, df))
    if skew_corrected:
        k = 1.0 if paired else TWO_SAMPLE_SKEW_SE
        low, high = (float(v) for v in skew_corrected_bounds(out["estimate"], se, t, skew,
                                                               skew_se, k))
    else:
        low, high = out["estimate"] - t * se, out["estimate"] + t * se
    return {**out, "low": low, "high": high, "se": se, "df": df, "level": level}


def equivalence(a: Sequence, b: Sequence, margin: float, *, paired: bool,
                alpha: float = ALPHA) -> dict:
    """Return the TOST decision on |mean(a) - mean(b)| < ``margin`` with its evidence."""
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    iv = difference_interval(a, b, 1 - 2 * alpha, paired=paired)
    out = {**iv, "margin": margin, "alpha": alpha}
    lo, hi, est = iv["low"], iv["high"], iv["estimate"]
    if lo is None:
        return {**out, "status": UNDECIDED, "repeats": None}
    status = (EQUIVALENT if -margin < lo and hi < margin
              else NOT_EQUIVALENT if lo > margin or hi < -margin else UNDECIDED)
    n_now = iv["n"] if paired else min(iv["n"])
    need = (None if status != UNDECIDED
            else repeats_to_decide(abs(est) - margin, iv["sd"], n_now, 1 - 2 * alpha))
    return {**out, "status": status, "repeats": need}


def repeats_to_decide(distance: float, sd: float, n: int, level: float,
                      limit: int = 100_000) -> Optional[int]:
    """Return the smallest n' >= n whose ``level`` t half-width is below ``|distance|``."""
    distance = abs(float(distance))
    if not (distance > 0 and sd is not None and sd > 0 and math.isfinite(sd)):
        return None

    def fits(m):  # the half-width falls like 1/sqrt(m)
        return float(t_quantile(level, m - 1)) * sd / math.sqrt(m) < distance

    return smallest_fitting(fits, max(int(n), 2), limit)
