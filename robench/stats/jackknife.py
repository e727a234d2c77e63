"""Delete-one jackknife intervals for statistics of a few dependent values.

Some claims are decided on statistics whose values are not independent draws: a correlation
over a zoo of models compared with another correlation over the *same* models (they share
the robustness variable), a ratio of two standard deviations of *paired* values (a fold's
validation and test accuracy), a ratio of mean pairwise distances between folds (the 20
distances of 5 folds share their folds). Textbook intervals for these assume independent
samples and normal data; the jackknife (Quenouille; Tukey; Miller, "The jackknife - a
review", Biometrika 61(1), 1974, doi:10.1093/biomet/61.1.1) leaves out one *unit* at a time
(a model, a pair, a fold) and so keeps whatever dependence the units carry, and its variance
adapts to non-normal data where normal-theory formulas do not (Miller's jackknife test for
variances, Ann. Math. Statist. 39, 1968, is the classic example). Each function works on a
transformed scale where the statistic is closer to normal (Fisher's z, a log ratio) and
returns the interval back on the natural scale. tests/test_jackknife.py pins the error rates
by simulation on normal, skewed and heavy-tailed data at the sizes robench uses.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import t_quantile

#: Default confidence level.
LEVEL = 0.95


def pseudo_interval(full: float, loo: Sequence, level: float = LEVEL) -> dict:
    """Return the jackknife t interval from a statistic and its leave-one-out values.

    Pseudo-values ``n * full - (n - 1) * loo_i``; estimate = their mean (bias-corrected),
    se = their sd / sqrt(n), ``estimate ± t(n - 1) se``. Bounds None with ``reason`` when
    n < 3, a value is not finite, or the pseudo-values have no spread.
    """

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
    """Return r(y, x1) vs r(y, x2) over the same units, with a jackknife interval.

    The two correlations share y (and x1, x2 are themselves correlated), so their
    difference needs a test for dependent correlations. The statistic is the difference of
    Fisher's z, ``atanh r(y, x1) - atanh r(y, x2)``; leave one unit (model) out at a time
    (:func:`pseudo_interval`). Returns ``r1``, ``r2``, ``r12`` (x1 vs x2), ``n`` and the
    interval of the z difference (``low``/``high``, None with ``reason``). x1 predicts y
    better than x2 when ``low > 0``; worse when ``high < 0``.

    Williams' t (Steiger, "Tests for comparing elements of a correlation matrix", Psychol.
    Bull. 87(2), 1980, doi:10.1037/0033-2909.87.2.245, eq. 7) assumes trivariate normal
    data; on skewed data (Gamma(2) margins) it rejected a true equality one-sided 4.1% at 8
    units and 6.3% at 30, nominal 2.5% (docs/claims.md); this jackknife 2.6% and 3.7%.
    (Neither scipy nor statsmodels has a test for dependent correlations; R's cocor and
    psych do, normal-theory ones.)
    """
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
    """Return sd(a) / sd(b) of paired values with a jackknife interval (pairs left out).

    The log variance ratio ``log(s_a^2 / s_b^2)`` is jackknifed over the complete pairs
    (``a[i]``, ``b[i]`` of the same unit; None marks a missing value); the interval is
    returned as a ratio of standard deviations, ``exp(bound / 2)``. The F interval assumes
    two independent normal samples, and both it and the paired Pitman-Morgan interval let
    a true ratio of 1 through one-sided 7-11% at 10-20 pairs of skewed or heavy-tailed
    values (nominal 2.5%); this one 4-6% (tests/test_jackknife.py).
    """
    pairs = [(float(x), float(y)) for x, y in zip(a, b) if x is not None and y is not None]
    pa = np.asarray([p[0] for p in pairs], float)
    pb = np.asarray([p[1] for p in pairs], float)
    n = int(pa.size)
    out = {"n": n, "level": level}
    if n < 3:
        return {**out, "ratio": None, "low": None, "high": None,
                "reason": f"{n} complete pair(s): a jackknife needs at least 3"}
    va, vb = float(pa.var(ddof=1)), float(pb.var(ddof=1))
    if not (va > 0 and vb > 0):
        return {**out, "ratio": None if not vb > 0 else 0.0, "low": None, "high": None,
                "reason": "a side has no spread"}
    keep = ~np.eye(n, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = [math.log(float(pa[k].var(ddof=1)) / float(pb[k].var(ddof=1)))
               if pb[k].var(ddof=1) > 0 and pa[k].var(ddof=1) > 0 else float("nan")
               for k in keep]
    iv = pseudo_interval(math.log(va / vb), loo, level)
    ratio = math.sqrt(va / vb)
    if iv["low"] is None:
        return {**out, "ratio": ratio, "low": None, "high": None, "reason": iv["reason"]}
    return {**out, "ratio": ratio, "low": math.exp(iv["low"] / 2),
            "high": math.exp(iv["high"] / 2), "log_se": iv["se"]}


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
    """Return sd(a) / sd(b) of two independent samples with Miller's jackknife interval.

    Each sample's log variance is jackknifed on its own (Miller, "Jackknifing variances",
    Ann. Math. Statist. 39(2), 1968, doi:10.1214/aoms/1177698419); the log ratio's variance is
    the sum, t at min(n_a, n_b) - 1 degrees of freedom; returned as a ratio of standard
    deviations. Unlike the F interval it does not assume normal data.
    """

    xa = np.asarray([float(v) for v in a if v is not None], float)
    xb = np.asarray([float(v) for v in b if v is not None], float)
    out = {"n": [int(xa.size), int(xb.size)], "level": level}
    if min(xa.size, xb.size) < 3:
        return {**out, "ratio": None, "low": None, "high": None,
                "reason": "fewer than 3 values on a side: no jackknife interval"}
    va, vb = float(xa.var(ddof=1)), float(xb.var(ddof=1))
    if not (va > 0 and vb > 0):
        return {**out, "ratio": None, "low": None, "high": None,
                "reason": "a side has no spread"}
    var = (_jackknife_variance(_log_variances_left_out(xa))
           + _jackknife_variance(_log_variances_left_out(xb)))
    ratio = math.sqrt(va / vb)
    if not (math.isfinite(var) and var > 0):
        return {**out, "ratio": ratio, "low": None, "high": None,
                "reason": "a leave-one-out variance is 0: no interval"}
    half = float(t_quantile(level, min(xa.size, xb.size) - 1)) * math.sqrt(var)
    theta = math.log(va / vb)
    return {**out, "ratio": ratio, "low": math.exp((theta - half) / 2),
            "high": math.exp((theta + half) / 2)}


def _offdiagonal_mean(matrices: list, drop: Optional[tuple] = None) -> float:
    """Mean of the off-diagonal entries over the matrices, fold ``drop = (m, i)`` left out."""
    vals = []
    for m, mat in enumerate(matrices):
        k = len(mat)
        for i in range(k):
            for j in range(k):
                if i == j or (drop is not None and drop[0] == m and drop[1] in (i, j)):
                    continue
                v = mat[i][j]
                if v is not None and math.isfinite(float(v)):
                    vals.append(float(v))
    return float(np.mean(vals)) if vals else float("nan")


def distance_ratio(shifted: list, random: list, level: float = LEVEL) -> dict:
    """Return mean pairwise distance of shifted folds / of random folds, jackknifed by fold.

    ``shifted``, ``random``: per repeat a K x K matrix of distances between its folds (None
    where a distance is missing). The K (K - 1) distances of one repeat share their K folds,
    so they are not independent values; the unit of the jackknife is a fold: leaving out
    fold i of repeat m drops every distance it takes part in. The two sets of folds are
    independent samples (Arvesen's two-sample jackknife for U-statistics, Ann. Math.
    Statist. 40, 1969): the variance of the log ratio is the shifted folds' jackknife
    variance plus the random folds', with t at min(n_shifted, n_random) - 1 degrees of
    freedom. Returns ``ratio``, ``low``, ``high``, ``folds`` (n_shifted, n_random).
    """

    def units(mats):
        return [(m, i) for m, mat in enumerate(mats) for i in range(len(mat))]

    s_full, r_full = _offdiagonal_mean(shifted), _offdiagonal_mean(random)
    us, ur = units(shifted), units(random)
    out = {"folds": [len(us), len(ur)], "level": level}
    if not (s_full > 0 and r_full > 0):
        return {**out, "ratio": None, "low": None, "high": None,
                "reason": "no positive mean distance on a side"}
    ratio = s_full / r_full
    if len(us) < 3 or len(ur) < 3:
        return {**out, "ratio": ratio, "low": None, "high": None,
                "reason": "fewer than 3 folds on a side: no jackknife interval"}

    with np.errstate(divide="ignore", invalid="ignore"):
        var = (_jackknife_variance([math.log(_offdiagonal_mean(shifted, u)) for u in us])
               + _jackknife_variance([math.log(_offdiagonal_mean(random, u)) for u in ur]))
    if not (math.isfinite(var) and var > 0):
        return {**out, "ratio": ratio, "low": None, "high": None,
                "reason": "the leave-one-fold-out values have no spread or are undefined"}
    df = min(len(us), len(ur)) - 1
    half = float(t_quantile(level, df)) * math.sqrt(var)
    theta = math.log(ratio)
    return {**out, "ratio": ratio, "low": math.exp(theta - half),
            "high": math.exp(theta + half), "log_se": math.sqrt(var), "df": df}
