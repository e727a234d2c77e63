"""The source-aware paper's claims: equivalence by TOST, AccX's spread and capacity order, the
lost test set's realistic case and "a_hat >= a", citations, what would decide a row."""

import numpy as np
import pytest

from robench.families.source_aware.claims import (EQUIVALENCE_MARGIN, lost_test_claims,
                                                  rho_claims)
from robench.stats.claims import (ALGEBRA, BY_CONSTRUCTION, FAILS, HOLDS,
                                  MORE_REPEATS, UNDECIDED)


def acc(model, score, values, repeats=None, dataset="mnist-5k"):
    """An accuracy row as the rho metric stores it (mean, t interval, per-repeat values)."""
    from robench.stats.intervals import mean_interval

    iv = mean_interval(values, bounds=(0.0, 1.0))
    return {"dataset": dataset, "model": model, "clusterer": "kmeans", "metric": "rho",
            "score": score, "value": iv.estimate, "ci_low": iv.low, "ci_high": iv.high,
            "n": len(values), "details": {"per_repeat": list(values),
                                          "repeats": list(repeats or range(len(values)))}}


def by(claims, word):
    (c,) = [c for c in claims if word in c.claim]
    return c


def test_equivalence_is_decided_by_two_one_sided_tests_with_the_margin_in_the_row():
    rng = np.random.default_rng(0)
    i = 0.950 + 0.004 * rng.standard_normal(40)
    # 0.4 points apart over 40 repeats: equivalent within 1 point (the old overlap rule would
    # have flipped this pair to "does not hold" as the intervals narrowed)
    close = [acc("mlp", "acc_inclusive", i), acc("mlp", "acc_random", i - 0.004)]
    c = by(rho_claims(close), "random split")
    assert c.verdict == HOLDS and "±1 point" in c.claim and c.would_decide == ""
    assert EQUIVALENCE_MARGIN == 0.01
    # 4.6 points apart with narrow, overlapping... no: disjoint intervals under 5 points wide
    # held under the old rule when they overlapped; TOST calls means this far apart unequal
    far = [acc("svm", "acc_inclusive", [0.95, 0.955, 0.945, 0.95]),
           acc("svm", "acc_random", [0.904, 0.909, 0.899, 0.904])]
    assert by(rho_claims(far), "random split").verdict == FAILS
    # 3 repeats, a small gap, a wide interval: undecided, saying how many repeats would do
    few = [acc("cnn-1", "acc_inclusive", [0.95, 0.93, 0.97]),
           acc("cnn-1", "acc_random", [0.94, 0.96, 0.95])]
    c = by(rho_claims(few), "random split")
    assert c.verdict == UNDECIDED and c.would_decide.startswith(MORE_REPEATS)
    assert "about" in c.would_decide


def test_overlap_with_a_5_point_gap_no_longer_holds():
    """Issue 28's example: overlapping intervals both under 5 points wide, means ~4.5 apart."""
    i = [0.95, 0.97, 0.93, 0.96, 0.94]
    r = [0.905, 0.925, 0.885, 0.915, 0.895]
    c = by(rho_claims([acc("m", "acc_inclusive", i), acc("m", "acc_random", r)]),
           "random split")
    assert c.verdict != HOLDS


def test_exclusive_accuracy_spreads_more_and_rises_with_capacity():
    rng = np.random.default_rng(1)
    z = rng.standard_normal(20)  # the shared partition effect of each repeat
    rows = []
    for m, mean in (("svm", 0.80), ("mlp", 0.82), ("cnn-1", 0.84)):
        rows.append(acc(m, "acc_exclusive", mean + 0.05 * z + 0.005 * rng.standard_normal(20)))
        rows.append(acc(m, "acc_inclusive", 0.97 + 0.004 * rng.standard_normal(20)))
        # protocol 2's balanced design (cycles of 5), which the rho score records
        rows.append({**acc(m, "acc_exclusive", [0.8, 0.8]), "score": "rho",
                     "details": {"held_out": {"held_out": "balanced", "cycle": 5}}})
    claims = rho_claims(rows)
    spread = by(claims, "sd(AccX)")
    # k-means sources of i.i.d. Gaussian classes spread AccX more too: by construction
    assert spread.verdict == BY_CONSTRUCTION and "section 5.1" in spread.paper_figure
    assert spread.evidence["rule verdict"] == HOLDS and "Gaussian" in spread.control
    rises = by(claims, "E[AccX] rises")
    # models of equal rho do not rise: the control differs, the order is evidence
    assert rises.verdict == HOLDS and "Table 1" in rises.paper_figure
    assert "paired by repeat" in rises.why and "intersection-union" in rises.why
    assert "equal rho" in rises.control
    # marginal intervals overlap (the shared effect's spread 0.05 over 20 repeats), yet the
    # paired differences decide every step
    svm, mlp = rows[0], rows[3]
    assert svm["ci_high"] > mlp["ci_low"]
    # the same models without repeat indices cannot be paired: undecided, not guessed
    for r in rows:
        r["details"]["repeats"] = []
    assert by(rho_claims(rows), "E[AccX] rises").verdict == UNDECIDED


def test_capacity_citation_is_table_1_and_equivalence_is_section_4():
    rows = [acc("svm", "acc_inclusive", [0.95, 0.96]), acc("svm", "acc_random", [0.95, 0.96])]
    rows += [{**acc(m, "rho", [0.8, 0.81]), "score": "rho"} for m in ("svm", "mlp")]
    claims = rho_claims(rows)
    assert "(Table 1)" in by(claims, "rho rises with capacity").paper_figure
    assert "(section 4)" in by(claims, "random split").paper_figure


def _lost(trials, dataset="digits"):
    return [{"dataset": dataset, "model": "mlp", "metric": "lost-test",
             "score": "true_accuracy", "value": 0.9, "details": {"trials": trials}}]


def _trials(alpha_error=0.0, p=0.97, below=0.0):
    a = [0.90, 0.92, 0.91, 0.93, 0.905, 0.915]
    e = (0.002, -0.001, 0.001, -0.002, 0.0005, -0.0005)
    return [{"true_accuracy": x, "alpha_in": x + alpha_error + d, "blog_alpha_in": x / 100,
             "whole_data_accuracy": p + d, "alpha_out": p + 2 * d, "a_hat_in": x / 10 + p * 0.9,
             "a_hat_in_below_a": below, "n_sims": 200, "k": 10}
            for x, d in zip(a, e)]


def test_lost_test_unbiasedness_is_an_equivalence_and_the_realistic_case_estimates_p():
    claims = lost_test_claims(_lost(_trials()))
    unbiased = by(claims, "is unbiased")
    # the post's own assumption planted in binomial batches gives the same: algebra checks
    assert unbiased.verdict == ALGEBRA and "two one-sided tests" in unbiased.why
    assert unbiased.evidence["rule verdict"] == HOLDS and "planted" in unbiased.control
    assert by(claims, "printed formula").verdict == ALGEBRA
    real = by(claims, "realistic case")
    assert real.verdict == FAILS  # alpha - a ~ +6 points: it estimates p = 0.97
    assert "alpha - p" in real.figure and real.evidence["error_vs_p"]["ci_low"] > -0.01
    # an estimator off by 3 points is not unbiased (decided, not "too wide")
    off = by(lost_test_claims(_lost(_trials(alpha_error=0.03))), "is unbiased")
    assert off.verdict == FAILS and off.kind == "evidence"


def _gap_trials(p, below, n=15):
    a = np.linspace(0.88, 0.94, n)
    return [{"true_accuracy": x, "whole_data_accuracy": p, "alpha_in": x, "alpha_out": p,
             "blog_alpha_in": x / 100, "a_hat_in": x / 10 + p * 0.9 + 0.002 * np.sin(j),
             "a_hat_in_below_a": below, "n_sims": 200, "k": 10} for j, x in enumerate(a)]


def test_a_hat_above_a_is_decided_on_its_expectation_not_by_one_counterexample():
    # p = 0.97 above every a: E[a_hat] - a = 0.9 (p - a) > 0, though 1% of the sets fell
    # below a by batch noise: the old counterexample rule said "does not hold"
    c = by(lost_test_claims(_lost(_gap_trials(0.97, 0.01))), "upper bound")
    assert c.verdict == HOLDS and c.kind == "evidence" and "30 of 3000" in c.figure
    assert "mirrored below 0" in c.control and "15 trials" in c.control
    assert "(1 - 1/k)(p - a)" in c.why
    # p = 0.85 below every a: the expectation lies below a, decided "does not hold"
    c = by(lost_test_claims(_lost(_gap_trials(0.85, 0.9))), "upper bound")
    assert c.verdict == FAILS and c.kind == "evidence" and "mirrored above 0" in c.control


def test_lost_test_trial_counts_simulated_sets_below_the_test_accuracy():
    from robench.stats.bits import pack_bits
    from robench.families.source_aware.estimators import lost_test_trial

    n, n2 = 200, 40
    correct = np.zeros(n, bool)
    correct[:100] = True  # p = 0.5, far below the test set's accuracy
    correct[n - n2:] = True  # a = 1.0 on the (last 40) test samples
    row = {"accuracy": 1.0, "all_accuracy": float(correct.mean()), "correct": pack_bits(correct),
           "n_train": 120, "n_val": 40, "n_test": n2, "repeat": 0}
    out = lost_test_trial(row, k=5, n_sims=50)
    assert out["a_hat_in_below_a"] == pytest.approx(1.0)  # a/k + p(1-1/k) = 0.68 < 1
