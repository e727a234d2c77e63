"""Two one-sided tests (TOST): is a difference inside a stated margin, or decidedly outside it?

"E[A] ~ E[B]" is a claim of *equivalence*: the difference of the two means lies within a
margin that says what "about equal" means (stated in the claim's row). Overlapping
confidence intervals do not show it (two wide intervals overlap whatever the means), and a
significance test of "different" flips with the sample size (a negligible 0.4-point gap
becomes "significant" with enough repeats). The two one-sided tests (Schuirmann, "A
comparison of the two one-sided tests procedure and the power approach for assessing the
equivalence of average bioavailability", J. Pharmacokinet. Biopharm. 15(6), 1987,
doi:10.1007/BF01068419) decide it at level alpha: equivalent when the ``1 - 2 alpha``
interval of the difference lies inside ``(-margin, +margin)``; *not* equivalent when the
same interval lies wholly outside ``[-margin, +margin]`` (each side a one-sided test at
alpha); undecided otherwise. Either decision is wrong with probability at most alpha
(tests/test_equivalence.py simulates it at the margin, normal and skewed).

Paired where the values are paired (the same repeat's two accuracies: the interval of the
mean of the per-repeat differences), else Welch's interval of a difference of two
independent means; either way skewness-corrected (Hall), so that a skewed difference does not
let a wrong decision through more often than alpha. :func:`repeats_to_decide` says how many repeats the same means and
spread would need to decide an undecided comparison.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import skew_corrected_bounds, skewness_se, t_quantile

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


def _paired(a, b) -> np.ndarray:
    pairs = [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]
    pairs = [(x, y) for x, y in pairs if math.isfinite(x) and math.isfinite(y)]
    return np.asarray([x - y for x, y in pairs], float)


def _skew(x: np.ndarray) -> float:
    """Return the sample skewness m3 / m2^1.5 of x (0 without spread)."""
    c = x - x.mean()
    m2 = float((c * c).mean())
    return float((c ** 3).mean()) / m2 ** 1.5 if m2 > 0 else 0.0


def difference_interval(a: Sequence, b: Sequence, level: float, *, paired: bool,
                        skew_corrected: bool = True) -> dict:
    """Return the ``level`` interval of mean(a) - mean(b): estimate, low, high, se, df, n.

    ``paired``: ``a[r]`` and ``b[r]`` belong to the same unit r (None marks a missing value;
    a pair counts only with both): the differences' mean, n - 1 degrees of freedom.
    Otherwise two independent samples: Welch's standard error and degrees of freedom.
    ``skew_corrected`` (default): Hall's skewness-corrected bounds
    (:func:`robench.stats.intervals.skew_corrected_bounds`) with the estimate's skewness
    (the differences', or for two samples ``(k3_a / n_a^2 - k3_b / n_b^2) / se^3``) allowed
    one standard error either way (two samples: :data:`TWO_SAMPLE_SKEW_SE`); else Student's ``estimate ± t se``. Student's let a skewed
    difference (Gamma(2), skewness -1.4) through one-sided 8-11% at 8-20 repeats instead of
    5% (tests/stats/test_equivalence.py). Bounds None with ``reason`` when fewer than 2
    values (per sample or pair) or no spread.
    """

    if paired:
        d = _paired(a, b)
        n = int(d.size)
        out = {"paired": True, "n": n, "estimate": float(d.mean()) if n else None}
        if n < 2:
            return {**out, "low": None, "high": None, "se": None, "df": None,
                    "reason": f"{n} complete pair(s): a spread needs at least 2"}
        sd = float(d.std(ddof=1))
        se, df = sd / math.sqrt(n), float(n - 1)
        skew, skew_se = _skew(d) / math.sqrt(n), float(skewness_se(n)) / math.sqrt(n)
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
            skew = (_skew(xa) * ka - _skew(xb) * kb) / se ** 3
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
    """Return the TOST decision on |mean(a) - mean(b)| < ``margin`` with its evidence.

    ``status``: :data:`EQUIVALENT` when the ``1 - 2 alpha`` interval lies inside
    ``(-margin, margin)``, :data:`NOT_EQUIVALENT` when it lies wholly outside
    ``[-margin, margin]``, :data:`UNDECIDED` otherwise (or without an interval). Also the
    interval (:func:`difference_interval`) and ``repeats``: how many repeats (pairs, or per
    sample) the observed difference and spread would need to decide (None when the estimate
    sits on the margin, or without a spread).
    """
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    iv = difference_interval(a, b, 1 - 2 * alpha, paired=paired)
    out = {**iv, "margin": margin, "alpha": alpha}
    lo, hi, est = iv["low"], iv["high"], iv["estimate"]
    if lo is None:
        return {**out, "status": UNDECIDED, "repeats": None}
    if -margin < lo and hi < margin:
        status = EQUIVALENT
    elif lo > margin or hi < -margin:
        status = NOT_EQUIVALENT
    else:
        status = UNDECIDED
    n_now = iv["n"] if paired else min(iv["n"])
    need = (None if status != UNDECIDED
            else repeats_to_decide(abs(est) - margin, iv["sd"], n_now, 1 - 2 * alpha))
    return {**out, "status": status, "repeats": need}


def repeats_to_decide(distance: float, sd: float, n: int, level: float,
                      limit: int = 100_000) -> Optional[int]:
    """Return the smallest n' >= n whose ``level`` t half-width ``t * sd / sqrt(n')`` is
    below ``|distance|`` (the gap between an estimate and the bound it must clear), or None.

    What "more repeats would decide it" means in numbers, at the observed estimate and
    spread (both move as repeats are added, so it is a planning figure, not a promise).
    None when the distance is 0 or the spread is 0 or undefined, or above ``limit``.
    """

    distance = abs(float(distance))
    if not (distance > 0 and sd is not None and sd > 0 and math.isfinite(sd)):
        return None
    def fits(m):
        return float(t_quantile(level, m - 1)) * sd / math.sqrt(m) < distance

    lo = max(int(n), 2)
    if fits(lo):
        return lo
    hi = lo
    while not fits(hi):  # the half-width falls like 1/sqrt(m): double until it fits
        hi *= 2
        if hi > limit:
            return None
    while hi - lo > 1:  # fits(hi), not fits(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi
