"""The sequential rule: looks, the paired interval of a rho difference, decisions, error rates.

The simulations run the real rule (benchmarks/simulations.py's run_sequential calls table_look,
which the driver calls on real trials, which calls the one paired test of
robench.stats.paired) on null pairs of the shapes the design produces and on a table with
real gaps, and count wrong calls against the known true rho under repeated looks (up to 100
repeats). Vectorised numpy, 2,000-4,000 runs a setting.
"""

import zlib

import numpy as np
import pytest
from scipy import stats

from robench.run.adaptive import SPENDING as RACE_SPENDING
from robench.stats import paired
from robench.stats.sequential import (EQUIVALENT, ORDERED, SPENDING, UNDECIDED, boundaries,
                                      corrected_level, cycle_looks, decide_power, look_alphas,
                                      looks, paired_difference, repeats_for_power, spent,
                                      stop_reason, table_look)
from tests.helpers import load_benchmark

simulations = load_benchmark("simulations")
correlated_accuracies, error_rates = simulations.correlated_accuracies, simulations.error_rates
run_sequential = simulations.run_sequential

ALPHA = 0.05


def bound(runs):  # at most alpha, allowing two Monte Carlo standard errors
    return ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / runs)


# --- looks, level, the interval --------------------------------------------------------------


def test_looks_start_at_six_double_and_end_at_the_maximum():
    assert looks(100) == [6, 12, 24, 48, 100]
    assert looks(24) == [6, 12, 24] and looks(12) == [6, 12] and looks(10) == [6, 10]
    assert looks(8) == [8] and looks(3) == [3] and looks(1) == [1]
    assert looks(100, first=3) == [3, 6, 12, 24, 48, 100]
    with pytest.raises(ValueError):
        looks(0)


def test_spending_functions_by_hand():
    """Lan-DeMets: O'Brien-Fleming-type 2 - 2 Phi(z_{1-a/2} / sqrt(t)), Pocock-type
    a ln(1 + (e - 1) t); both 0 at 0 and alpha at 1."""
    from math import e, log, sqrt

    for kind in ("obf", "pocock"):
        assert spent(0.0, 0.025, kind) == 0 and spent(1.0, 0.025, kind) == pytest.approx(0.025)
    z = stats.norm.ppf(1 - 0.0125)
    assert spent(0.25, 0.025) == pytest.approx(2 * stats.norm.sf(z / sqrt(0.25)))
    assert spent(0.25, 0.025, "pocock") == pytest.approx(0.025 * log(1 + (e - 1) * 0.25))
    with pytest.raises(ValueError):
        spent(0.5, 0.05, "bonferroni")


def test_boundaries_are_the_published_obrien_fleming_values():
    """Five equally spaced looks, one-sided 0.025, O'Brien-Fleming-type spending: 4.877,
    3.357, 2.680, 2.290, 2.031 (Lan & DeMets; the values gsDesign and rpact print). One look:
    the fixed test's z."""
    got = boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.025)
    assert got == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=2e-3)
    assert boundaries([1.0], 0.025) == pytest.approx([stats.norm.isf(0.025)])
    with pytest.raises(ValueError):
        boundaries([0.5, 0.4], 0.025)


def test_look_alphas_spend_alpha_across_cycle_looks():
    assert cycle_looks(40, 5) == [10, 15, 20, 25, 30, 35, 40]
    assert cycle_looks(12, 5) == [10] and cycle_looks(24, None) == [6, 12, 24]
    levels = look_alphas(cycle_looks(40, 5), 40)
    assert all(a < b for a, b in zip(levels, levels[1:]))  # later looks get more
    assert levels[-1] < ALPHA and levels[-1] > ALPHA / len(levels)  # beats Bonferroni at the end
    assert look_alphas([40], 40) == pytest.approx([ALPHA])  # one look: the fixed test
    assert look_alphas([10, 15], 40) == pytest.approx(levels[:2])  # earlier looks stay put


def test_decide_power_matches_its_normal_approximation_by_simulation():
    """The 'what would decide it' figures: the power of a two-sided z test at alpha of a
    difference d with per-repeat sd at n repeats, by hand and by simulating the test; the
    repeats for 80% power are the first n that reach it; no difference and no margin is
    never decided."""
    d, sd, n, alpha = 0.02, 0.05, 40, 0.01
    z = stats.norm.isf(alpha / 2)
    assert decide_power(d, sd, n, alpha, None) == pytest.approx(
        stats.norm.cdf(d / (sd / np.sqrt(n)) - z))
    rng = np.random.default_rng(3)
    means = d + sd / np.sqrt(n) * rng.standard_normal(200_000)
    assert np.mean(np.abs(means) / (sd / np.sqrt(n)) > z) == pytest.approx(
        decide_power(d, sd, n, alpha, None), abs=0.01)
    need = repeats_for_power(d, sd, alpha, None, step=5)
    assert need % 5 == 0 and decide_power(d, sd, need, alpha, None) >= 0.8
    assert decide_power(d, sd, need - 5, alpha, None) < 0.8
    # equivalence: d = 0 within a margin of 2 sd / sqrt(n) is shown at high power
    assert decide_power(0.0, sd, n, alpha, 0.05) > 0.99
    assert repeats_for_power(0.0, sd, alpha, None) is None


def test_corrected_level_is_bonferroni_over_looks():
    assert corrected_level(1) == pytest.approx(0.95)
    assert corrected_level(5) == pytest.approx(1 - 0.05 / 5)


def test_paired_difference_matches_the_hand_derived_delta_interval():
    xa = np.array([0.80, 0.70, 0.85, 0.75, 0.78])
    ia = np.array([0.95, 0.94, 0.96, 0.95, 0.95])
    xb = np.array([0.76, 0.69, 0.80, 0.70, 0.75])
    ib = np.array([0.94, 0.95, 0.95, 0.94, 0.95])
    ra, rb = xa.mean() / ia.mean(), xb.mean() / ib.mean()
    psi = (xa - ra * ia) / ia.mean() - (xb - rb * ib) / ib.mean()
    se = psi.std(ddof=1) / np.sqrt(5)
    t = stats.t.ppf(0.99, 4)
    out = paired_difference(xa, ia, xb, ib, 0.98, skew_corrected=False)
    assert out["d"] == pytest.approx(ra - rb) and out["n"] == 5
    assert out["se"] == pytest.approx(se)
    assert (out["low"], out["high"]) == pytest.approx((ra - rb - t * se, ra - rb + t * se))
    # pairing: the shared per-repeat swings cancel, the marginal spreads do not
    marginal = np.sqrt(((xa - ra * ia) / ia.mean()).var(ddof=1) / 5
                       + ((xb - rb * ib) / ib.mean()).var(ddof=1) / 5)
    assert se < marginal / 3


def test_skew_corrected_interval_matches_halls_transformation_by_hand():
    xa = np.array([0.80, 0.70, 0.85, 0.75, 0.78, 0.60])
    ia = np.array([0.95, 0.94, 0.96, 0.95, 0.95, 0.94])
    xb = np.array([0.76, 0.69, 0.80, 0.70, 0.75, 0.66])
    ib = np.array([0.94, 0.95, 0.95, 0.94, 0.95, 0.95])
    n = 6
    ra, rb = xa.mean() / ia.mean(), xb.mean() / ib.mean()
    psi = (xa - ra * ia) / ia.mean() - (xb - rb * ib) / ib.mean()
    g = np.mean(psi ** 3) / np.mean(psi ** 2) ** 1.5
    se_g = np.sqrt(6 * (n - 2) / ((n + 1) * (n + 3)))
    s, t = psi.std(ddof=1), stats.t.ppf(0.99, n - 1)

    def inv(x, gam):  # Hall (1992): T + gT^2/3 + g^2T^3/27 + g/(6n), inverted
        return 3 / gam * (np.cbrt(1 + gam * (x - gam / (6 * n))) - 1)

    out = paired_difference(xa, ia, xb, ib, 0.98)
    assert out["skewness"] == pytest.approx(g)
    assert out["low"] == pytest.approx(ra - rb - s * inv(t / np.sqrt(n), g - se_g))
    assert out["high"] == pytest.approx(ra - rb - s * inv(-t / np.sqrt(n), g + se_g))
    plain = paired_difference(xa, ia, xb, ib, 0.98, skew_corrected=False)
    # left-skewed differences: the interval reaches further down, and is wider overall
    assert g < 0 and out["low"] < plain["low"]
    assert out["high"] - out["low"] > plain["high"] - plain["low"]


def test_paired_difference_uses_only_repeats_both_models_completed():
    xa, ia = np.array([0.8, 0.7, 0.9, np.nan]), np.array([0.95, 0.94, 0.96, np.nan])
    xb, ib = np.array([0.7, 0.65, 0.8, 0.75]), np.array([0.94, np.nan, 0.95, 0.95])
    out = paired_difference(xa, ia, xb, ib, 0.95)
    assert out["n"] == 2  # repeats 0 and 2
    ref = paired_difference(xa[[0, 2]], ia[[0, 2]], xb[[0, 2]], ib[[0, 2]], 0.95)
    assert out["low"] == pytest.approx(ref["low"]) and out["high"] == pytest.approx(ref["high"])
    one = paired_difference(xa[:1], ia[:1], xb[:1], ib[:1], 0.95)
    assert np.isnan(one["low"]) and np.isnan(one["high"])  # one repeat: no spread to estimate
    same = paired_difference(xa[:3], ia[:3], xa[:3], ia[:3], 0.95)
    assert (same["low"], same["high"]) == (0.0, 0.0)  # identical in every repeat: equivalent
    flat = np.full(3, 0.95)  # constant inclusive accuracies: the differences do not vary
    shifted = paired_difference(xa[:3], flat, xa[:3] - 0.01, flat, 0.95)
    assert np.isnan(shifted["low"])  # a constant non-zero difference: no certainty claimed


def test_table_look_tests_every_pair_and_opens_only_undecided_ones():
    """Four models over two balanced cycles of 6: c is a hair below a (undecided), the rest
    far apart (ordered): only a and c stay open. (Seed 4: no repeat of these normal data
    lies 5 robust sd out; seed 3's repeat 9 does, and its pairs stay undecided.)"""
    rng = np.random.default_rng(4)
    z = rng.standard_normal(12)
    means = [0.80, 0.90, 0.799, 0.60]
    x = np.stack([mu + 0.04 * z + 0.002 * rng.standard_normal(12) for mu in means])[None]
    i = np.full_like(x, 0.95) + 0.0005 * rng.standard_normal(x.shape)
    res = table_look(x, i, precision=0.0001, cycle=6)
    assert res["order"][0].tolist() == [1, 0, 2, 3]
    assert res["pairs"] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert res["status"][0].tolist() == [-1, 0, 1, 1, 1, 1]
    assert (res["degraded"][0] == -1).all()
    assert res["open"][0].tolist() == [True, False, True, False] and not res["decided"][0]
    assert res["best"][0].tolist() == [2, 1, 2, 4] and res["worst"][0].tolist() == [3, 1, 3, 4]
    low = table_look(1 - x, i, precision=0.0001, higher_is_better=False, cycle=6)
    assert low["order"][0].tolist() == [1, 0, 2, 3]  # lower is better on reflected values
    assert low["status"][0].tolist() == [-1, 0, 1, 1, 1, 1]


def test_stop_reasons():
    assert stop_reason([ORDERED, ORDERED], True, 6, 48) == "every pair ordered"
    assert stop_reason([ORDERED, EQUIVALENT], True, 6, 48).startswith("every pair "
                                                                      "ordered or equivalent")
    assert stop_reason([UNDECIDED], False, 6, 48) is None
    assert stop_reason([UNDECIDED], False, 48, 48).startswith("maximum repeats")


# --- the partitions are shared by the models of a repeat (what pairing relies on) -------------


def test_models_of_a_repeat_share_its_partitions(tiny_registry, store):
    from robench.families.source_aware import protocol as source_aware
    from robench.run.runner import execute
    from robench.run.trials import TrialEnv
    from tests.helpers import run_config

    execute(run_config(datasets=["tiny"], models=["centroid", "spy"], clusterers=["kmeans"],
                       metrics=["rho"], repeats=2, k=3, executor="local"), tiny_registry, store)
    ds = TrialEnv(tiny_registry).dataset("tiny")
    parts = {}
    for row in store.trials():
        key = (row["kind"], row["repeat"])
        split = tuple(tuple(a) for a in source_aware.partition(row["spec"], ds, tiny_registry))
        parts.setdefault(key, set()).add(split)
    assert len(parts) == 6 and all(len(v) == 1 for v in parts.values())
    assert parts[("exclusive", 0)] != parts[("exclusive", 1)]


def test_exclusive_partitions_rotate_the_sources_in_the_balanced_design(tiny_registry, store):
    """Protocol 2: over a cycle of k = 3 repeats each class holds each of its sources out
    once; the trial records the cycle; the same seed gives the same partitions."""
    from robench.data.sources import find_sources
    from robench.families.source_aware import protocol as source_aware
    from robench.run.runner import execute
    from robench.run.trials import TrialEnv
    from tests.helpers import run_config

    execute(run_config(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"],
                       metrics=["rho"], repeats=6, k=3, executor="local"), tiny_registry, store)
    ds = TrialEnv(tiny_registry).dataset("tiny")
    rows = sorted((t for t in store.trials() if t["kind"] == "exclusive"), key=lambda t: t["repeat"])
    assert [t["params"]["held_out"] for t in rows] == ["balanced"] * 6
    assert {t["extra"]["cycle"] for t in rows} == {3}
    spec = rows[0]["spec"]
    groups = find_sources(ds, tiny_registry.get("clusterers", "kmeans"),
                          spec["versions"]["clusterer"], 3, spec["seed"]).groups
    y = np.asarray(ds.y)
    held = []
    for t in rows:
        test = source_aware.partition(t["spec"], ds, tiny_registry)[2]
        held.append([int(np.unique(groups[test][y[test] == c])[0]) for c in np.unique(y)])
    held = np.array(held)  # (repeats, classes)
    for c in range(held.shape[1]):
        for cycle in (held[:3, c], held[3:, c]):
            assert sorted(cycle) == sorted(np.unique(groups[y == np.unique(y)[c]]).tolist())
    again = [source_aware.partition(t["spec"], ds, tiny_registry)[2].tolist() for t in rows]
    assert again == [source_aware.partition(t["spec"], ds, tiny_registry)[2].tolist()
                     for t in rows]


# --- error rates under repeated looks ---------------------------------------------------------


CASES = [("normal", 5), ("gamma2", 5), ("exponential", 5), ("lognormal", 5),
         ("hard", 20), ("hard", 10), ("hard", 5)]


@pytest.mark.parametrize("spending", SPENDING)
@pytest.mark.parametrize("shape,k", CASES)
def test_balanced_null_pairs_under_repeated_looks_keep_five_percent(shape, k, spending):
    """A null pair of the balanced design looked at every complete cycle up to 60 repeats
    (alpha spent across the looks, both spending functions; the race uses
    robench.run.adaptive.SPENDING): the probability of calling an order at any look stays at
    or below 5% (+2 MC SE)."""
    runs = 2000
    rng = np.random.default_rng(zlib.crc32(repr(("balanced", shape, k, "seq")).encode()))
    x, i = paired.null_pairs(rng, runs, 60, shape=shape, design="balanced", k=k)
    final = run_sequential(x, i, max_repeats=60, cycle=k, spending=spending)
    res = error_rates(final, [0.7 / 0.9] * 2)
    assert res["any_wrong"] <= bound(runs), res


@pytest.mark.parametrize("spending", SPENDING)
@pytest.mark.parametrize("shape", ["normal", "gamma2", "lognormal"])
def test_random_design_null_pairs_under_repeated_looks_keep_five_percent(shape, spending):
    runs = 2000
    rng = np.random.default_rng(zlib.crc32(repr(("random", shape, "seq")).encode()))
    x, i = paired.null_pairs(rng, runs, 48, shape=shape, design="random", k=5)
    final = run_sequential(x, i, max_repeats=48, spending=spending)
    assert error_rates(final, [0.7 / 0.9] * 2)["any_wrong"] <= bound(runs)


@pytest.mark.parametrize("spending", SPENDING)
@pytest.mark.parametrize("census", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("noise", ["gamma2", "lognormal", "degraded5", "degraded10",
                                   "degraded20"])
def test_training_noise_under_a_look_every_cycle_keeps_five_percent(noise, census, spending):
    """Census share 0, 0.2 or 0.5 of the paired variance, one model training unstably
    (skewed, or a degraded run in 5-20% of repeats), a look at every cycle to 40 repeats with
    alpha spent across them: at most 5% (+2 MC SE) of null pairs ordered at any look
    (measured 0-4.0%, the most at census 0 with 10% degraded runs under Pocock spending)."""
    runs = 2000
    rng = np.random.default_rng(zlib.crc32(repr(("seq-noise", noise, census)).encode()))
    x, i = simulations.residual_tables(rng, runs, 40, noise=noise, census=census)
    final = run_sequential(x, i, max_repeats=40, cycle=5, spending=spending)
    assert error_rates(final, [0.8, 0.8])["any_wrong"] <= bound(runs)


def test_a_table_with_real_gaps_is_decided_early_and_right():
    """Five models, balanced design (k = 5), rho 0.80, 0.76, 0.70, 0.70, 0.60 (two tied),
    accuracies sharing a normal partition effect, a look at every cycle to 60 repeats:
    tables with any wrong call stay under 5%, and the tables stop well before 60 repeats."""
    rng = np.random.default_rng(7)
    runs, repeats = 400, 60
    mean_x = np.array([0.76, 0.722, 0.665, 0.665, 0.57])
    mean_i = np.full(5, 0.95)
    x, i = correlated_accuracies(rng, runs, repeats, mean_x, mean_i, [0.03] * 5, [0.005] * 5,
                                 shared=0.85)
    final = run_sequential(x, i, max_repeats=repeats, precision=0.02, cycle=5,
                           spending=RACE_SPENDING)
    res = error_rates(final, mean_x / mean_i, precision=0.02)
    assert res["any_wrong"] <= bound(runs)
    assert res["mean_repeats"] < 30
