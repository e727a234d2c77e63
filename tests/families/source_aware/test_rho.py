"""rho and its CI against values derived by hand (the rho invariant: eq. 3, every repeat stored)."""

import numpy as np
import pytest

from robench.families.source_aware.rho import aggregate as aggregate_rho
from robench.families.source_aware.protocol import class_rho, ratio_of_means


def test_rho_is_ratio_of_means_eq3():
    x, i = [0.80, 0.90, 0.70], [0.95, 0.99, 0.97]
    expected = (0.8 + 0.9 + 0.7) / 3 / ((0.95 + 0.99 + 0.97) / 3)
    assert ratio_of_means(x, i) == pytest.approx(expected)
    # eq. 3's other form: 1 - (E[AccI] - E[AccX]) / E[AccI]
    assert ratio_of_means(x, i) == pytest.approx(1 - (np.mean(i) - np.mean(x)) / np.mean(i))
    # ... and not the mean of per-repeat ratios, which differs here
    assert ratio_of_means([0.2, 1.0], [0.4, 1.0]) == pytest.approx(0.6 / 0.7)
    assert ratio_of_means([0.2, 1.0], [0.4, 1.0]) != pytest.approx(np.mean([0.5, 1.0]))


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


def test_rho_ci_is_fiellers_by_hand():
    # With no inclusive spread Fieller's interval is exactly (Xbar ± t_{0.975, R-1} s/sqrt(R))
    # / Ibar: here Xbar = 0.8, s = 0.1, R = 3, t = 4.302653 (half-width 0.248414).
    trials = ([_row("exclusive", r, a) for r, a in enumerate([0.7, 0.8, 0.9])]
              + [_row("inclusive", r, 0.95) for r in range(3)])
    group = {"dataset": "d", "model": "m", "clusterer": "kmeans"}
    scores = {s.score: s for s in aggregate_rho(group, trials)}
    rho = scores["rho"]
    assert rho.value == pytest.approx(0.8 / 0.95)
    assert rho.ci_low == pytest.approx((0.8 - 0.248414) / 0.95, abs=1e-6)
    assert rho.ci_high == pytest.approx((0.8 + 0.248414) / 0.95, abs=1e-6)
    # the interval reaches past the observed ratios (a percentile bootstrap cannot)
    assert rho.ci_low < 0.7 / 0.95 and rho.ci_high > 0.9 / 0.95
    assert rho.details["interval"]["method"] == "fieller"
    assert rho.details["interval"]["df"] == pytest.approx(2)
    # each mean's t interval is clipped to the accuracy range
    x = scores["acc_exclusive"]
    assert (x.ci_low, x.ci_high) == pytest.approx((0.8 - 0.248414, 1.0), abs=1e-6)
    # the inclusive accuracies have no spread: no interval, and the reason says so
    i = scores["acc_inclusive"]
    assert i.ci_low is None and "equal" in i.details["interval"]["reason"]


def test_rho_ci_is_none_with_the_reason_below_two_repeats():
    trials = [_row("exclusive", 0, 0.7), _row("inclusive", 0, 0.9), _row("inclusive", 1, 0.92)]
    group = {"dataset": "d", "model": "m", "clusterer": "kmeans"}
    rho = {s.score: s for s in aggregate_rho(group, trials)}["rho"]
    assert rho.value == pytest.approx(0.7 / 0.91)
    assert rho.ci_low is None and rho.ci_high is None
    assert "at least 2 repeats" in rho.details["interval"]["reason"]


@pytest.mark.parametrize("repeats", [3, 10])
def test_rho_ci_covers_95_percent_in_simulation(repeats):
    """Simulated accuracies: the stored rho interval covers the true ratio ~95% of the time.

    AccX ~ N(0.80, 0.05), AccI ~ N(0.95, 0.01), R repeats each; true rho = 0.80/0.95. 2,000
    experiments: the coverage's standard error is 0.5 points, the band 93-97% (a percentile
    bootstrap covered ~75% at R = 3 and ~89% at R = 10).
    """
    rng = np.random.default_rng(repeats)
    group = {"dataset": "d", "model": "m", "clusterer": "kmeans"}
    true, hits, n = 0.80 / 0.95, 0, 2000
    for _ in range(n):
        xs, is_ = rng.normal(0.80, 0.05, repeats), rng.normal(0.95, 0.01, repeats)
        trials = ([_row("exclusive", r, float(a)) for r, a in enumerate(xs)]
                  + [_row("inclusive", r, float(a)) for r, a in enumerate(is_)])
        rho = next(s for s in aggregate_rho(group, trials) if s.score == "rho")
        hits += rho.ci_low <= true <= rho.ci_high
    assert 0.93 <= hits / n <= 0.97


def test_rho_leaderboard_shows_no_order_without_a_paired_test():
    """Scores without per-repeat values cannot be paired: even non-overlapping intervals
    give no tested order, so every model may hold every rank (1-5); the rows are sorted by
    the estimate, whose position is the point rank."""
    from robench.families.source_aware.leaderboard import rho_tables

    def rho(model, value, lo, hi):
        return {"metric": "rho", "score": "rho", "clusterer": "kmeans", "model": model,
                "value": value, "ci_low": lo, "ci_high": hi, "n": 3, "higher_is_better": True}

    scores = [rho("a", 0.95, 0.90, 1.00), rho("b", 0.93, 0.85, 0.99),
              rho("c", 0.80, 0.78, 0.82), rho("d", 0.79, None, None),
              rho("e", 0.50, 0.45, 0.55)]
    rows = rho_tables(scores)[0]["rows"]
    assert [(r["model"], r["rank"], r["rank_interval"]) for r in rows] == [
        ("a", 1, "1-5"), ("b", 2, "1-5"), ("c", 3, "1-5"), ("d", 4, "1-5"), ("e", 5, "1-5")]
