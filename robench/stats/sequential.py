"""The sequential rule of ``robench run --until decided``: planned looks, every pair tested.

**Paired differences.** In the source-aware protocol repeat r of every model uses the same
partitions (the exclusive and inclusive test masks and the training seeds depend on the
repeat index, the data set and the clusterer, never on the model), so models are compared
by the per-repeat differences of their scores. rho_m = E[X_m] / E[I_m] is a ratio of means,
linearised per repeat by its influence value (delta method)

    psi_m,r = (x_m,r - rho_hat_m * i_m,r) / Ibar_m;

:func:`paired_difference` gives the resulting interval of ``rho_a - rho_b`` (Hall's
skew-corrected or Student's; the adequacy claim uses it).

**Decisions.** At every look :func:`table_look` calls the one paired test of
:mod:`robench.stats.paired` on every pair of the table (:func:`robench.stats.paired.
compare_all`: Hall's skew-corrected t, Holm over the pairs, equivalence within the margin by
two one-sided tests; over complete cycles of the balanced held-out design with its
degraded-run check, or over the shared repeats of independent ones).

**Looks.** Two ways to keep a wrong call at any look below alpha. (1) Planned doubling looks
(:func:`looks_for`), each at ``alpha / K`` (Bonferroni, :func:`corrected_level`): what
``robench run --until decided`` does today. (2) A look at every complete cycle
(:func:`cycle_looks`) with alpha *spent* across them (:func:`spent`: Lan-DeMets
O'Brien-Fleming-type or Pocock-type; :func:`boundaries`: the group-sequential z boundaries by
recursive integration; :func:`look_alphas`: each look's level), so the last look keeps most of
the fixed test's level (0.039 of 0.05 at the 7 cycle looks from 10 to 40 repeats, against
0.007 each by Bonferroni over 7 looks) and every complete cycle is a look.
benchmarks/simulations.py's ``run_sequential`` simulates either (``spending=None`` or
``"obf"``). Only models in an undecided pair get the next look's repeats; a table stops when no pair is undecided, or at the maximum. docs/adaptive.md has the
rates; tests/stats/test_sequential.py pins them.

Everything here is a pure function of numbers, vectorised over simulated runs: the driver
(:mod:`robench.run.adaptive`) calls :func:`table_look` on one run, the simulations of
benchmarks/simulations.py on thousands.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
from robench.stats.intervals import fieller_bounds, skew_corrected_bounds, skewness_se, t_quantile
from robench.stats.paired import compare_all

#: Repeats at the first look.
FIRST_LOOK = 6
#: Error rate of every interval over all looks (hence of each reported pair decision).
ALPHA = 0.05
#: Default precision: two models whose rho differ by less than this are equivalent.
PRECISION = 0.01

UNDECIDED, ORDERED, EQUIVALENT = "undecided", "ordered", "equivalent"
STATUS = (UNDECIDED, ORDERED, EQUIVALENT)  # codes 0, 1, 2 in the arrays below


def looks(max_repeats: int, first: int = FIRST_LOOK) -> list:
    """Return the planned looks: ``first``, doubling, ending exactly at ``max_repeats``.

    A look closer to the maximum than half its own size is merged into it (6, 12, 24, 48,
    100 for 100, not ..., 48, 96, 100; 8 gives one look), so no look adds only a handful
    of repeats.

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
    """Return the planned looks for a cycle: whole cycles from ``first``, doubling, the
    last at ``max_repeats`` (see :func:`looks`)."""
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

    ``"obf"``, O'Brien-Fleming-type: ``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`` (almost nothing
    early, nearly the whole alpha at the end: a fixed test's power at the last look, 2.6%
    more maximum information for 5 looks); ``"pocock"``, Pocock-type: ``alpha ln(1 + (e - 1)
    t)`` (more early, less at the end). Both are 0 at t = 0 and alpha at t = 1.
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

    The boundary at look j is the c with ``P(Z_1 < c_1, ..., Z_{j-1} < c_{j-1}, Z_j >= c) =
    spent(t_j) - spent(t_{j-1})`` for the Brownian-motion statistics of a fixed-effect test
    (``Z_j sqrt(t_j)`` with independent normal increments), found by integrating the
    density of the continuation region on a grid (Armitage, McPherson & Rowe, JRSS A 132(2),
    1969); inf where a look spends nothing. O'Brien-Fleming-type, 5 equally spaced looks,
    0.025: 4.877, 3.357, 2.680, 2.290, 2.031 (the published values; tests/stats/
    test_sequential.py).
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
    """Return the familywise level of each look of a sequential rule (alpha spent by looks).

    ``repeats``: the repeats at each look so far (increasing; information fraction
    ``n / max_repeats``), ``max_repeats`` the planned maximum. Each direction of a pair spends
    ``alpha / 2`` by :func:`spent`; the look's level is twice the nominal one-sided level
    ``1 - Phi(c_j)`` of :func:`boundaries`. Pass it as the ``alpha`` of
    :func:`table_look` (with ``looks=1``): a table then orders a wrong pair at any look
    with probability at most alpha (tests/stats/test_sequential.py simulates it with a look
    at every complete cycle). The levels of the looks so far do not depend on later looks,
    so a race that adds a look calls this again with one more entry.
    """
    from scipy import stats

    if max_repeats < 1:
        raise ValueError(f"max_repeats must be >= 1, got {max_repeats}")
    fr = [min(int(n), max_repeats) / max_repeats for n in repeats]
    c = boundaries(fr, alpha / 2.0, kind)
    return [float(2.0 * stats.norm.sf(z)) if math.isfinite(z) else 0.0 for z in c]


def cycle_looks(max_repeats: int, cycle: Optional[int], first: int = FIRST_LOOK) -> list:
    """Return looks at every complete cycle from the first at or after ``first`` repeats (at
    least two cycles) up to ``max_repeats`` (repeats past the last complete cycle are not
    looked at: the balanced test does not use them); without a cycle, :func:`looks`.

    >>> cycle_looks(40, 5), cycle_looks(12, 5), cycle_looks(24, None)
    ([10, 15, 20, 25, 30, 35, 40], [10], [6, 12, 24])
    """
    if not cycle or cycle < 2:
        return looks(max_repeats, first)
    start = max(cycle * math.ceil(first / cycle), 2 * cycle)
    plan = list(range(start, max_repeats + 1, cycle))
    return plan or [max_repeats]


def _t(level: float, df):
    df = np.asarray(df, float)
    with np.errstate(invalid="ignore"):
        return np.where(df >= 1, t_quantile(level, np.maximum(df, 1)), np.nan)


def sample_skewness(psi, ok, n):
    """Return the sample skewness m3 / m2^1.5 of per-repeat values with mean 0 over ``ok``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        m2 = np.where(ok, psi ** 2, 0.0).sum(-1) / n
        m3 = np.where(ok, psi ** 3, 0.0).sum(-1) / n
        return np.where(m2 > 0, m3 / m2 ** 1.5, 0.0)


def paired_difference(xa, ia, xb, ib, level: float, *, skew_corrected: bool = True) -> dict:
    """Return the paired delta-method interval of ``rho_a - rho_b`` (arrays over leading axes).

    Inputs have shape ``(..., R)``: per repeat index the exclusive (x) and inclusive (i)
    accuracies of models a and b, NaN where a repeat was not run (or failed). Only repeats
    complete for both models count (n of them). Returns arrays ``d`` (the difference of the
    two ratios of means over those repeats), ``low``, ``high``, ``se``, ``n``, ``skewness``;
    bounds NaN where n < 2, a mean inclusive accuracy is 0, or the differences have no
    spread (a zero-width interval would claim a certainty n repeats cannot give) -- except
    where the two models' accuracies are identical in every common repeat: [0, 0]
    (equivalent).

    ``skew_corrected`` (the default, what the rule uses): Hall's transformation with the
    skewness of the per-repeat differences taken at its estimate minus one standard error
    for the lower bound and plus one for the upper
    (:func:`robench.stats.intervals.skew_corrected_bounds`): the interval
    reaches further on the side the data may be skewed towards, by as much as the few
    repeats cannot rule out. Without it, Student's ``D_hat ± t(n - 1) se``, whose one-sided
    miss rate at 99% was 1.9% instead of 0.5% on a Gamma(2)-shaped shared effect
    (docs/adaptive.md).
    """
    xa, ia, xb, ib = (np.asarray(v, float) for v in (xa, ia, xb, ib))
    ok = np.isfinite(xa) & np.isfinite(ia) & np.isfinite(xb) & np.isfinite(ib)
    n = ok.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        def mean(v):
            return np.where(ok, v, 0.0).sum(-1) / n

        mxa, mia, mxb, mib = mean(xa), mean(ia), mean(xb), mean(ib)
        ra, rb = mxa / mia, mxb / mib
        psi = ((xa - ra[..., None] * ia) / mia[..., None]
               - (xb - rb[..., None] * ib) / mib[..., None])
        psi = np.where(ok, psi, 0.0)  # mean 0 over the complete repeats by construction
        var = (psi ** 2).sum(-1) / (n - 1)
        sd = np.sqrt(var)
        se = sd / np.sqrt(n)
        d = ra - rb
        t = _t(level, n - 1)
        g = sample_skewness(psi, ok, n)
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
    """Return the mean over the last axis ignoring NaN, NaN where no value is (numpy's nanmean
    warns "Mean of empty slice" there: a model with no repeat run yet is an expected input)."""
    missing = np.isnan(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(missing, 0.0, a).sum(-1) / (~missing).sum(-1)


def _nanvar(a):
    """Return the sample variance (ddof 1) over the last axis ignoring NaN, NaN (no warning)
    where fewer than two values are."""
    missing = np.isnan(a)
    dev = np.where(missing, 0.0, a - _nanmean(a)[..., None])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((~missing).sum(-1) > 1, (dev * dev).sum(-1) / ((~missing).sum(-1) - 1),
                        np.nan)


def table_look(x, i, precision: float, alpha: float = ALPHA, higher_is_better: bool = True, *,
               cycle: Optional[int] = None, looks: int = 1) -> dict:
    """Return one look's decision for tables of models, vectorised over runs.

    ``x``, ``i``: exclusive and inclusive accuracies, shape ``(runs, models, R)``, NaN where a
    repeat was not run. Every pair of models gets the one paired test
    (:func:`robench.stats.paired.compare_all`: Holm over the pairs, equivalence within
    ``precision``; Hall's skew-corrected t at ``alpha / looks``, over complete cycles of
    ``cycle`` with the degraded-run check, or over every shared repeat). Returns ``order`` (runs, M) model indices by
    estimate, ``estimate`` (runs, M), ``pairs`` [(a, b)] of model indices, per pair
    (runs, P) ``status`` (+1 a above b, -1 b above a, 2 equivalent, 0 undecided) and
    ``degraded`` (the repeat that kept a pair undecided, -1 none),
    ``best``/``worst`` (runs, M) rank intervals, ``decided`` (runs,): no pair undecided, and
    ``open`` (runs, M): the models in an undecided pair (one model alone: decided when its
    Fieller interval at ``1 - alpha / looks`` has half-width below ``precision``).
    """

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
        return {"order": order, "estimate": est, "pairs": [],
                "status": np.zeros((runs, 0), int), "degraded": np.zeros((runs, 0), int),
                "best": np.ones((runs, 1), int),
                "worst": np.ones((runs, 1), int), "decided": decided,
                "open": ~decided[:, None]}
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
    """Return the probability that a pair with true difference ``d`` and per-repeat spread
    ``sd`` is decided at ``n`` repeats: ordered by the two-sided test at ``alpha``, or shown
    equivalent within ``margin`` by two one-sided tests each at ``alpha`` (normal
    approximation; ``alpha`` is the pair's level, e.g. a look's alpha over the pairs)."""
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
    """Return the fewest repeats (a multiple of ``step``) at which :func:`decide_power`
    reaches ``power``; None where not within ``cap`` (a difference at the margin, say)."""
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
