"""Confidence intervals over a few repeats: a mean, a ratio of two independent means.

Student's t (:func:`mean_interval`), Hall's skew-corrected t (:func:`skewed_mean_interval`),
Fieller's and the delta-method interval of rho = E[AccX] / E[AccI] (:func:`ratio_interval`;
E. C. Fieller, J. R. Stat. Soc. B 16(2), 1954, doi:10.1111/j.2517-6161.1954.tb00159.x).
Where no finite interval exists the bounds are None and ``reason`` says why. docs/intervals.md
has the argument and the coverage simulation (benchmarks/interval_coverage.py).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np

#: Default confidence level.
LEVEL = 0.95
METHODS = ("fieller", "delta")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval, or None bounds and the ``reason``."""

    estimate: Optional[float]
    low: Optional[float]
    high: Optional[float]
    method: str
    level: float
    df: Optional[float]
    n: tuple
    reason: Optional[str] = None

    @property
    def defined(self) -> bool:
        """Return whether both bounds are set."""
        return self.low is not None and self.high is not None

    def as_dict(self) -> dict:
        """Return the fields as a JSON-serialisable dict (what a Score's details store)."""
        out = asdict(self)
        out["n"] = list(self.n)
        return out


def _values(values) -> np.ndarray:
    """Return the non-None values as a float array (None marks a missing repeat)."""
    return np.asarray([float(v) for v in values if v is not None], dtype=np.float64)


def t_quantile(level: float, df):
    """Return the two-sided Student-t quantile t_{(1+level)/2, df} (df may be an array)."""
    from scipy import stats

    return stats.t.ppf(0.5 + level / 2, df)


def smallest_fitting(fits, lo: int, limit: int) -> Optional[int]:
    """Return the smallest m >= ``lo`` with ``fits(m)`` (a monotone test), None past ``limit``."""
    hi = lo
    while not fits(hi):  # double until it fits
        hi *= 2
        if hi > limit:
            return None
    lo = max(lo, hi // 2)  # fits(lo) is False unless hi == lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def mean_interval(values: Sequence, level: float = LEVEL, *,
                  bounds: Optional[tuple] = None) -> Interval:
    """Return Student's t interval of the mean of ``values`` (None entries are skipped).

    Bounds None (with ``reason``) without two values or when all are equal: a zero-width interval
    would claim a certainty the repeats cannot give.
    """
    x = _values(values)
    n = int(x.size)
    if n == 0:
        return Interval(None, None, None, "t", level, None, (0,), "no values")
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, None, None, "t", level, None, (n,),
                        "one value: a spread needs at least 2 repeats")
    sd = float(x.std(ddof=1))
    if x.max() == x.min():  # exactly equal values (the mean's rounding can make sd ~1e-17)
        return Interval(mean, None, None, "t", level, float(n - 1), (n,),
                        f"all {n} values are equal: no spread to build an interval from")
    half = float(t_quantile(level, n - 1)) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return Interval(mean, lo, hi, "t", level, float(n - 1), (n,))


#: Standard errors of the estimated skewness allowed for by :func:`skew_corrected_bounds`.
SKEW_SE = 1.0


def skewness(x: np.ndarray) -> float:
    """Return the sample skewness m3 / m2^1.5 of x (0 without spread)."""
    c = x - x.mean()
    m2 = float((c * c).mean())
    return float((c ** 3).mean()) / m2 ** 1.5 if m2 > 0 else 0.0


def skewness_se(n):
    """Return ``sqrt(6 (n - 2) / ((n + 1)(n + 3)))``: a sample skewness's se (0.62 at n = 6)."""
    n = np.asarray(n, float)
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.maximum(6.0 * (n - 2) / ((n + 1) * (n + 3)), 0.0))


def _hall_quantile(t, u):
    """Return ``(3/u)((1 + u (t - u/6))^(1/3) - 1)``: Hall's transformation inverted at t.

    P. Hall, JRSS B 54(1), 1992, doi:10.1111/j.2517-6161.1992.tb01879.x; u: the mean's skewness.
    """
    t, u = np.asarray(t, float), np.asarray(u, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        small = np.abs(u) < 1e-10
        us = np.where(small, 1.0, u)
        out = (3.0 / us) * (np.cbrt(1.0 + us * (t - us / 6.0)) - 1.0)
    return np.where(small, t, out)


def skew_corrected_bounds(estimate, se, t, skew, skew_se, k: float = SKEW_SE):
    """Return (low, high): Hall's interval, skewness ``k`` se towards each bound."""
    estimate, se = np.asarray(estimate, float), np.asarray(se, float)
    low = estimate - se * _hall_quantile(t, np.asarray(skew) - k * np.asarray(skew_se))
    high = estimate - se * _hall_quantile(-np.asarray(t), np.asarray(skew) + k * np.asarray(skew_se))
    return low, high


#: Standard errors of the sample skewness :func:`skewed_mean_interval` allows either way.
SKEWED_MEAN_SKEW_SE = 2.0


def skewed_mean_interval(values: Sequence, level: float = LEVEL, *,
                         bounds: Optional[tuple] = None,
                         k: float = SKEWED_MEAN_SKEW_SE) -> Interval:
    """Return Hall's skew-corrected interval of the mean (docs/intervals.md)."""
    x = _values(values)
    n = int(x.size)
    plain = mean_interval(values, level, bounds=bounds)
    if not plain.defined:
        return Interval(plain.estimate, None, None, "hall", level, plain.df, plain.n,
                        plain.reason)
    mean, sd, root = float(x.mean()), float(x.std(ddof=1)), math.sqrt(n)
    lo, hi = skew_corrected_bounds(mean, sd / root, float(t_quantile(level, n - 1)),
                                   skewness(x) / root, float(skewness_se(n)) / root, k)
    lo, hi = float(lo), float(hi)
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return Interval(mean, lo, hi, "hall", level, float(n - 1), (n,))


def welch_df(var_x, n_x, var_i, n_i, rho):
    """Return the Welch-Satterthwaite degrees of freedom of ``v_x + rho^2 v_i``, ``v = s^2/n``.

    B. L. Welch, Biometrika 34, 1947, doi:10.1093/biomet/34.1-2.28. NaN where both variances are 0.
    """
    var_x, var_i = np.asarray(var_x, float), np.asarray(var_i, float)
    rho2 = np.asarray(rho, float) ** 2
    vx, vi = var_x / n_x, rho2 * var_i / n_i
    with np.errstate(divide="ignore", invalid="ignore"):
        return (vx + vi) ** 2 / (vx ** 2 / (n_x - 1) + vi ** 2 / (n_i - 1))


def _ratio_terms(mean_x, var_x, n_x, mean_i, var_i, n_i, level, df):
    """Return means, variances, estimate, df (:func:`welch_df` unless given) and t of a ratio."""
    mean_x, mean_i = np.asarray(mean_x, float), np.asarray(mean_i, float)
    var_x, var_i = np.asarray(var_x, float), np.asarray(var_i, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = mean_x / mean_i
        if df is None:
            df = welch_df(var_x, n_x, var_i, n_i, rho)
        df = np.asarray(df, float)
        t = np.where(np.isfinite(df) & (df > 0), t_quantile(level, np.where(df > 0, df, 1)),
                     np.nan)
    return mean_x, var_x, mean_i, var_i, rho, df, t


def fieller_bounds(mean_x, var_x, n_x, mean_i, var_i, n_i, level: float = LEVEL, df=None):
    """Return (low, high, df) of Fieller's interval for mu_x / mu_i (NaN: unbounded)."""
    mean_x, var_x, mean_i, var_i, rho, df, t = _ratio_terms(mean_x, var_x, n_x, mean_i, var_i,
                                                           n_i, level, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        vx, vi = var_x / n_x, var_i / n_i
        a = mean_i ** 2 - t ** 2 * vi
        b = mean_x * mean_i
        disc = t ** 2 * (a * vx + vi * mean_x ** 2)
        root = np.sqrt(np.maximum(disc, 0.0))
        ok = (a > 0) & np.isfinite(t)
        low = np.where(ok, (b - root) / a, np.nan)
        high = np.where(ok, (b + root) / a, np.nan)
    return low, high, df


def delta_bounds(mean_x, var_x, n_x, mean_i, var_i, n_i, level: float = LEVEL, df=None):
    """Return (low, high, df) of the delta-method t interval for mu_x / mu_i (as fieller_bounds)."""
    mean_x, var_x, mean_i, var_i, rho, df, t = _ratio_terms(mean_x, var_x, n_x, mean_i, var_i,
                                                           n_i, level, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(var_x / n_x + rho ** 2 * var_i / n_i) / np.abs(mean_i)
        ok = np.isfinite(rho) & np.isfinite(t)
        low = np.where(ok, rho - t * se, np.nan)
        high = np.where(ok, rho + t * se, np.nan)
    return low, high, df


def ratio_interval(x: Sequence, i: Sequence, level: float = LEVEL, *,
                   method: str = "fieller") -> Interval:
    """Return the interval of mu_x / mu_i from two independent samples (None skipped)."""
    if method not in METHODS:
        raise ValueError(f"unknown ratio interval method {method!r}; use one of {METHODS}")
    xs, is_ = _values(x), _values(i)
    ns = n_x, n_i = int(xs.size), int(is_.size)
    if n_x == 0 or n_i == 0:
        return Interval(None, None, None, method, level, None, ns,
                        "no values in the " + ("numerator" if n_x == 0 else "denominator"))
    mx, mi = float(xs.mean()), float(is_.mean())
    if mi == 0:
        return Interval(None, None, None, method, level, None, ns,
                        "the denominator's mean is 0: the ratio is undefined")
    est = mx / mi
    if n_x < 2 or n_i < 2:
        return Interval(est, None, None, method, level, None, ns,
                        f"{n_x} numerator and {n_i} denominator values: each needs at least 2 "
                        "repeats to estimate its spread")
    # Exactly equal values have variance 0 (the mean's rounding would leave ~1e-33).
    vx = 0.0 if xs.max() == xs.min() else float(xs.var(ddof=1))
    vi = 0.0 if is_.max() == is_.min() else float(is_.var(ddof=1))
    if vx == 0 and vi == 0:
        return Interval(est, None, None, method, level, None, ns,
                        "both samples have zero spread (all repeats equal): no interval")
    bounds = fieller_bounds if method == "fieller" else delta_bounds
    low, high, df = bounds(mx, vx, n_x, mi, vi, n_i, level)
    low, high, df = float(low), float(high), float(df)
    if not (math.isfinite(low) and math.isfinite(high)):
        t = float(t_quantile(level, df))
        return Interval(est, None, None, method, level, df, ns,
                        f"the denominator's mean is not significantly different from 0 at "
                        f"level {level:g} (mean^2 / its variance = {mi * mi / (vi / n_i):.3g} "
                        f"<= t^2 = {t * t:.3g}): Fieller's confidence set is unbounded")
    return Interval(est, low, high, method, level, df, ns)

