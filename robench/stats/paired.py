"""One paired test for every comparison of models, and the rank intervals it gives.

Models of a table share repeat r's partitions, so they are compared by the per-repeat
delta-method differences ``psi_r`` of their ratios of means. Everything that orders models
calls :func:`shows_above` (:func:`paired_test`): Hall's skew-corrected t (P. Hall, "On the
removal of skewness by transformation", JRSS B 54(1), 1992) over the complete cycles of the
balanced design (with the degraded-run check) or over every shared repeat (independent
repeats). docs/intervals.md ("The one paired test") has the argument and the figures.
Pure functions of numbers, vectorised over leading axes (simulated runs).
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np

from robench.stats.intervals import skew_corrected_bounds, skewness_se

#: Familywise error rate of a table's calls (orders and equivalences).
ALPHA = 0.05
#: Standard errors of the sample skewness the test allows towards the tested tail.
SKEW_SE = 1.0
#: Robust z (in 1.4826 MAD units from the median) beyond which a repeat's paired difference
#: looks degraded (balanced design); a repeat 5 robust sd out is not training noise.
DEGRADED_Z = 5.0
#: Fewest repeats at which the degraded-run check can see anything (a median and a MAD of
#: fewer values are too coarse).
DEGRADED_MIN_N = 6

UNDECIDED, ORDERED, EQUIVALENT = "undecided", "ordered", "equivalent"


def complete_cycles(ok, cycle: Optional[int]):
    """Return the repeats (mask over the last axis) in complete cycles of ``ok`` (all if none)."""
    ok = np.asarray(ok, bool)
    if not cycle or cycle < 2:
        return ok
    blocks = _by_cycle(ok, cycle)
    done = np.broadcast_to(blocks.all(-1, keepdims=True), blocks.shape)
    return done.reshape(ok.shape[:-1] + (-1,))[..., :ok.shape[-1]] & ok


def _by_cycle(mask, cycle: int):
    """Return ``mask`` padded with False to whole cycles, shape (..., cycles, cycle)."""
    r = mask.shape[-1]
    full = -(-r // cycle) * cycle
    pad = np.zeros(mask.shape[:-1] + (full,), bool)
    pad[..., :r] = mask
    return pad.reshape(mask.shape[:-1] + (full // cycle, cycle))


def influence(xa, ia, xb, ib, use):
    """Return (d, psi, n): the difference of the two ratios of means over the repeats ``use``,
    the per-repeat delta-method differences psi (0 outside ``use``; mean 0 over it) and n."""
    n = use.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        def mean(v):
            return np.where(use, v, 0.0).sum(-1) / n

        mxa, mia, mxb, mib = mean(xa), mean(ia), mean(xb), mean(ib)
        ra, rb = mxa / mia, mxb / mib
        psi = ((xa - ra[..., None] * ia) / mia[..., None]
               - (xb - rb[..., None] * ib) / mib[..., None])
    return ra - rb, np.where(use, psi, 0.0), n


def degraded_repeats(psi, use, cycle: Optional[int] = None, z: float = DEGRADED_Z):
    """Return the repeats (mask like ``use``) whose paired difference looks degraded."""
    psi, use = np.asarray(psi, float), np.asarray(use, bool)
    n = use.sum(-1, keepdims=True)
    vals = np.where(use, psi, np.nan)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no repeats
        med = np.nanmedian(vals, -1, keepdims=True)
        mad = 1.4826 * np.nanmedian(np.abs(vals - med), -1, keepdims=True)
        mean_dev = 1.2533 * np.nanmean(np.abs(vals - med), -1, keepdims=True)
    scale = np.where(mad > 0, mad, np.nan_to_num(mean_dev))
    with np.errstate(invalid="ignore", divide="ignore"):
        low = use & (vals - med < -z * scale) & (scale > 0)
        high = use & (vals - med > z * scale) & (scale > 0)
    if cycle and cycle >= 2:
        cycles_done = complete_cycles(use, cycle)
        complete = _by_cycle(cycles_done, cycle).all(-1)

        def every_cycle(mask):
            per = _by_cycle(mask & cycles_done, cycle).any(-1)
            return (per | ~complete).all(-1, keepdims=True) & complete.any(-1, keepdims=True)

        # the census: every complete cycle holds a value at least half as far on that side
        low = low & ~every_cycle(use & (vals - med < -z / 2 * scale) & (scale > 0))
        high = high & ~every_cycle(use & (vals - med > z / 2 * scale) & (scale > 0))
    return (low | high) & (n >= DEGRADED_MIN_N)


def paired_test(xa, ia, xb, ib, delta, alpha, *, cycle: Optional[int] = None,
                skew_se: Optional[float] = SKEW_SE, check: Optional[bool] = None) -> dict:
    """Return the one-sided skew-corrected paired t test of ``rho_a - rho_b > delta``.

    Inputs (..., R), NaN where missing; ``skew_se`` None: Student's bound; ``check`` (default: a
    cycle >= 2) leaves a pair with a degraded repeat unrejected. ``degraded``: its first one, or -1.
    """
    xa, ia, xb, ib = np.broadcast_arrays(*(np.asarray(v, float) for v in (xa, ia, xb, ib)))
    ok = np.isfinite(xa) & np.isfinite(ia) & np.isfinite(xb) & np.isfinite(ib)
    use = complete_cycles(ok, cycle)
    d, psi, n = influence(xa, ia, xb, ib, use)
    alpha = np.asarray(alpha, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        m2 = (psi ** 2).sum(-1) / n
        sd = np.sqrt((psi ** 2).sum(-1) / (n - 1))
        se = sd / np.sqrt(n)
        g = np.where(m2 > 0, (psi ** 3).sum(-1) / n / m2 ** 1.5, 0.0)
        from scipy import stats

        t = stats.t.ppf(1.0 - alpha, np.maximum(n - 1, 1))
        root = np.sqrt(np.maximum(n, 1))
        if skew_se is None:  # Student's
            low = d - t * se
        else:
            low, _ = skew_corrected_bounds(d, se, t, g / root, skewness_se(n) / root, skew_se)
        flat = ~(se > 1e-12 * np.maximum(np.abs(d), 1e-3))
        reject = (n >= 2) & np.isfinite(d) & np.where(flat, d > delta, low > delta)
    if check is None:
        check = bool(cycle and cycle >= 2)
    far = degraded_repeats(psi, use, cycle) if check else np.zeros(use.shape, bool)
    bad = far.any(-1)
    first = np.where(bad, np.argmax(far, -1), -1) if far.shape[-1] else np.full(bad.shape, -1)
    return {"reject": reject & ~bad, "d": d, "se": np.where(n >= 2, se, np.nan), "n": n,
            "degraded": first}


def balanced_test(xa, ia, xb, ib, delta, alpha, cycle: int) -> dict:
    """Return :func:`paired_test` over complete cycles, or with ``cycle`` < 2 Student's t over
    every repeat with no check (the claims' i.i.d.-unit test, :mod:`robench.stats.claims`).
    """
    if not cycle or cycle < 2:
        return paired_test(xa, ia, xb, ib, delta, alpha, cycle=None, skew_se=None, check=False)
    return paired_test(xa, ia, xb, ib, delta, alpha, cycle=cycle)


def shows_above(xa, ia, xb, ib, *, delta: float = 0.0, alpha=ALPHA,
                cycle: Optional[int] = None, looks: int = 1) -> np.ndarray:
    """Return whether the repeats show ``rho_a - rho_b > delta`` at ``alpha / looks``."""
    return paired_test(xa, ia, xb, ib, delta, np.asarray(alpha, float) / looks,
                       cycle=cycle)["reject"]


def compare_all(x, i, *, alpha=ALPHA, precision: Optional[float] = None,
                cycle: Optional[int] = None, looks: int = 1,
                higher_is_better: bool = True) -> dict:
    """Test every pair of a table's models (Holm's step-down, TOST at ``precision``); rank them.

    ``x``, ``i``: shape (..., M, R). Returns ``pairs`` (list of (a, b), a < b), ``status``
    (..., P): +1 a above b (better, per ``higher_is_better``), -1 b above a, 2 equivalent,
    0 undecided; ``degraded`` (..., P): the repeat that kept a pair undecided (-1: none);
    ``better``/``worse`` (..., M): models shown above/below each; ``best`` = 1 + better,
    ``worst`` = M - worse. docs/intervals.md ("Ranks") has the procedure.
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    m = x.shape[-2]
    pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    lead = x.shape[:-2]
    status = np.zeros(lead + (len(pairs),), int)
    degraded = np.full(lead + (len(pairs),), -1)
    if pairs:
        a_idx, b_idx = np.array(pairs).T
        xa, ia, xb, ib = x[..., a_idx, :], i[..., a_idx, :], x[..., b_idx, :], i[..., b_idx, :]
        n_p = len(pairs)
        done = np.zeros(lead + (n_p,), bool)

        def test(u, v, level, delta=0.0):
            return paired_test(*u, *v, delta, np.asarray(level, float) / looks, cycle=cycle)

        first = test((xa, ia), (xb, ib), alpha / n_p / 2)
        degraded = first["degraded"]
        while True:
            level = alpha / np.maximum(n_p - done.sum(-1, keepdims=True), 1)
            up = test((xa, ia), (xb, ib), level / 2)["reject"]
            down = test((xb, ib), (xa, ia), level / 2)["reject"]
            if not higher_is_better:
                up, down = down, up
            new = ~done & (up | down)
            status = np.where(new & up, 1, np.where(new & down, -1, status))
            done |= new
            if not new.any():
                break
        if precision is not None and precision > 0:
            eq_level = alpha / n_p
            e1 = test((xa, ia), (xb, ib), eq_level, -precision)["reject"]
            e2 = test((xb, ib), (xa, ia), eq_level, -precision)["reject"]
            status = np.where((status == 0) & e1 & e2, 2, status)
    better = np.zeros(lead + (m,), int)
    worse = np.zeros(lead + (m,), int)
    for k, (a, b) in enumerate(pairs):
        better[..., b] += status[..., k] == 1
        worse[..., a] += status[..., k] == 1
        better[..., a] += status[..., k] == -1
        worse[..., b] += status[..., k] == -1
    return {"pairs": pairs, "status": status, "degraded": degraded, "better": better,
            "worse": worse, "best": 1 + better, "worst": m - worse}


def rank_text(best: int, worst: int) -> str:
    """Return a rank interval as shown: "1" when decided, "1-2" otherwise."""
    return str(best) if best == worst else f"{best}-{worst}"


def chance_bar(chance: float, margin: float) -> float:
    """Return the accuracy a model must be shown above to be ranked: chance + margin x the rest."""
    return float(chance) + float(margin) * (1.0 - float(chance))


#: Source-effect shapes of the simulations (mean 0, sd 1; negative = a harder source).
SHAPES = ("normal", "gamma2", "exponential", "lognormal", "hard")


def source_effects(rng, runs: int, k: int, shape: str, p_hard: Optional[float] = None):
    """Return (runs, k) source effects of ``shape`` (:data:`SHAPES`; sd 1, mean exactly 0)."""
    if shape == "hard":
        p = 1.0 / k
        s = np.full((runs, k), math.sqrt(p / (1 - p)))
        s[:, 0] = -math.sqrt((1 - p) / p)
        return s
    if shape == "normal":
        s = rng.standard_normal((runs, k))
    elif shape == "gamma2":
        s = -(rng.gamma(2.0, 1.0, (runs, k)) - 2.0) / math.sqrt(2.0)
    elif shape == "exponential":
        s = -(rng.exponential(1.0, (runs, k)) - 1.0)
    elif shape == "lognormal":
        mu, var = math.exp(0.5), (math.e - 1) * math.e
        s = -(np.exp(rng.standard_normal((runs, k))) - mu) / math.sqrt(var)
    else:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return s - s.mean(-1, keepdims=True)


def held_out(rng, runs: int, repeats: int, k: int, design: str):
    """Return (runs, repeats) held-out source indices: i.i.d. uniform (``random``) or a fresh
    permutation of the k sources per cycle of k repeats (``balanced``)."""
    if design == "random":
        return rng.integers(0, k, (runs, repeats))
    if design != "balanced":
        raise ValueError(f"unknown design {design!r}")
    cycles = -(-repeats // k)
    return rng.permuted(np.tile(np.arange(k), (runs, cycles, 1)), axis=-1).reshape(
        runs, cycles * k)[:, :repeats]


def null_pairs(rng, runs: int, repeats: int, *, shape: str, design: str, k: int = 5,
               loadings=(0.02, 0.06), corr: float = 0.87, mean_x: float = 0.7,
               mean_i: float = 0.9, sd_i: float = 0.01):
    """Return (x, i), shape (runs, 2, repeats): two models of equal rho sharing partitions.

    Model m's AccX is ``mean_x + l_m s[src_r] + e_m,r`` (loadings l, own noise e sized so the
    models correlate ``corr`` under the random design); AccI is ``mean_i`` plus a shared (0.8)
    and own normal part of sd ``sd_i``. ``shape="hard"`` uses ``k`` as 1/p.
    """
    la, lb = loadings
    # corr = la lb / sqrt((la^2 + s2)(lb^2 + s2)): solve the quadratic for the noise variance
    q = la * la * lb * lb / corr ** 2
    bq = la * la + lb * lb
    s2 = (-bq + math.sqrt(bq * bq - 4 * (la * la * lb * lb - q))) / 2
    eff = source_effects(rng, runs, k, shape)
    src = held_out(rng, runs, repeats, k, design)
    s = np.take_along_axis(eff, src, -1)[:, None, :]
    load = np.array([la, lb])[None, :, None]
    x = mean_x + load * s + math.sqrt(s2) * rng.standard_normal((runs, 2, repeats))
    z = rng.standard_normal((runs, 1, repeats))
    i = mean_i + sd_i * (math.sqrt(0.8) * z + math.sqrt(0.2) * rng.standard_normal(
        (runs, 2, repeats)))
    return x, i
