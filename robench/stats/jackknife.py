"""Delete-one jackknife intervals for statistics of a few dependent values.

Each function leaves out one unit (a model, a pair, a fold) at a time on a near-normal scale
(Fisher's z, a log ratio) and returns the interval on the natural scale. docs/intervals.md
("Jackknife intervals") has the argument, the references and the measured error rates.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import t_quantile

#: Default confidence level.
LEVEL = 0.95


def pseudo_interval(full: float, loo: Sequence, level: float = LEVEL) -> dict:
    """Return the jackknife t interval from a statistic and its leave-one-out values."""
    loo = np.asarray(loo, float)
    n = int(loo.size)
    out = {"n": n, "full": float(full), "level": level}
    if n < 3 or not math.isfinite(full) or not np.all(np.isfinite(loo)):
        return {**out, "estimate": float(full), "low": None, "high": None, "se": None,
                "sd": None, "reason": "fewer than 3 units, or a leave-one-out value is not "
                                      "finite: no jackknife interval"}
    pseudo = n * float(full) - (n - 1) * loo
    est, sd = float(pseudo.mean()), float(pseudo.std(ddof=1))
    se = sd / math.sqrt(n)
    if not se > 0:
        return {**out, "estimate": est, "low": None, "high": None, "se": 0.0, "sd": 0.0,
                "reason": "the leave-one-out values are all equal: no spread"}
    half = float(t_quantile(level, n - 1)) * se
    return {**out, "estimate": est, "low": est - half, "high": est + half, "se": se, "sd": sd}


def _corr(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum()) / den if den > 0 else float("nan")


def _z(r: float) -> float:
    return math.atanh(max(-1 + 1e-12, min(1 - 1e-12, r)))


def dependent_correlations(y: Sequence, x1: Sequence, x2: Sequence,
                           level: float = LEVEL) -> dict:
    """Return r(y, x1) vs r(y, x2) over the same units, with a jackknife interval (Fisher's z):
    x1 predicts y better than x2 when ``low > 0``, worse when ``high < 0``."""
    y, x1, x2 = (np.asarray(v, float) for v in (y, x1, x2))
    n = int(y.size)
    if not (x1.size == x2.size == n):
        raise ValueError("y, x1 and x2 must have one value per unit each")
    r1, r2, r12 = _corr(y, x1), _corr(y, x2), _corr(x1, x2)
    out = {"r1": r1, "r2": r2, "r12": r12, "n": n, "level": level}
    if n < 4 or not all(math.isfinite(v) for v in (r1, r2)):
        return {**out, "estimate": None, "low": None, "high": None, "se": None, "sd": None,
                "reason": f"{n} units: a leave-one-out correlation needs at least 3 of 4"
                if n < 4 else "a correlation is undefined (no spread)"}
    keep = ~np.eye(n, dtype=bool)
    loo = [_z(_corr(y[k], x1[k])) - _z(_corr(y[k], x2[k])) for k in keep]
    return {**out, **pseudo_interval(_z(r1) - _z(r2), loo, level)}


def sd_ratio_paired(a: Sequence, b: Sequence, level: float = LEVEL) -> dict:
    """Return sd(a) / sd(b) of paired values with a jackknife interval (pairs left out)."""
    pairs = [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]
    pa, pb = (np.asarray([p[k] for p in pairs], float) for k in (0, 1))
    n = int(pa.size)
    out = {"n": n, "level": level}
    if n < 3:
        return _no_interval(out, None, f"{n} complete pair(s): a jackknife needs at least 3")
    va, vb = float(pa.var(ddof=1)), float(pb.var(ddof=1))
    if not (va > 0 and vb > 0):
        return _no_interval(out, None if not vb > 0 else 0.0, "a side has no spread")
    keep = ~np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = [math.log(float(pa[k].var(ddof=1)) / float(pb[k].var(ddof=1)))
               if pb[k].var(ddof=1) > 0 and pa[k].var(ddof=1) > 0 else float("nan")
               for k in keep]
    iv = pseudo_interval(math.log(va / vb), loo, level)
    ratio = math.sqrt(va / vb)
    if iv["low"] is None:
        return _no_interval(out, ratio, iv["reason"])
    return {**out, "ratio": ratio, "low": math.exp(iv["low"] / 2),
            "high": math.exp(iv["high"] / 2), "log_se": iv["se"]}


def _no_interval(out: dict, ratio, reason: str) -> dict:
    return {**out, "ratio": ratio, "low": None, "high": None, "reason": reason}


def _jackknife_variance(loo) -> float:
    """Return the jackknife variance ``(n - 1) / n * sum (loo_i - mean)^2`` of a statistic."""
    loo = np.asarray(loo, float)
    n = loo.size
    return (n - 1) / n * float(((loo - loo.mean()) ** 2).sum())


def _log_variances_left_out(x: np.ndarray) -> list:
    keep = ~np.eye(x.size, dtype=bool)
    with np.errstate(divide="ignore"):
        return [math.log(v) if v > 0 else float("nan")
                for v in (float(x[k].var(ddof=1)) for k in keep)]


def sd_ratio_independent(a: Sequence, b: Sequence, level: float = LEVEL) -> dict:
    """Return sd(a) / sd(b) of two independent samples with Miller's jackknife interval."""
    xa = np.asarray([float(v) for v in a if v is not None], float)
    xb = np.asarray([float(v) for v in b if v is not None], float)
    out = {"n": [int(xa.size), int(xb.size)], "level": level}
    if min(xa.size, xb.size) < 3:
        return _no_interval(out, None, "fewer than 3 values on a side: no jackknife interval")
    va, vb = float(xa.var(ddof=1)), float(xb.var(ddof=1))
    if not (va > 0 and vb > 0):
        return _no_interval(out, None, "a side has no spread")
    var = (_jackknife_variance(_log_variances_left_out(xa))
           + _jackknife_variance(_log_variances_left_out(xb)))
    ratio = math.sqrt(va / vb)
    if not (math.isfinite(var) and var > 0):
        return _no_interval(out, ratio, "a leave-one-out variance is 0: no interval")
    half = float(t_quantile(level, min(xa.size, xb.size) - 1)) * math.sqrt(var)
    theta = math.log(va / vb)
    return {**out, "ratio": ratio, "low": math.exp((theta - half) / 2),
            "high": math.exp((theta + half) / 2)}


def _offdiagonal_mean(matrices: list, drop: Optional[tuple] = None) -> float:
    """Mean of the off-diagonal entries over the matrices, fold ``drop = (m, i)`` left out."""
    vals = [float(mat[i][j]) for m, mat in enumerate(matrices)
            for i in range(len(mat)) for j in range(len(mat))
            if i != j and not (drop is not None and drop[0] == m and drop[1] in (i, j))
            and mat[i][j] is not None and math.isfinite(float(mat[i][j]))]
    return float(np.mean(vals)) if vals else float("nan")


def distance_ratio(shifted: list, random: list, level: float = LEVEL) -> dict:
    """Return mean pairwise distance of shifted folds / of random folds, jackknifed by fold."""
    def units(mats):
        return [(m, i) for m, mat in enumerate(mats) for i in range(len(mat))]

    s_full, r_full = _offdiagonal_mean(shifted), _offdiagonal_mean(random)
    us, ur = units(shifted), units(random)
    out = {"folds": [len(us), len(ur)], "level": level}
    if not (s_full > 0 and r_full > 0):
        return _no_interval(out, None, "no positive mean distance on a side")
    ratio = s_full / r_full
    if len(us) < 3 or len(ur) < 3:
        return _no_interval(out, ratio, "fewer than 3 folds on a side: no jackknife interval")
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (_jackknife_variance([math.log(_offdiagonal_mean(shifted, u)) for u in us])
               + _jackknife_variance([math.log(_offdiagonal_mean(random, u)) for u in ur]))
    if not (math.isfinite(var) and var > 0):
        return _no_interval(out, ratio,
                            "the leave-one-fold-out values have no spread or are undefined")
    df = min(len(us), len(ur)) - 1
    half = float(t_quantile(level, df)) * math.sqrt(var)
    theta = math.log(ratio)
    return {**out, "ratio": ratio, "low": math.exp(theta - half),
            "high": math.exp(theta + half), "log_se": math.sqrt(var), "df": df}
