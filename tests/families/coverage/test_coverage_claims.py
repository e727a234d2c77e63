"""Coverage's claims (issue 28, points 1 and 8): a verdict for what holds by construction, a
two-sided "near chance" window decided by an interval whose error rate is pinned on skewed
repeats, and the test-set quality claims of section 5.3."""

import math

import numpy as np
import pytest

from robench.stats.claims import BY_CONSTRUCTION, FAILS, HOLDS, UNDECIDED, VERDICTS, Claim
from robench.families.coverage import claims
from robench.families.coverage.claims import WINDOW_LEVEL, chance_window, coverage_claims, near_chance


def _acc(mix, per, model="mlp", dataset="digits"):
    return {"dataset": dataset, "model": model, "metric": "coverage",
            "score": f"acc@{mix}@1000", "value": sum(per) / len(per),
            "details": {"per_repeat": list(per)}}


def _table(rule, boundary, model="mlp"):
    head = {"dataset": "digits", "model": model, "metric": "coverage", "score": "coverage",
            "value": 0.5, "details": {"size": 1000, "quality": {"ep": [1.0] * 10},
                                      "knobs": {"boundary_rule": rule, "wc_l": 0.5,
                                                "confidence": "calibrated"}}}
    return [head, _acc("100-0", [0.99, 0.98, 0.985], model), _acc("0-100", boundary, model)]


def test_by_construction_is_a_verdict_of_its_own():
    assert BY_CONSTRUCTION == "by construction: not evidence"
    assert BY_CONSTRUCTION in VERDICTS and len(set(VERDICTS)) == 7
    c = Claim("p", "c", "f", "d", "x", BY_CONSTRUCTION, "the region is defined so")
    assert c.as_dict()["verdict"] == BY_CONSTRUCTION
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("p", "c", "f", "d", "x", "by construction", "")


def test_the_chance_window_is_two_sided_and_calls_a_level_below_chance_below_it():
    low, high = chance_window(10)
    assert (low, high) == pytest.approx((0.08, 0.12))
    assert chance_window(100) == pytest.approx((0.008, 0.012))
    # the audit's figure: 5.0% [2.4, 7.6] on 10 classes; five repeats spread so that the
    # deciding interval is exactly that one
    t = 4.604094871  # t_{0.995, 4}
    a = 0.026 * math.sqrt(5) / t / math.sqrt(2.5)
    per = [0.05 + a * k for k in (-2, -1, 0, 1, 2)]
    verdict, position, why, row = near_chance(_row(per), 10)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.024, 0.076), abs=1e-6)
    assert verdict == FAILS and position == "below chance" and "below chance" in why
    verdict, position, _, _ = near_chance(_row([0.5, 0.55, 0.52]), 10)
    assert verdict == FAILS and position == "above chance"
    verdict, position, _, _ = near_chance(_row([0.1, 0.102, 0.098]), 10)
    assert verdict == HOLDS and position == "near chance"
    verdict, position, _, _ = near_chance(_row([0.05, 0.1, 0.15]), 10)
    assert verdict == UNDECIDED and position == "undecided"
    verdict, _, why, _ = near_chance(_row([0.1]), 10)
    assert verdict == UNDECIDED and "without an interval" in why


def test_the_all_boundary_level_is_by_construction_under_the_papers_rule_only():
    below = [0.04, 0.05, 0.045, 0.05, 0.055]
    _, level = coverage_claims(_table("paper", below))
    assert level.verdict == BY_CONSTRUCTION
    assert "misclassifies them by construction" in level.why and "below chance" in level.why
    assert "below chance" in level.figure and f"{100 * WINDOW_LEVEL:g}% CI" in level.figure
    assert "calibrated confidence" in level.figure
    assert "Table 2, column (1)" in level.paper_figure
    _, level = coverage_claims(_table("band", below))
    assert level.verdict == FAILS and "below chance" in level.why
    _, level = coverage_claims(_table("band", [0.1, 0.102, 0.098]))
    assert level.verdict == UNDECIDED and "not the paper's" in level.why


def _row(per):
    """Return a score row of per-repeat values (its value is their mean)."""
    per = [float(v) for v in per]
    return {"value": sum(per) / len(per), "details": {"per_repeat": per}}


def _skewed(rng, mean, sd, shape, size):
    """Repeats with the given mean and sd: normal, or Gamma(2)-shaped (skewness +-1.41)."""
    if shape == "normal":
        return rng.normal(mean, sd, size)
    g = (rng.gamma(2.0, 1.0, size) - 2.0) / math.sqrt(2.0)
    return mean + sd * g if shape == "right" else mean - sd * g


@pytest.mark.parametrize("repeats", [3, 5, 10])
def test_the_windows_wrong_verdict_rate_is_at_most_5_percent_on_skewed_repeats(repeats):
    """With the true level at an end of the window, "near chance" (true level outside it by
    an infinitesimal) and "below/above chance" (true level inside) are each wrong at most 5%
    of the time, for normal and for Gamma(2)-skewed repeats of both signs (measured: about 3%
    at most). 2,000 simulated tables per case: the rate's standard error is at most 0.5
    points."""
    rng = np.random.default_rng(repeats)
    low, high = chance_window(10)
    n = 2000
    for shape in ("normal", "right", "left"):
        for edge in (low, high):
            draws = np.clip(_skewed(rng, edge, 0.01, shape, (n, repeats)), 0.0, 1.0)
            verdicts = [near_chance(_row(d), 10)[0]
                        for d in draws]
            near = verdicts.count(HOLDS) / n
            outside = verdicts.count(FAILS) / n
            assert near <= 0.05 and outside <= 0.05, (shape, edge, near, outside)
    # and from 5 repeats it decides: at chance with a 0.5-point spread, "near chance" nearly
    # always (3 repeats: t_{0.995, 2} = 9.9 makes the interval wider than the window)
    draws = rng.normal(0.1, 0.005, (500, repeats))
    held = sum(near_chance(_row(d), 10)[0] == HOLDS for d in draws) / 500
    assert held > 0.9 if repeats >= 5 else held < 0.5


def _quality(model, acc, cp, cp_train=(0.6, 0.6)):
    base = {"dataset": "mnist-5k", "model": model, "metric": "coverage"}
    return [{**base, "score": "model_acc", "value": acc},
            {**base, "score": "cp", "value": sum(cp) / len(cp),
             "details": {"per_repeat": list(cp)}},
            {**base, "score": "coverage", "value": 0.5,
             "details": {"knobs": {"radius": 1.0}, "quality": {"cp_train": list(cp_train)}}}]


def _rule(claim):
    """Return the verdict the row's rule gave (kept in the evidence where the control made
    the row not evidence)."""
    return claim.evidence.get("rule verdict", claim.verdict)


def test_test_set_quality_claims_decide_the_centroid_majority_and_its_contrast():
    rows = _quality("lenet", 0.93, [0.40, 0.42, 0.41]) + \
        _quality("cnn-3", 0.97, [0.60, 0.62, 0.61]) + _quality("mlp", 0.95, [0.5, 0.6, 0.7])
    majority, contrast = claims.test_set_quality_claims(rows)
    # the rule decides; whether it is evidence is its control's business (issue 50: a CP of
    # Gaussian classes at the same radius, at the row's 3 models, holds in over 20% of draws)
    assert _rule(majority) == HOLDS and "(cnn-3)" in majority.claim
    assert "Section 5.3" in majority.paper_figure and "Figure 5" in majority.paper_figure
    assert "60% of its training points" in majority.why and "follows r" in majority.why
    assert _rule(contrast) == HOLDS and "lenet vs cnn-3" in contrast.claim
    rows = _quality("lenet", 0.93, [0.60, 0.62, 0.61]) + \
        _quality("cnn-3", 0.97, [0.30, 0.32, 0.31])
    majority, contrast = claims.test_set_quality_claims(rows)
    assert _rule(majority) == FAILS and _rule(contrast) == FAILS
    rows = _quality("cnn-3", 0.97, [0.45, 0.55, 0.5])
    (majority,) = claims.test_set_quality_claims(rows)  # one model: no contrast
    assert majority.verdict == UNDECIDED


def test_the_coverage_metric_declares_every_claim():
    from robench.stats.claims import evaluate
    from robench.plugins import make_registry

    rows = _table("paper", [0.04, 0.05, 0.045]) + _quality("cnn-3", 0.95, [0.6, 0.61, 0.62])
    for r in rows:
        r.setdefault("metric", "coverage")
        r["dataset"] = "digits"
    decided = [c for c in evaluate(make_registry(load_entrypoints=False), rows)
               if c.paper.startswith("Coverage")]
    kinds = [c.claim.split(" (")[0] for c in decided]
    assert kinds == ["all-centroid sets are classified better than all-boundary ones",
                     "the all-boundary set is classified near chance",
                     "the most accurate model puts most test points in the centroid region"]
    assert decided[1].verdict == BY_CONSTRUCTION
