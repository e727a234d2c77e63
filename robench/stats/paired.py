"""One paired test for every comparison of models, and the rank intervals it gives.

Models of a table share repeat r's partitions (its held-out sources, its inclusive split, its
seeds), so they are compared by the per-repeat differences of their scores. A score is a
ratio of per-repeat means, ``rho = E[X] / E[I]`` (a plain mean has I = 1). Everything that
orders models -- the ranks of every table (:mod:`robench.stats.ranks`), ``robench run --until
decided`` (:mod:`robench.stats.sequential`, :mod:`robench.run.adaptive`) -- calls
:func:`shows_above`: "do the repeats show ``rho_a - rho_b > delta``?", one-sided, at a level.

Which test depends on the design of the repeats, because the shape of the per-repeat
differences does (docs/intervals.md has the simulations):

* **Balanced held-out design** (source-aware protocol 2, ``cycle`` = k): within each cycle of
  k repeats every source of a class is held out exactly once. Over complete cycles the
  held-out sources are a census, not a sample, so the part of each repeat's difference that
  comes from *which* source was held out (the rare hard source that made the random design's
  differences a two-point mixture) sums to the same value in every cycle and drops out of
  the mean; it stays in the sample variance, which it can only inflate. The test is Student's
  one-sided t on the delta-method differences over the repeats of the *complete* cycles both
  models have (repeats of an incomplete last cycle are left out of the test: their held-out
  sources are a sample again). With normal residual noise the statistic is then stochastically
  smaller than Student's t (the projected noise plus a fixed census part is a non-central
  chi-square, which dominates the central one), so its level holds whatever the shape of the
  source effects. Fewer than 2 complete cycles' repeats: no test (nothing is decided; at 3
  repeats with 5 sources nothing can be).
* **Any other design** (held-out sources drawn at random, protocol 1's stored trials, or
  repeats without sources): a betting test (Waudby-Smith & Ramdas, "Estimating means of
  bounded random variables by betting", JRSS-B 2024). Accuracies lie in [0, 1], so the
  wealth ``K(c) = prod_r (1 + lambda_r D_r(c))`` of a predictable bet against the
  hypothesis is a non-negative supermartingale under it and, by Ville's inequality, exceeds
  ``1/alpha`` with probability at most alpha at *any* repeat: valid on every shape (mixtures
  included) and at every look. For a ratio, ``rho_a - rho_b <= delta`` implies
  ``E[D_r(c)] <= 0`` at ``c = rho_b`` for ``D_r(c) = X_a - X_b - c (I_a - I_b) - delta I_a``;
  c is bounded by a betting confidence sequence of rho_b (alpha/2) and the wealth, concave
  in c on the log scale for a c-free bet, is checked at the two ends of it (alpha/2). It is
  conservative: it never decides at a handful of repeats.

Everything here is a pure function of numbers, vectorised over leading axes (simulated runs).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

#: Familywise error rate of a table's calls (orders and equivalences).
ALPHA = 0.05
#: Largest rho the betting test bounds its nuisance with (an exclusive accuracy 1.5x the
#: inclusive one); a model whose rho may lie above it is not ordered by that test.
C_MAX = 1.5
#: The share of a bet's largest safe size it stakes (Waudby-Smith & Ramdas truncate at 1/2).
_TRUNCATE = 0.5

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


def _one_sided_t(level):
    from scipy import stats

    return lambda df: stats.t.ppf(level, df)


def balanced_test(xa, ia, xb, ib, delta, alpha, cycle: int) -> dict:
    """Return Student's one-sided test of ``rho_a - rho_b > delta`` over complete cycles.

    The delta-method differences ``psi_r`` (:func:`robench.stats.sequential.
    paired_difference`) over the repeats of complete cycles both models have: rejected when
    ``d - delta > t_{1 - alpha}(n - 1) sd(psi) / sqrt(n)``; where the differences have no
    spread, when ``d > delta``. Returns ``reject``, ``d``, ``se``, ``n``.
    """
    from scipy import stats

    xa, ia, xb, ib = (np.asarray(v, float) for v in (xa, ia, xb, ib))
    ok = np.isfinite(xa) & np.isfinite(ia) & np.isfinite(xb) & np.isfinite(ib)
    use = complete_cycles(ok, cycle)
    n = use.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        def mean(v):
            return np.where(use, v, 0.0).sum(-1) / n

        mxa, mia, mxb, mib = mean(xa), mean(ia), mean(xb), mean(ib)
        ra, rb = mxa / mia, mxb / mib
        psi = ((xa - ra[..., None] * ia) / mia[..., None]
               - (xb - rb[..., None] * ib) / mib[..., None])
        psi = np.where(use, psi, 0.0)
        sd = np.sqrt((psi ** 2).sum(-1) / (n - 1))
        se = sd / np.sqrt(n)
        d = ra - rb
        t = stats.t.ppf(1.0 - np.asarray(alpha, float), np.maximum(n - 1, 1))
        flat = ~(se > 1e-12 * np.maximum(np.abs(d), 1e-3))
        reject = (n >= 2) & np.isfinite(d) & np.where(flat, d > delta, d - delta > t * se)
    return {"reject": reject, "d": d, "se": np.where(n >= 2, se, np.nan), "n": n}


def _bets(values, ok, cap):
    """Return predictable bets lambda_r in [0, cap] (aGRAPA) from the values before r.

    lambda_r = m / (v + m^2) of the mean m and variance v of the earlier values (with a
    prior pseudo-observation of variance 1/4), clipped to [0, cap]: the Kelly-optimal bet of
    a Gaussian approximation, the "approximate GRAPA" of Waudby-Smith & Ramdas.
    """
    v = np.where(ok, values, 0.0)
    count = np.cumsum(ok, -1) - ok  # earlier values only: the bet is predictable
    s1 = np.cumsum(v, -1) - v
    s2 = np.cumsum(v * v, -1) - v * v
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(count > 0, s1 / np.maximum(count, 1), 0.0)
        var = (s2 - count * m * m + 0.25) / (count + 1)
        lam = m / (var + m * m)
    return np.clip(np.where(count > 0, lam, 0.0), 0.0, cap)


def _prpl_bets(values, ok, cap, alpha):
    """Return the predictable plug-in bets of a confidence sequence (Waudby-Smith & Ramdas):
    ``lambda_r = sqrt(2 log(1/alpha) / (v r log(1 + r)))`` with v the variance of the values
    before r (prior 1/4), clipped to [0, cap]; they do not depend on the hypothesised value,
    so the wealth is monotone in it."""
    v = np.where(ok, values, 0.0)
    count = np.cumsum(ok, -1) - ok
    s1 = np.cumsum(v, -1) - v
    s2 = np.cumsum(v * v, -1) - v * v
    t = count + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(count > 0, s1 / np.maximum(count, 1), 0.0)
        var = (s2 - count * m * m + 0.25) / t
        lam = np.sqrt(2 * np.log(1.0 / np.asarray(alpha, float)) / (var * t * np.log1p(t)))
    return np.clip(lam, 0.0, cap)


def _log_wealth(d, lam, ok):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, np.log1p(lam * d), 0.0).sum(-1)


def _running_ratio(x, i, ok):
    """Return the ratio of the means of x and i over the repeats before r (1 before any)."""
    cx = np.cumsum(np.where(ok, x, 0.0), -1) - np.where(ok, x, 0.0)
    ci = np.cumsum(np.where(ok, i, 0.0), -1) - np.where(ok, i, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ci > 0, np.clip(cx / ci, 0.0, C_MAX), 1.0)


def ratio_cs(x, i, alpha, ok=None) -> tuple:
    """Return the betting confidence sequence (low, high) of ``E[x] / E[i]`` in [0, C_MAX].

    Two one-sided betting tests at ``alpha / 2`` each, inverted by bisection (the wealth of a
    c-free bet is monotone in c): ``low`` the largest c where "ratio <= c" is rejected (0 if
    none), ``high`` the smallest c where "ratio >= c" is (NaN if not even C_MAX is: the
    ratio is not bounded below C_MAX). Valid at every repeat at once (Ville's inequality).
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    if ok is None:
        ok = np.isfinite(x) & np.isfinite(i)
    x, i = np.where(ok, x, 0.0), np.where(ok, i, 0.0)
    alpha = np.asarray(alpha, float)
    thr = np.log(2.0 / alpha)
    c_hat = _running_ratio(x, i, ok)[..., None]
    plug = x - c_hat[..., 0] * i
    a_side = alpha[..., None] / 2 if alpha.ndim else alpha / 2
    lam_lo = _prpl_bets(plug, ok, _TRUNCATE / C_MAX, a_side)  # X - cI >= -c >= -C_MAX
    lam_hi = _prpl_bets(-plug, ok, _TRUNCATE, a_side)         # cI - X >= -1

    def bisect(reject, increasing):
        lo = np.zeros(x.shape[:-1])
        hi = np.full(x.shape[:-1], C_MAX)
        for _ in range(30):
            mid = (lo + hi) / 2
            r = reject(mid)
            if increasing:  # rejected above the bound: move hi down where mid is rejected
                hi, lo = np.where(r, mid, hi), np.where(r, lo, mid)
            else:
                lo, hi = np.where(r, mid, lo), np.where(r, hi, mid)
        return lo, hi

    def rej_low(c):
        return _log_wealth(x - c[..., None] * i, lam_lo, ok) >= thr

    def rej_high(c):
        return _log_wealth(c[..., None] * i - x, lam_hi, ok) >= thr

    low, _ = bisect(rej_low, increasing=False)
    low = np.where(rej_low(np.zeros(x.shape[:-1])), low, 0.0)
    _, high = bisect(rej_high, increasing=True)
    high = np.where(rej_high(np.full(x.shape[:-1], C_MAX)), high, np.nan)
    return low, high


def betting_test(xa, ia, xb, ib, delta, alpha) -> dict:
    """Return the betting test of ``rho_a - rho_b > delta`` (valid at any repeat, any shape).

    Returns ``reject``, ``d`` (the difference of the two ratios of means over the common
    repeats), ``n``. A mean (I = 1 for both models) needs no nuisance: the whole alpha goes
    to the bet on ``D_r = X_a - X_b - delta``.
    """
    xa, ia, xb, ib = (np.asarray(v, float) for v in (xa, ia, xb, ib))
    xa, ia, xb, ib = np.broadcast_arrays(xa, ia, xb, ib)
    ok = np.isfinite(xa) & np.isfinite(ia) & np.isfinite(xb) & np.isfinite(ib)
    n = ok.sum(-1)
    z = lambda v: np.where(ok, v, 0.0)  # noqa: E731
    xa, ia, xb, ib = z(xa), z(ia), z(xb), z(ib)
    alpha = np.asarray(alpha, float)
    delta = float(delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = xa.sum(-1) / ia.sum(-1) - xb.sum(-1) / ib.sum(-1)
    mean_only = bool(np.all(~ok | ((ia == 1.0) & (ib == 1.0))))
    if mean_only:
        dd = xa - xb - delta
        lam = _bets(dd, ok, _TRUNCATE / (1.0 + max(delta, 0.0)))
        reject = _log_wealth(dd, lam, ok) >= np.log(1.0 / alpha)
        return {"reject": reject & (n >= 1), "d": d, "n": n}
    low, high = ratio_cs(xb, ib, alpha / 2, ok)
    cap = _TRUNCATE / (1.0 + C_MAX + max(delta, 0.0))
    c_hat = _running_ratio(xb, ib, ok)
    plug = xa - xb - c_hat * (ia - ib) - delta * ia
    lam = _bets(plug, ok, cap)
    thr = np.log(2.0 / alpha)
    ends = [np.where(np.isfinite(c), c, C_MAX) for c in (low, high)]
    reject = np.isfinite(high)
    for c in ends:
        dc = xa - xb - c[..., None] * (ia - ib) - delta * ia
        reject = reject & (_log_wealth(dc, lam, ok) >= thr)
    return {"reject": reject & (n >= 1), "d": d, "n": n}


def shows_above(xa, ia, xb, ib, *, delta: float = 0.0, alpha=ALPHA,
                cycle: Optional[int] = None, looks: int = 1) -> np.ndarray:
    """Return whether the repeats show ``rho_a - rho_b > delta`` at level ``alpha``.

    THE paired test (module docstring): inputs of shape (..., R), per repeat index the
    numerator and denominator of each model's ratio of means (a mean: denominator 1), NaN
    where a repeat is missing. ``cycle``: the balanced design's cycle length (Student's t
    over complete cycles, at ``alpha / looks`` for a sequential rule's ``looks`` planned
    looks: Bonferroni); None: the betting test, valid at every look as it is.
    """
    if cycle and cycle >= 2:
        return balanced_test(xa, ia, xb, ib, delta, np.asarray(alpha, float) / looks,
                             int(cycle))["reject"]
    return betting_test(xa, ia, xb, ib, delta, alpha)["reject"]


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
    are shown (two one-sided tests, each at ``alpha / P``: Bonferroni over the pairs), else
    undecided.

    Returns ``pairs`` (list of (a, b)), ``status`` (..., P): +1 a above b (better: higher
    rho, or lower where not ``higher_is_better``), -1 b above a, 2 equivalent, 0 undecided; ``better`` (..., M): how many models are shown above each,
    ``worse``: how many below; ``best`` = 1 + better, ``worst`` = M - worse.
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    m = x.shape[-2]
    pairs = _pairs(m)
    lead = x.shape[:-2]
    status = np.zeros(lead + (len(pairs),), int)
    if pairs:
        a_idx = np.array([a for a, _ in pairs])
        b_idx = np.array([b for _, b in pairs])
        xa, ia, xb, ib = x[..., a_idx, :], i[..., a_idx, :], x[..., b_idx, :], i[..., b_idx, :]
        n_p = len(pairs)
        done = np.zeros(lead + (n_p,), bool)
        while True:
            level = alpha / np.maximum(n_p - done.sum(-1, keepdims=True), 1)
            up = shows_above(xa, ia, xb, ib, alpha=level / 2, cycle=cycle, looks=looks)
            down = shows_above(xb, ib, xa, ia, alpha=level / 2, cycle=cycle, looks=looks)
            if not higher_is_better:
                up, down = down, up
            new = ~done & (up | down)
            status = np.where(new & up, 1, np.where(new & down, -1, status))
            done |= new
            if not new.any():
                break
        if precision is not None and precision > 0:
            eq_level = alpha / n_p
            e1 = shows_above(xa, ia, xb, ib, delta=-precision, alpha=eq_level, cycle=cycle,
                             looks=looks)
            e2 = shows_above(xb, ib, xa, ia, delta=-precision, alpha=eq_level, cycle=cycle,
                             looks=looks)
            status = np.where((status == 0) & e1 & e2, 2, status)
    better = np.zeros(lead + (m,), int)
    worse = np.zeros(lead + (m,), int)
    for k, (a, b) in enumerate(pairs):
        better[..., b] += status[..., k] == 1
        worse[..., a] += status[..., k] == 1
        better[..., a] += status[..., k] == -1
        worse[..., b] += status[..., k] == -1
    return {"pairs": pairs, "status": status, "better": better, "worse": worse,
            "best": 1 + better, "worst": m - worse}


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
