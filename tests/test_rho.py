"""rho and its CI against values derived by hand (the rho invariant: eq. 3, every repeat stored)."""

import itertools

import numpy as np
import pytest

from robench.families.source_aware.rho import aggregate_rho
from robench.families.source_aware.protocol import (
    bootstrap_mean_ci,
    bootstrap_rho_ci,
    class_rho,
    ratio_of_means,
)


def test_rho_is_ratio_of_means_eq3():
    x, i = [0.80, 0.90, 0.70], [0.95, 0.99, 0.97]
    expected = (0.8 + 0.9 + 0.7) / 3 / ((0.95 + 0.99 + 0.97) / 3)
    assert ratio_of_means(x, i) == pytest.approx(expected)
    # eq. 3's other form: 1 - (E[AccI] - E[AccX]) / E[AccI]
    assert ratio_of_means(x, i) == pytest.approx(1 - (np.mean(i) - np.mean(x)) / np.mean(i))
    # ... and not the mean of per-repeat ratios, which differs here
    assert ratio_of_means([0.2, 1.0], [0.4, 1.0]) == pytest.approx(0.6 / 0.7)
    assert ratio_of_means([0.2, 1.0], [0.4, 1.0]) != pytest.approx(np.mean([0.5, 1.0]))


def test_bootstrap_ci_collapses_on_constant_repeats():
    lo, hi = bootstrap_rho_ci([0.8, 0.8, 0.8], [0.9, 0.9, 0.9])
    assert lo == pytest.approx(0.8 / 0.9) and hi == pytest.approx(0.8 / 0.9)


def test_bootstrap_ci_two_repeats_matches_exact_distribution():
    # With R = 2 the bootstrap mean of each list takes 3 values with probabilities 1/4, 1/2,
    # 1/4; the ratio's lowest atom min(x)/max(i) and highest max(x)/min(i) each have
    # probability 1/16 > 2.5%, so the exact 95% percentile interval is exactly those atoms.
    x, i = [0.6, 0.8], [0.9, 1.0]
    lo, hi = bootstrap_rho_ci(x, i, n_boot=20000, seed=1)
    assert lo == pytest.approx(0.6 / 1.0)
    assert hi == pytest.approx(0.8 / 0.9)
    # and the CI contains the point estimate
    assert lo <= ratio_of_means(x, i) <= hi


def test_bootstrap_mean_ci_exact_small_case():
    vals = [0.5, 1.0]
    lo, hi = bootstrap_mean_ci(vals, n_boot=20000)
    assert (lo, hi) == pytest.approx((0.5, 1.0))


def test_class_rho_by_hand_with_missing_classes():
    px = [[0.5, 1.0, None], [0.7, 0.8, 0.4]]
    pi = [[1.0, 1.0, 0.8], [0.8, 1.0, 0.6]]
    out = class_rho(px, pi)
    assert out[0]["acc_exclusive"] == pytest.approx(0.6)
    assert out[0]["acc_inclusive"] == pytest.approx(0.9)
    assert out[0]["rho"] == pytest.approx(0.6 / 0.9)
    assert out[2]["acc_exclusive"] == pytest.approx(0.4)  # None left out of the mean
    assert out[2]["rho"] == pytest.approx(0.4 / 0.7)


def _row(kind, repeat, acc, clusterer="kmeans", status="ok", per_class=None):
    return {"kind": kind, "repeat": repeat, "accuracy": acc, "status": status,
            "clusterer": "" if kind == "random" else clusterer, "params": {"k": 5},
            "per_class": per_class or [acc, acc]}


def test_aggregate_rho_scores_by_hand():
    trials = [
        _row("exclusive", 0, 0.70), _row("exclusive", 1, 0.80),
        _row("inclusive", 0, 0.95), _row("inclusive", 1, 0.97),
        _row("random", 0, 0.96), _row("random", 1, 0.94),
        _row("exclusive", 2, 0.10, status="failed"),  # failures are left out and counted
        _row("exclusive", 0, 0.01, clusterer="oracle"),  # another clusterer's trials too
    ]
    group = {"dataset": "d", "model": "m", "clusterer": "kmeans"}
    scores = {s.score: s for s in aggregate_rho(group, trials)}
    assert scores["rho"].value == pytest.approx(0.75 / 0.96)
    assert scores["rho"].n == 2
    assert scores["rho"].details["n_failed"] == 1
    assert scores["rho"].details["paired_ratio_mean"] == pytest.approx((0.7 / 0.95 + 0.8 / 0.97) / 2)
    assert scores["rho"].ci_low <= scores["rho"].value <= scores["rho"].ci_high
    assert scores["acc_exclusive"].value == pytest.approx(0.75)
    assert scores["acc_inclusive"].value == pytest.approx(0.96)
    assert scores["acc_random"].value == pytest.approx(0.95)
    assert scores["rho"].details["per_class"][0]["rho"] == pytest.approx(0.75 / 0.96)
    assert all(s.clusterer == "kmeans" and s.metric == "rho" for s in scores.values())


def test_aggregate_rho_without_successful_trials_has_no_value():
    group = {"dataset": "d", "model": "m", "clusterer": "kmeans"}
    scores = {s.score: s for s in aggregate_rho(group, [_row("exclusive", 0, 0.5, status="failed")])}
    assert scores["rho"].value is None and scores["rho"].n == 0


def test_bootstrap_is_reproducible():
    x, i = list(np.linspace(0.6, 0.9, 7)), list(np.linspace(0.9, 0.99, 7))
    assert bootstrap_rho_ci(x, i) == bootstrap_rho_ci(x, i)
    # all 4^... resamples of tiny lists are inside [min ratio, max ratio]
    lo, hi = bootstrap_rho_ci(x, i)
    atoms = [a / b for a, b in itertools.product(x, i)]
    assert min(atoms) <= lo <= hi <= max(atoms)
