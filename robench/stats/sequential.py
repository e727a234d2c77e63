"""The sequential rule of ``robench run --until decided``: planned looks, every pair tested.

Models share repeat r's partitions, so they are compared by per-repeat delta-method
differences (:func:`paired_difference`); at every look :func:`table_look` runs the one
paired test of :mod:`robench.stats.paired` on every pair. Looks are planned doubling ones
each at ``alpha / K`` (:func:`looks_for`, :func:`corrected_level`) or one per complete cycle
with alpha spent across them (:func:`cycle_looks`, :func:`spent`, :func:`boundaries`,
:func:`look_alphas`). docs/intervals.md ("Sequential looks") and docs/adaptive.md have the
argument and the rates. Pure functions, vectorised over simulated runs
(benchmarks/simulations.py's ``run_sequential``).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import fieller_bounds, skew_corrected_bounds, skewness_se, t_quantile
from robench.stats.paired import compare_all, influence

#: Repeats at the first look.
FIRST_LOOK = 6
#: Error rate of every interval over all looks (hence of each reported pair decision).
ALPHA = 0.05
#: Default precision: two models whose rho differ by less than this are equivalent.
PRECISION = 0.01

UNDECIDED, ORDERED, EQUIVALENT = "undecided", "ordered", "equivalent"


def looks(max_repeats: int, first: int = FIRST_LOOK) -> list:
    """Return the planned looks: ``first``, doubling, ending exactly at ``max_repeats``.

    A look closer to the maximum than half its own size is merged into it.

    >>> looks(100)
    [6, 12, 24, 48, 100]
    >>> looks(24), looks(8), looks(3)
    ([6, 12, 24], [8], [3])
    """
    max_repeats, first = int(max_repeats), int(first)
    if max_repeats < 1 or first < 1:
        raise ValueError(f"looks need max_repeats >= 1 and first >= 1, got {max_repeats}, {first}")
    if max_repeats <= first or max_repeats - first < first / 2:
        return [max_repeats]
    out = [first]
    while out[-1] < max_repeats:
        nxt = 2 * out[-1]
        if nxt >= max_repeats or max_repeats - nxt < nxt / 2:
            nxt = max_repeats
        out.append(nxt)
    return out


def looks_for(max_repeats: int, first: int, cycle: Optional[int]) -> list:
    """Return the planned looks in whole cycles from ``first``, doubling, last at the maximum."""
    if not cycle or cycle < 2 or max_repeats < 2 * cycle:
        return looks(max_repeats, first)
    plan = [cycle * n for n in looks(max_repeats // cycle, max(1, math.ceil(first / cycle)))]
    plan[-1] = max_repeats
    return plan


def corrected_level(n_looks: int, alpha: float = ALPHA) -> float:
    """Return the per-look confidence level ``1 - alpha / n_looks`` (Bonferroni over looks)."""
    if n_looks < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n_looks >= 1 and 0 < alpha < 1, got {n_looks}, {alpha}")
    return 1.0 - alpha / n_looks


#: Spending functions of :func:`spent` (Lan & DeMets, "Discrete sequential boundaries for
#: clinical trials", Biometrika 70(3), 1983, doi:10.1093/biomet/70.3.659).
SPENDING = ("obf", "pocock")


def spent(fraction, alpha: float = ALPHA, kind: str = "obf"):
    """Return the error spent by information fraction ``fraction`` (0..1), one-sided ``alpha``.

    ``"obf"``: ``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`` (nearly all alpha at the end: a fixed
    test's power at the last look, 2.6% more maximum information for 5 looks); ``"pocock"``:
    ``alpha ln(1 + (e - 1) t)`` (more early). Both are 0 at t = 0 and alpha at t = 1.
    """
    from scipy import stats

    if kind not in SPENDING:
        raise ValueError(f"unknown spending function {kind!r}; known: {', '.join(SPENDING)}")
    t = np.clip(np.asarray(fraction, float), 0.0, 1.0)
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1.0) * t)
    with np.errstate(divide="ignore"):
        z = stats.norm.ppf(1.0 - alpha / 2.0) / np.sqrt(t)
    return np.where(t > 0, 2.0 * stats.norm.sf(z), 0.0)


def boundaries(fractions: Sequence[float], alpha: float = ALPHA, kind: str = "obf") -> list:
    """Return the one-sided group-sequential z boundaries c_1..c_K at information fractions.

    Each c_j spends ``spent(t_j) - spent(t_{j-1})``, found by integrating the continuation
    density on a grid (Armitage, McPherson & Rowe, JRSS A 132(2), 1969); inf where a look
    spends nothing. OBF, 5 equal looks, 0.025: 4.877, 3.357, 2.680, 2.290, 2.031 (published).
    """
    from scipy import optimize, signal, stats

    t = np.asarray(fractions, float)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {list(t)}")
    cum = spent(t, alpha, kind)
    inc = np.diff(np.concatenate([[0.0], cum]))
    h = 0.005
    grid = np.arange(-9.0, 9.0 + h / 2, h)
    out = []
    dens = None  # density of S_{j-1} on the grid, continuation region only
    prev = 0.0
    for tj, a in zip(t, inc):
        dt = tj - prev
        if dens is None:
            c = float(stats.norm.isf(a)) if a > 1e-15 else math.inf
            dens = stats.norm.pdf(grid, scale=math.sqrt(tj))
        else:
            sd = math.sqrt(dt)

            def cross(cz, dens=dens, sd=sd, tj=tj):
                return float((dens * stats.norm.sf((cz * math.sqrt(tj) - grid) / sd)).sum() * h)

            if a <= 1e-15 or cross(12.0) > a:
                c = math.inf
            else:
                c = float(optimize.brentq(lambda cz: cross(cz) - a, -12.0, 12.0, xtol=1e-7))
            half = int(math.ceil(8 * sd / h))
            kernel = stats.norm.pdf(np.arange(-half, half + 1) * h, scale=sd) * h
            dens = signal.fftconvolve(dens, kernel, mode="same")
        dens = np.where(grid < c * math.sqrt(tj), dens, 0.0)
        out.append(c)
        prev = tj
    return out


def look_alphas(repeats: Sequence[int], max_repeats: int, alpha: float = ALPHA,
                kind: str = "obf") -> list:
    """Return the familywise level of each look (alpha spent by looks, alpha/2 per direction)."""
    from scipy import stats

    if max_repeats < 1:
        raise ValueError(f"max_repeats must be >= 1, got {max_repeats}")
    fr = [min(int(n), max_repeats) / max_repeats for n in repeats]
    c = boundaries(fr, alpha / 2.0, kind)
    return [float(2.0 * stats.norm.sf(z)) if math.isfinite(z) else 0.0 for z in c]


def cycle_looks(max_repeats: int, cycle: Optional[int], first: int = FIRST_LOOK) -> list:
    """Return looks at every complete cycle from ``first`` (at least two cycles) to the maximum.

    Repeats past the last complete cycle get no look; without a cycle, :func:`looks`.

    >>> cycle_looks(40, 5), cycle_looks(12, 5), cycle_looks(24, None)
    ([10, 15, 20, 25, 30, 35, 40], [10], [6, 12, 24])
    """
    if not cycle or cycle < 2:
        return looks(max_repeats, first)
    start = max(cycle * math.ceil(first / cycle), 2 * cycle)
    plan = list(range(start, max_repeats + 1, cycle))
    return plan or [max_repeats]


def paired_difference(xa, ia, xb, ib, level: float, *, skew_corrected: bool = True) -> dict:
    """Return the paired delta-method interval of ``rho_a - rho_b`` (arrays over leading axes).

    Inputs ``(..., R)``: per repeat each model's exclusive (x) and inclusive (i) accuracies,
    NaN where not run. Bounds NaN where n < 2, a mean AccI is 0 or there is no spread, [0, 0]
    where both models' accuracies are identical in every common repeat. ``skew_corrected``:
    Hall's bounds, skewness one se towards each side (Student's missed 1.9% one-sided instead
    of 0.5% at 99% on a Gamma(2) effect: docs/adaptive.md)."""
    xa, ia, xb, ib = (np.asarray(v, float) for v in (xa, ia, xb, ib))
    ok = np.isfinite(xa) & np.isfinite(ia) & np.isfinite(xb) & np.isfinite(ib)
    d, psi, n = influence(xa, ia, xb, ib, ok)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt((psi ** 2).sum(-1) / (n - 1)) / np.sqrt(n)
        df = np.asarray(n - 1, float)
        t = np.where(df >= 1, t_quantile(level, np.maximum(df, 1)), np.nan)
        m2 = (psi ** 2).sum(-1) / n  # psi is 0 outside ok: the sample skewness m3 / m2^1.5
        g = np.where(m2 > 0, (psi ** 3).sum(-1) / n / m2 ** 1.5, 0.0)
        if skew_corrected:
            root_n = np.sqrt(n)
            lo, hi = skew_corrected_bounds(d, se, t, g / root_n, skewness_se(n) / root_n)
        else:
            lo, hi = d - t * se, d + t * se
        bad = ((n < 2) | ~(se > 1e-12 * np.maximum(np.abs(d), 1e-3)) | ~np.isfinite(lo)
               | ~np.isfinite(hi))
        # the same accuracies in every common repeat (one model under two names, or two that
        # predict alike): [0, 0], so the pair is equivalent instead of undecided forever
        same = (n >= 2) & np.all(~ok | ((xa == xb) & (ia == ib)), axis=-1)
        low = np.where(same, 0.0, np.where(bad, np.nan, lo))
        high = np.where(same, 0.0, np.where(bad, np.nan, hi))
    return {"d": d, "low": low, "high": high, "se": np.where(n >= 2, se, np.nan), "n": n,
            "skewness": np.where(n >= 3, g, np.nan)}


def _nanmean(a):
    """Return the mean over the last axis ignoring NaN, NaN (no warning) where no value is."""
    missing = np.isnan(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(missing, 0.0, a).sum(-1) / (~missing).sum(-1)


def _nanvar(a):
    """Return the sample variance (ddof 1) over the last axis ignoring NaN, NaN with < 2 values."""
    missing = np.isnan(a)
    dev = np.where(missing, 0.0, a - _nanmean(a)[..., None])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((~missing).sum(-1) > 1, (dev * dev).sum(-1) / ((~missing).sum(-1) - 1),
                        np.nan)


def table_look(x, i, precision: float, alpha: float = ALPHA, higher_is_better: bool = True, *,
               cycle: Optional[int] = None, looks: int = 1) -> dict:
    """Return one look's decision for tables of models (runs, M, R), vectorised over runs."""
    x, i = np.asarray(x, float), np.asarray(i, float)
    runs, m, _ = x.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        est = _nanmean(x) / _nanmean(i)
    key = np.where(np.isfinite(est), -est if higher_is_better else est, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    if m == 1:
        level = corrected_level(looks, alpha)
        nx, ni = np.isfinite(x[:, 0]).sum(-1), np.isfinite(i[:, 0]).sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high, _ = fieller_bounds(_nanmean(x[:, 0]), _nanvar(x[:, 0]), nx,
                                          _nanmean(i[:, 0]), _nanvar(i[:, 0]), ni, level)
            decided = (high - low) / 2 < precision
        return {"order": order, "estimate": est, "pairs": [], "status": np.zeros((runs, 0), int),
                "degraded": np.zeros((runs, 0), int), "best": np.ones((runs, 1), int),
                "worst": np.ones((runs, 1), int), "decided": decided, "open": ~decided[:, None]}
    res = compare_all(x, i, alpha=alpha, precision=precision, cycle=cycle, looks=looks,
                      higher_is_better=higher_is_better)
    undecided = res["status"] == 0
    open_ = np.zeros((runs, m), bool)
    for k, (a, b) in enumerate(res["pairs"]):
        open_[:, a] |= undecided[:, k]
        open_[:, b] |= undecided[:, k]
    return {"order": order, "estimate": est, "pairs": res["pairs"], "status": res["status"],
            "degraded": res["degraded"], "best": res["best"], "worst": res["worst"],
            "decided": ~undecided.any(1), "open": open_}


def decide_power(d: float, sd: float, n: int, alpha: float, margin: Optional[float]) -> float:
    """Return the probability that a pair is ordered or shown equivalent at ``n`` repeats."""
    from scipy import stats

    if not (n >= 2 and sd > 0 and math.isfinite(sd) and math.isfinite(d)):
        return float("nan")
    se = sd / math.sqrt(n)
    order = float(stats.norm.cdf(abs(d) / se - stats.norm.isf(alpha / 2)))
    equivalent = 0.0
    if margin:
        z = stats.norm.isf(alpha)
        equivalent = max(0.0, float(stats.norm.cdf((margin - abs(d)) / se - z)
                                    + stats.norm.cdf((margin + abs(d)) / se - z) - 1.0))
    return max(order, equivalent)


#: The most repeats :func:`repeats_for_power` looks at (beyond it a pair is "not within reach").
REPEATS_CAP = 10_000


def repeats_for_power(d: float, sd: float, alpha: float, margin: Optional[float], *,
                      power: float = 0.8, step: int = 1,
                      cap: int = REPEATS_CAP) -> Optional[int]:
    """Return the fewest repeats (a multiple of ``step``) at which :func:`decide_power` >= power."""
    step = max(int(step), 1)
    n = max(step, 2)
    while n <= cap:
        p = decide_power(d, sd, n, alpha, margin)
        if not math.isfinite(p):
            return None
        if p >= power:
            return n
        n = n + step if n < 100 else int(math.ceil(n * 1.05 / step)) * step
    return None


def stop_reason(statuses: Sequence[str], decided: bool, n: int, max_repeats: int) -> Optional[str]:
    """Return why a table stops at this look (None: it goes on)."""
    if decided:
        kinds = set(statuses)
        if not statuses:
            return "its interval narrower than the precision"
        if kinds == {ORDERED}:
            return "every pair ordered"
        if kinds == {EQUIVALENT}:
            return "every pair equivalent within the precision"
        return "every pair ordered or equivalent within the precision"
    if n >= max_repeats:
        return "maximum repeats reached, undecided"
    return None
