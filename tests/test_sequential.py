"""The sequential stopping rule: its looks, level and decisions, and its error rate simulated.

An interval checked at every look and acted on as soon as it decides is not a fixed-sample
interval. The simulation pins what robench.sequential claims: stopping at the worst look for
it (the first look whose interval misses the true rho) the uncorrected 95% rule misses far
more often than 5%, the Bonferroni-corrected rule at or under 5% (Monte Carlo standard error
~0.1 points at 40,000 runs). Under heavy skew (Beta(8, 2) exclusive accuracies) Fieller's
t reference is off at 3 repeats and the corrected rule misses ~7%: documented in
docs/profile.md, pinned here so a change shows.
"""

import numpy as np
import pytest

from robench.sequential import (PRECISE, SEPARATED, UNDECIDED, Entry, corrected_level, decide,
                                looks, pair_status, simulate, stop_reason)

RHO = 0.80 / 0.95


def normal_x(rng, shape):
    return rng.normal(0.80, 0.04, shape)


def normal_i(rng, shape):
    return rng.normal(0.95, 0.01, shape)


def beta_x(rng, shape):  # Beta(8, 2): mean 0.8, long left tail
    return rng.beta(8, 2, shape)


def test_looks_double_and_end_at_the_maximum():
    assert looks(100) == [3, 6, 12, 24, 48, 100]
    assert looks(24) == [3, 6, 12, 24]
    assert looks(8) == [3, 8]
    assert looks(5) == [3, 5]
    assert looks(3) == [3] and looks(1) == [1]
    with pytest.raises(ValueError):
        looks(0)


def test_corrected_level_is_bonferroni_over_looks():
    assert corrected_level(1) == pytest.approx(0.95)
    assert corrected_level(6) == pytest.approx(1 - 0.05 / 6)


def test_pairs_and_tables():
    a, b = Entry("a", 0.9, 0.88, 0.92), Entry("b", 0.8, 0.78, 0.82)
    assert pair_status(a, b, 0.01) == SEPARATED
    c = Entry("c", 0.895, 0.891, 0.899)
    d = Entry("d", 0.893, 0.889, 0.897)
    assert pair_status(c, d, 0.01) == PRECISE and pair_status(c, d, 0.001) == UNDECIDED
    assert pair_status(a, Entry("x", 0.9, None, None), 1.0) == UNDECIDED
    table = decide([b, a, Entry("e", 0.7, 0.6, 0.77)], 0.01)
    assert table["order"] == ["a", "b", "e"] and table["decided"]
    assert stop_reason(table, 3, 100) == "every adjacent pair separated"
    open_table = decide([a, Entry("f", 0.89, 0.8, 0.95)], 0.01)
    assert not open_table["decided"] and stop_reason(open_table, 3, 100) is None
    assert stop_reason(open_table, 100, 100).startswith("maximum repeats")
    assert decide([c], 0.01)["decided"] and not decide([a], 0.01)["decided"]


def test_uncorrected_looks_miss_far_more_than_nominal():
    res = simulate(normal_x, normal_i, RHO, corrected=False, n_runs=40_000)
    assert res["level"] == pytest.approx(0.95) and res["looks"] == [3, 6, 12, 24, 48, 100]
    assert res["miss_rate"] > 0.15  # 21.6% seen


def test_corrected_looks_keep_the_error_rate_at_nominal():
    res = simulate(normal_x, normal_i, RHO, corrected=True, n_runs=40_000)
    assert res["miss_rate"] <= 0.05 + 2 * res["mc_se"]  # 4.7% seen
    assert res["miss_rate"] > 0.03  # not absurdly conservative either
    prec = simulate(normal_x, normal_i, RHO, corrected=True, precision=0.01, n_runs=40_000)
    assert prec["miss_rate"] <= 0.05  # the actual precision rule: ~0.9%


def test_skewed_accuracies_documented():
    res = simulate(beta_x, normal_i, RHO, corrected=True, n_runs=40_000)
    assert 0.05 < res["miss_rate"] < 0.09  # 7.1% seen: Fieller's t is off at 3 skewed repeats
    raw = simulate(beta_x, normal_i, RHO, corrected=False, n_runs=40_000)
    assert raw["miss_rate"] > 0.2  # 24.3% seen
