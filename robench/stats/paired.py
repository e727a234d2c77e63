"""One paired test for every comparison of models, and the rank intervals it gives.

Models of a table share repeat r's partitions (its held-out sources, its inclusive split, its
seeds, or its reference model), so they are compared by the per-repeat differences of their
scores. A score is a ratio of per-repeat means, ``rho = E[X] / E[I]`` (a plain mean has I = 1),
linearised per repeat by its influence value (the delta method):
``psi_r = (x_a,r - rho_a i_a,r) / Ibar_a - (x_b,r - rho_b i_b,r) / Ibar_b``. Everything that
orders models -- the ranks of every table (:mod:`robench.stats.ranks`), the sequential rule
(:mod:`robench.stats.sequential`) -- calls :func:`shows_above`: "do the repeats show
``rho_a - rho_b > delta``?", one-sided, at a level. It is :func:`paired_test`:

* **Hall's skew-corrected t** on the mean of psi (P. Hall, "On the removal of skewness by
  transformation", JRSS B 54(1), 1992): the one-sided bound ``d - se q(t, u)`` with Hall's
  inverse transformation q and the mean's skewness ``u = (g - SKEW_SE se(g)) / sqrt(n)`` taken
  one standard error of the sample skewness g towards the tested tail
  (:func:`robench.stats.intervals.skew_corrected_bounds`). Training noise is skewed (a run
  that trains badly is far worse than a run that trains well is good: real random-split
  accuracies skew -1.1 to -1.9 over 15 repeats), and a left-skewed difference whose tail a
  few repeats have not sampled looks like a better model: Student's t then errs one-sided at
  5.6% (Gamma(2)) to 10.5% (log-normal) instead of 2.5% (tests/stats/test_paired.py has the
  shapes). The allowance ``SKEW_SE`` = 1 standard error is what the sample cannot rule out.
* **Balanced held-out design** (source-aware protocol 2, ``cycle`` = k): the test uses the
  repeats of the *complete* cycles both models have. Over complete cycles every source of a
  class is held out once, so the part of psi that comes from *which* source was held out (the
  census part) sums to the same value in every cycle: it leaves the mean but stays in the
  sample variance, where it can only make the test conservative. It is *not* removed from the
  standard error: fixing the order of the sources across cycles (so that a position is a
  stratum) would freeze which sources are held out *together* into the positions, an
  interaction the strata cannot see (measured: 10-15% of the census variance of a paired
  difference on digits); cycle means leave c - 1 degrees of freedom (2 at 15 repeats of 5
  sources); a per-class decomposition under the fresh orders is valid but would order 0-1 more
  of a table's 10 pairs at 15 repeats on the standard database, and is not built. The census part is
  also what keeps the level on skewed training noise at real census shares (0.2 and up):
  docs/intervals.md has the argument and the
  figures. Fewer than 2 complete cycles' repeats: no test.
* **Degraded runs are detected, not averaged** (:func:`degraded_repeats`). A run that fails
  in 5% of repeats is often absent from 10-20 repeats, and then no interval can hold: the
  sample is the sample of a better model. Where such a run *is* in the sample it is visible: a
  value of psi more than ``DEGRADED_Z`` robust standard deviations (1.4826 MAD) from the
  median. In the balanced design, far values of one side that recur (at least half as far) in
  every complete cycle are a hard source held out once per cycle (the census), not a failure,
  and are left alone.
  A pair with a flagged repeat is not ordered: its verdict says which repeat looks degraded.
* **Independent repeats** (purity-ratio's and coverage's reference models, rho's random
  held-out design of protocol 1): the same skew-corrected t over every repeat both models
  have, without the degraded-run check (a k-means run that merges two classes is part of
  purity-ratio, not a failed run). It replaces the betting test of Waudby-Smith & Ramdas,
  which as capped here ordered 0% of pairs at any affordable number of repeats. Its level is
  pinned on those metrics' shapes (skewed, a merge mixture, the random design's continuous
  source shapes); a rare hard source drawn at random (probability p per repeat) is absent
  from (1 - p)^n of the samples and cannot be held below n = log(alpha / 2) / log(1 - p)
  repeats (35 at p = 0.1): that is why protocol 2 holds sources out in rotation.

Everything here is a pure function of numbers, vectorised over leading axes (simulated runs).
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
    """Return the repeats (mask over the last axis) that lie in complete cycles of ``ok``.

    Repeat r is in cycle ``r // cycle``; a cycle is complete when every one of its repeats is
    in ``ok``. Without a cycle (None or < 2) every ``ok`` repeat counts.
    """
    ok = np.asarray(ok, bool)
    if not cycle or cycle < 2:
        return ok
    r = ok.shape[-1]
    full = -(-r // cycle) * cycle
    padded = np.zeros(ok.shape[:-1] + (full,), bool)
    padded[..., :r] = ok
    blocks = padded.reshape(ok.shape[:-1] + (full // cycle, cycle))
    done = blocks.all(-1, keepdims=True)
    return np.broadcast_to(done, blocks.shape).reshape(padded.shape)[..., :r] & ok


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
    """Return the repeats (mask like ``use``) whose paired difference looks degraded.

    A repeat is far when its psi lies more than ``z`` robust standard deviations from the
    median of the repeats ``use`` (scale: 1.4826 MAD; where that is 0, as with discrete
    accuracies, 1.2533 times the mean absolute deviation, so a handful of differing values
    is not flagged for want of a spread). With a ``cycle`` (the
    balanced design), far values of one side are the census (a hard source held out once a
    cycle) and are not flagged when every complete cycle holds a value at least half as far
    on that side. Nothing is flagged
    below :data:`DEGRADED_MIN_N` repeats.
    """
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
        r = psi.shape[-1]
        full = -(-r // cycle) * cycle
        cycles_done = complete_cycles(use, cycle)

        def every_cycle(mask):
            pad = np.zeros(mask.shape[:-1] + (full,), bool)
            pad[..., :r] = mask & cycles_done
            per = pad.reshape(mask.shape[:-1] + (full // cycle, cycle)).any(-1)
            done = np.zeros(mask.shape[:-1] + (full,), bool)
            done[..., :r] = cycles_done
            complete = done.reshape(per.shape + (cycle,)).all(-1)
            return (per | ~complete).all(-1, keepdims=True) & complete.any(-1, keepdims=True)

        # the census: every complete cycle holds a value at least half as far on that side
        low = low & ~every_cycle(use & (vals - med < -z / 2 * scale) & (scale > 0))
        high = high & ~every_cycle(use & (vals - med > z / 2 * scale) & (scale > 0))
    return (low | high) & (n >= DEGRADED_MIN_N)


def paired_test(xa, ia, xb, ib, delta, alpha, *, cycle: Optional[int] = None,
                skew_se: Optional[float] = SKEW_SE, check: Optional[bool] = None) -> dict:
    """Return the one-sided skew-corrected paired t test of ``rho_a - rho_b > delta``.

    Inputs of shape (..., R), NaN where a repeat is missing. The repeats: those both models
    have, in complete cycles of ``cycle`` (the balanced design) where given. Rejected when
    Hall's lower bound at one-sided level alpha (the skewness taken ``skew_se`` standard errors
    towards the lower tail; None: Student's bound) lies above ``delta``; where the differences have no spread, when
    ``d > delta``. ``check`` (default: on with a cycle of 2 or more): the degraded-run check
    (:func:`degraded_repeats`); a pair with a flagged repeat is not rejected. Returns
    ``reject``, ``d``, ``se``, ``n``, ``degraded`` (the first flagged repeat's index, -1
    for none).
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
    """Return :func:`paired_test` over the complete cycles of ``cycle`` (2 or more: skew-
    corrected, degraded-run check), or with ``cycle`` < 2 Student's one-sided t over every
    repeat (no skew allowance, no check): the i.i.d.-unit test of the claims
    (:mod:`robench.stats.claims`), whose controls are calibrated at its power."""
    if not cycle or cycle < 2:
        return paired_test(xa, ia, xb, ib, delta, alpha, cycle=None, skew_se=None, check=False)
    return paired_test(xa, ia, xb, ib, delta, alpha, cycle=cycle)


def shows_above(xa, ia, xb, ib, *, delta: float = 0.0, alpha=ALPHA,
                cycle: Optional[int] = None, looks: int = 1) -> np.ndarray:
    """Return whether the repeats show ``rho_a - rho_b > delta`` at level ``alpha``.

    THE paired test (module docstring, :func:`paired_test`): inputs of shape (..., R), per
    repeat index the numerator and denominator of each model's ratio of means (a mean:
    denominator 1), NaN where a repeat is missing. ``cycle``: the balanced design's cycle
    length (complete cycles, degraded-run check) or None (independent repeats). ``looks``:
    a sequential rule's planned looks, each at ``alpha / looks`` (Bonferroni; the spending
    function of :func:`robench.stats.sequential.look_alphas` gives each look its own
    ``alpha`` instead).
    """
    return paired_test(xa, ia, xb, ib, delta, np.asarray(alpha, float) / looks,
                       cycle=cycle)["reject"]


def _pairs(m: int) -> list:
    return [(a, b) for a in range(m) for b in range(a + 1, m)]


def compare_all(x, i, *, alpha=ALPHA, precision: Optional[float] = None,
                cycle: Optional[int] = None, looks: int = 1,
                higher_is_better: bool = True) -> dict:
    """Test every pair of a table's models; return each pair's call and the rank intervals.

    ``x``, ``i``: shape (..., M, R). For each of the P = M(M-1)/2 pairs (a, b), a < b: the
    two one-sided tests :func:`shows_above` (a over b, b over a, each at half the pair's
    level: a two-sided test), Holm's step-down over the P pairs (S. Holm, Scand. J. Statist.
    6(2), 1979): with j pairs ordered so far every pair still open is tested at
    ``alpha / (P - j)``, until a round orders no new pair. Every order shown is a tested
    one and the probability that any is wrong is at most alpha. A pair not ordered is
    *equivalent* when both ``rho_a - rho_b > -precision`` and ``rho_b - rho_a > -precision``
    are shown (two one-sided tests, TOST, each at ``alpha / P``: Bonferroni over the pairs;
    ``precision`` is the practical-equivalence margin), else undecided. A pair with a repeat
    that looks degraded (:func:`degraded_repeats`, balanced design) is neither ordered nor
    equivalent.

    Returns ``pairs`` (list of (a, b)), ``status`` (..., P): +1 a above b (better: higher
    rho, or lower where not ``higher_is_better``), -1 b above a, 2 equivalent, 0 undecided;
    ``degraded`` (..., P): the repeat index that kept the pair undecided (-1: none);
    ``better`` (..., M): how many models are shown above each, ``worse``: how many below;
    ``best`` = 1 + better, ``worst`` = M - worse.
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    m = x.shape[-2]
    pairs = _pairs(m)
    lead = x.shape[:-2]
    status = np.zeros(lead + (len(pairs),), int)
    degraded = np.full(lead + (len(pairs),), -1)
    if pairs:
        a_idx = np.array([a for a, _ in pairs])
        b_idx = np.array([b for _, b in pairs])
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
    """Return the accuracy a model must be shown above to be ranked: chance + margin of the
    room above it, ``chance + margin * (1 - chance)`` (margin 0.1: a tenth of the way from
    guessing to perfect, i.e. Cohen's kappa against chance above 0.1)."""
    return float(chance) + float(margin) * (1.0 - float(chance))


# --- simulation: null pairs on the shapes the design produces ---------------------------------

#: Source-effect shapes of the simulations (mean 0, sd 1; negative = a harder source).
SHAPES = ("normal", "gamma2", "exponential", "lognormal", "hard")


def source_effects(rng, runs: int, k: int, shape: str, p_hard: Optional[float] = None):
    """Return (runs, k) effects of a data set's k sources, centred so their mean is exactly 0.

    ``shape``: normal; gamma2, exponential, lognormal (left-skewed: a few sources far harder
    than the rest; standardised to sd 1); hard (one source of k = 1/p_hard much harder:
    held out with probability p_hard under the random design, the two-point mixture).
    The estimand averages over a uniformly drawn source, so after centring two models that
    differ only in how strongly the source effect hits them have equal rho.
    """
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

    Model m's exclusive accuracy in repeat r is ``mean_x + l_m s[src_r] + e_m,r``: the held-
    out source's effect s (:func:`source_effects`) hits the models with loadings l_a, l_b, and
    e is the model's own normal noise, its sd set so that the two models' accuracies
    correlate ``corr`` under the random design. Inclusive accuracies: ``mean_i`` plus a shared
    (0.8) and own normal part of sd ``sd_i``. ``shape="hard"`` uses ``k`` as 1/p.
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
