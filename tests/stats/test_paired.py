"""The one paired test (robench.stats.paired): by hand on small inputs, then its error rate
on null pairs of the shapes the design produces and the shapes training noise takes, and its
power.

Source shapes (robench.stats.paired.null_pairs): two models of equal rho share every
repeat's partitions; the held-out source's effect hits them with loadings 0.02 and 0.06, the
source effects are normal, Gamma(2), exponential, log-normal or one source of 1/p much harder
(the two-point mixture). Training-noise shapes (benchmarks/simulations.py's residual_tables): the
paired difference carries a census part (share 0, 0.2, 0.5 of its variance) and one model's
training noise, Gamma(2), log-normal or a degraded run in 5/10/20% of repeats. Every call of
an order on a null pair is wrong; the bound is alpha plus two Monte Carlo standard errors.
Vectorised numpy, 2,000-4,000 pairs a setting.
"""

import math
import zlib

import numpy as np
import pytest
from scipy import stats

from robench.stats import paired
from tests.helpers import load_benchmark

simulations = load_benchmark("simulations")

ALPHA = 0.05
CASES = [("normal", 5), ("gamma2", 5), ("exponential", 5), ("lognormal", 5),
         ("hard", 20), ("hard", 10), ("hard", 5)]  # hard: p = 1/k = 0.05, 0.1, 0.2


def bound(runs, alpha=ALPHA):
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)


# --- by hand ---------------------------------------------------------------------------------


def test_complete_cycles_keep_only_cycles_every_repeat_of_which_is_there():
    ok = np.array([True] * 5 + [True, False, True, True, True] + [True] * 3)
    assert paired.complete_cycles(ok, 5).tolist() == [True] * 5 + [False] * 8
    assert paired.complete_cycles(ok, None).tolist() == ok.tolist()
    assert not paired.complete_cycles(np.ones(3, bool), 5).any()  # 3 repeats of a 5-cycle


def test_students_bound_over_complete_cycles_is_scipys_t_test():
    """A mean (denominators 1), Student's bound asked for (``skew_se=None``, no check): the
    paired one-sided t-test of scipy over the first two cycles of 4; the 9th repeat (an
    incomplete third cycle) is left out."""
    rng = np.random.default_rng(0)
    xa = 0.8 + 0.02 * rng.standard_normal(9)
    xb = xa - 0.01 + 0.01 * rng.standard_normal(9)
    one = np.ones(9)
    p = stats.ttest_rel(xa[:8], xb[:8], alternative="greater").pvalue
    assert 0 < p < 0.5
    for alpha in (p * 0.99, p * 1.01):
        got = paired.paired_test(xa, one, xb, one, 0.0, alpha, cycle=4, skew_se=None,
                                 check=False)
        assert got["n"] == 8 and bool(got["reject"]) == (alpha > p)
    # a margin shifts the hypothesis: rho_a - rho_b > delta is the t-test of xa - xb - delta
    p2 = stats.ttest_rel(xa[:8] - 0.005, xb[:8], alternative="greater").pvalue
    kw = dict(cycle=4, skew_se=None, check=False)
    assert bool(paired.paired_test(xa, one, xb, one, 0.005, p2 * 1.01, **kw)["reject"])
    assert not bool(paired.paired_test(xa, one, xb, one, 0.005, p2 * 0.99, **kw)["reject"])


def test_the_skew_corrected_bound_by_hand():
    """Hall's lower bound: d - se q(t, u), q(t, u) = (3/u)((1 + u (t - u/6))^(1/3) - 1), u =
    (g - se(g)) / sqrt(n), g the sample skewness m3 / m2^1.5 of the differences."""
    d = np.array([0.02, 0.03, 0.01, 0.04, 0.02, -0.05, 0.03, 0.02, 0.01, 0.03])
    one = np.ones_like(d)
    n = d.size
    m = d.mean()
    c = d - m
    g = (c ** 3).mean() / (c ** 2).mean() ** 1.5
    se = d.std(ddof=1) / math.sqrt(n)
    se_g = math.sqrt(6 * (n - 2) / ((n + 1) * (n + 3)))
    u = (g - se_g) / math.sqrt(n)
    for alpha in (0.01, 0.025, 0.1):
        t = stats.t.ppf(1 - alpha, n - 1)
        low = m - se * (3 / u) * (np.cbrt(1 + u * (t - u / 6)) - 1)
        for delta in (low - 1e-6, low + 1e-6):
            got = paired.paired_test(d, one, np.zeros(n), one, delta, alpha)
            assert bool(got["reject"]) == (low > delta)
        assert low < m - t * se  # left-skewed differences: further down than Student's


def test_a_degraded_repeat_is_flagged_and_a_hard_source_each_cycle_is_not():
    rng = np.random.default_rng(11)
    psi = 0.01 * rng.standard_normal(15)
    use = np.ones(15, bool)
    assert not paired.degraded_repeats(psi, use, 5).any()
    bad = psi.copy()
    bad[7] -= 0.1  # one run 10 sd down
    assert paired.degraded_repeats(bad, use, 5).tolist() == [r == 7 for r in range(15)]
    census = psi.copy()
    census[[2, 6, 13]] -= 0.1  # one hard source, held out once in each of the 3 cycles
    assert not paired.degraded_repeats(census, use, 5).any()
    assert paired.degraded_repeats(census, use, None).sum() == 3  # independent: flagged
    assert not paired.degraded_repeats(bad[:5], use[:5], 5).any()  # too few repeats to see
    # the pair is not ordered, and says which repeat
    xa, xb = 0.8 + bad + 0.05, np.full(15, 0.8)
    one = np.ones(15)
    got = paired.paired_test(xa, one, xb, one, 0.0, 0.025, cycle=5)
    assert not got["reject"] and int(got["degraded"]) == 7
    assert paired.paired_test(xa + 0.1 * (np.arange(15) == 7), one, xb, one, 0.0, 0.025,
                              cycle=5)["reject"]


def test_holm_over_all_pairs_steps_down():
    """Three models, balanced design, 10 repeats: a far above b and c (shown at the first
    step, alpha/3), b and c one hair apart (not shown); ranks 1, 2-3, 2-3."""
    rng = np.random.default_rng(2)
    z = 0.05 * rng.standard_normal(10)
    x = np.stack([0.9 + z, 0.8 + z + 0.002 * rng.standard_normal(10),
                  0.8 + z + 0.002 * rng.standard_normal(10)])
    i = np.full_like(x, 0.95)
    res = paired.compare_all(x, i, cycle=5)
    assert res["pairs"] == [(0, 1), (0, 2), (1, 2)]
    assert res["status"].tolist() == [1, 1, 0]
    assert [paired.rank_text(b, w) for b, w in zip(res["best"], res["worst"])] == [
        "1", "2-3", "2-3"]
    eq = paired.compare_all(x, i, cycle=5, precision=0.01)  # within 0.01: shown equivalent
    assert eq["status"].tolist() == [1, 1, 2]
    low = paired.compare_all(x, i, cycle=5, higher_is_better=False)
    assert low["status"].tolist() == [-1, -1, 0] and low["best"].tolist() == [3, 1, 1]


def test_chance_bar_and_looks_for_cycles():
    from robench.stats.sequential import looks_for

    assert paired.chance_bar(0.1, 0.1) == pytest.approx(0.19)
    assert paired.chance_bar(0.5, 0.0) == 0.5
    assert looks_for(100, 6, 5) == [10, 20, 40, 100]
    assert looks_for(100, 6, 3) == [6, 12, 24, 48, 100]
    assert looks_for(8, 6, 5) == [8] and looks_for(24, 6, None) == [6, 12, 24]


def test_the_balanced_design_holds_every_source_out_once_a_cycle():
    rng = np.random.default_rng(3)
    src = paired.held_out(rng, 4, 12, 5, "balanced")
    for run in src:
        assert sorted(run[:5]) == list(range(5)) and sorted(run[5:10]) == list(range(5))
    assert len({tuple(run[:5]) for run in src}) > 1  # a fresh order per run and cycle


# --- error rates of null pairs, fixed repeats -------------------------------------------------


#: Random-design (independent) cases the test holds: the continuous source shapes at every
#: size, a hard source of p = 0.2 from 32 repeats, p = 0.1 at 100 (absent from 0.9^100 of
#: the samples).
RANDOM_HELD = [(shape, 5, (8, 32, 100)) for shape in ("normal", "gamma2", "exponential",
                                                      "lognormal")] + [
    ("hard", 5, (32, 100)), ("hard", 10, (100,))]


@pytest.mark.parametrize("shape,k", CASES)
def test_balanced_null_pairs_keep_the_level_at_every_size(shape, k):
    """No order is called on more than alpha (+2 MC SE) of null pairs at 3, 8, 32 and 100
    repeats of the balanced design; 0 at 3 (no complete cycle)."""
    rng = np.random.default_rng(zlib.crc32(repr(("balanced", shape, k)).encode()))
    for repeats in (3, 8, 32, 100):
        runs = 3000
        x, i = paired.null_pairs(rng, runs, repeats, shape=shape, design="balanced", k=k)
        res = paired.compare_all(x, i, cycle=k)
        wrong = float((np.abs(res["status"]) == 1).mean())
        assert wrong <= bound(runs), (repeats, wrong)
        if repeats < k:
            assert wrong == 0.0  # no complete cycle: nothing is decided


@pytest.mark.parametrize("shape,k,sizes", RANDOM_HELD)
def test_random_design_null_pairs_keep_the_level_where_it_can(shape, k, sizes):
    rng = np.random.default_rng(zlib.crc32(repr(("random", shape, k)).encode()))
    for repeats in sizes:
        runs = 3000
        x, i = paired.null_pairs(rng, runs, repeats, shape=shape, design="random", k=k)
        res = paired.compare_all(x, i)
        wrong = float((np.abs(res["status"]) == 1).mean())
        assert wrong <= bound(runs), (repeats, wrong)


def test_a_rare_hard_source_drawn_at_random_cannot_be_held_at_few_repeats():
    """The limit docs/intervals.md states: p = 0.1 at 10 repeats, the hard source is absent
    from 0.9^10 = 35% of the samples, which then look like a real gap (seen ~16-18%). This
    is why the source-aware protocol holds sources out in rotation."""
    rng = np.random.default_rng(12)
    x, i = paired.null_pairs(rng, 3000, 10, shape="hard", design="random", k=10)
    wrong = float((np.abs(paired.compare_all(x, i)["status"]) == 1).mean())
    assert wrong > bound(3000)


# --- training noise (issue 49 point 1) --------------------------------------------------------

#: Settings no rule can hold: census 0 with a tail the sample often lacks (log-normal, a
#: degraded run in 5 or 10% of repeats) at 20 repeats or fewer.
UNHOLDABLE = {(0.0, noise) for noise in ("lognormal", "degraded5", "degraded10")}


def student(x, i, alpha=ALPHA, cycle=5):
    """The rule of 4e263f3: Student's t over complete cycles, both sides, no check."""
    kw = dict(cycle=cycle, skew_se=None, check=False)
    up = paired.paired_test(x[:, 0], i[:, 0], x[:, 1], i[:, 1], 0.0, alpha / 2, **kw)
    down = paired.paired_test(x[:, 1], i[:, 1], x[:, 0], i[:, 0], 0.0, alpha / 2, **kw)
    return up["reject"] | down["reject"]


@pytest.mark.parametrize("census", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("noise", simulations.NOISES)
def test_null_pairs_keep_the_level_on_training_noise(census, noise):
    """Balanced design (k = 5), n = 10, 15, 20, 40: at most alpha (+2 MC SE) wrong orders.
    Seen: at most ~3.5% except census 0; there 2.5-4.2% on normal and Gamma(2) noise, and
    on the unholdable settings 5.2-6.0% with a repeat flagged in 14-30% of the pairs
    (Student's t: 7-11%). Student's t, the rule of 4e263f3, errs at 6.9-11% on census 0
    Gamma(2), log-normal and degraded noise."""
    runs = 4000
    rng = np.random.default_rng(zlib.crc32(repr(("noise", census, noise)).encode()))
    for n in (10, 15, 20, 40):
        x, i = simulations.residual_tables(rng, runs, n, noise=noise, census=census)
        res = paired.compare_all(x, i, cycle=5)
        wrong = float((np.abs(res["status"]) == 1).mean())
        if (census, noise) in UNHOLDABLE and n <= 20:
            old = float(student(x, i).mean())
            flagged = float((res["degraded"] >= 0).mean())
            assert wrong < old and flagged > 0.1, (n, wrong, old, flagged)
        else:
            assert wrong <= bound(runs), (n, wrong)


@pytest.mark.parametrize("census", [0.0, 0.2])
@pytest.mark.parametrize("noise", simulations.NOISES)
def test_five_model_tables_keep_the_familywise_level_on_training_noise(noise, census):
    """Five models of equal rho, one training unstably, census share 0 or 0.2 of its pairs:
    the share of tables with any order called stays under alpha (+2 MC SE) at 10-40 repeats
    (seen at most 4.3%, census 0: Holm's first steps at 0.5% a pair leave the skew less
    room than a lone pair's 2.5%)."""
    runs = 2000
    rng = np.random.default_rng(zlib.crc32(repr(("tables", noise, census)).encode()))
    for n in (10, 20, 40):
        x, i = simulations.residual_tables(rng, runs, n, noise=noise, census=census,
                                      gaps=[0.0] * 5)
        res = paired.compare_all(x, i, cycle=5)
        wrong = float((np.abs(res["status"]) == 1).any(-1).mean())
        assert wrong <= bound(runs), (n, wrong)


@pytest.mark.parametrize("n,least", [(15, 0.6), (20, 0.8), (40, 0.97)])
def test_power_against_students_t_on_the_same_repeats(n, least):
    """A gap of 0.8 sd of the paired difference, census share 0.2, normal noise: the rule
    orders it in at least ``least`` of pairs and loses at most 17 points to Student's t on
    the same repeats: the price of the skew allowance and the degraded-run check on data
    that needed neither."""
    runs = 4000
    rng = np.random.default_rng(n)
    x, i = simulations.residual_tables(rng, runs, n, noise="normal", census=0.2, gaps=[0.8, 0.0])
    res = paired.compare_all(x, i, cycle=5)
    power = float((res["status"][:, 0] == 1).mean())
    old = float(student(x, i).mean())
    assert power >= least and old - power <= 0.17, (power, old)


# --- independent repeats (issue 49 point 2) ---------------------------------------------------


def _beta(mean, sd):
    k = mean * (1 - mean) / sd ** 2 - 1
    return mean * k, (1 - mean) * k


def metric_shape(rng, shape, size):
    """Per-repeat values of one model around its mean (0): purity-ratio's and coverage's
    shapes. normal (sd 0.04); skewed: Beta with skewness -1.3 (sd 0.08, a few repeats far
    below the rest); merge p: normal sd 0.02, and 0.1 lower in p of the repeats (a k-means
    run that merged two classes)."""
    if shape == "normal":
        return 0.04 * rng.standard_normal(size)
    if shape == "skewed":
        return rng.beta(*_beta(0.9, 0.08), size) - 0.9
    p = int(shape[len("merge"):]) / 100
    return -0.1 * ((rng.random(size) < p) - p) + 0.02 * rng.standard_normal(size)


METRIC_SHAPES = ("normal", "skewed", "merge20", "merge10", "merge5")


@pytest.mark.parametrize("shape", METRIC_SHAPES)
def test_independent_repeats_keep_the_level_and_order_a_gap_of_08_sd(shape):
    """Model a's values of the shape, model b's normal (half the sd), equal means: at most
    alpha (+2 MC SE) wrong orders at 5-40 repeats; a gap of 0.8 sd of the paired difference
    ordered in at least half of the pairs at 20 repeats and 90% at 40. The betting test it
    replaces ordered 0% at every size."""
    runs = 4000
    rng = np.random.default_rng(zlib.crc32(shape.encode()))
    for n in (5, 10, 15, 20, 40):
        a = 0.8 + metric_shape(rng, shape, (runs, n))
        b = 0.8 + 0.5 * metric_shape(rng, "normal", (runs, n))
        x, i = np.stack([a, b], 1), np.ones((runs, 2, n))
        res = paired.compare_all(x, i)
        assert float((np.abs(res["status"]) == 1).mean()) <= bound(runs), n
        sd = float(np.std(a - b))
        gap = paired.compare_all(np.stack([a + 0.8 * sd, b], 1), i)
        power = float((gap["status"][:, 0] == 1).mean())
        if n == 20:
            assert power >= 0.5, power
        if n == 40:
            assert power >= 0.9, power


def test_the_balanced_test_needs_its_cycles():
    """The same t-test over every repeat of the random design (no cycles) is not valid on
    the hard-source mixture: the control of the claim above (p = 0.1 at 32 repeats)."""
    rng = np.random.default_rng(4)
    x, i = paired.null_pairs(rng, 4000, 32, shape="hard", design="random", k=10)
    one = paired.balanced_test(x[:, 0], i[:, 0], x[:, 1], i[:, 1], 0.0, ALPHA / 2, 1)
    other = paired.balanced_test(x[:, 1], i[:, 1], x[:, 0], i[:, 0], 0.0, ALPHA / 2, 1)
    assert float((one["reject"] | other["reject"]).mean()) > bound(4000)  # ~7.9%


# --- power where the test is exact ------------------------------------------------------------


@pytest.mark.parametrize("repeats,gap", [(10, 1.0), (30, 0.6), (100, 0.3)])
def test_students_power_is_the_noncentral_t_value(repeats, gap):
    """Normal differences with no source part (equal loadings), means: Student's bound is
    exactly the one-sided t at alpha/2, so its power is the non-central t probability with
    non-centrality gap * sqrt(n) (gap in sd of the per-repeat difference)."""
    rng = np.random.default_rng(repeats)
    runs = 4000
    d = gap + rng.standard_normal((runs, repeats))
    xa, xb = 0.5 + 0.02 * d, np.full((runs, repeats), 0.5)
    one = np.ones_like(xa)
    got = paired.paired_test(xa, one, xb, one, 0.0, ALPHA / 2, cycle=5, skew_se=None,
                             check=False)["reject"]
    t = stats.t.ppf(1 - ALPHA / 2, repeats - 1)
    exact = stats.nct.sf(t, repeats - 1, gap * math.sqrt(repeats))
    assert abs(got.mean() - exact) <= 2 * math.sqrt(exact * (1 - exact) / runs) + 1e-3
