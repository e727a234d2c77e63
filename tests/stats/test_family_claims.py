"""Paper claims decided on hand-built score tables: holds, does not hold, undecided."""

import math

import numpy as np
import pytest

from robench.stats.claims import (BY_CONSTRUCTION, FAILS, HOLDS, UNDECIDED, Claim, compare,
                                  evaluate, within)
from robench.families.source_aware.claims import rho_claims


def row(model, score, value, lo=None, hi=None, dataset="mnist-5k", metric="rho",
        clusterer="kmeans"):
    return {"dataset": dataset, "model": model, "clusterer": clusterer, "metric": metric,
            "score": score, "value": value, "ci_low": lo, "ci_high": hi}


def test_compare_and_within_decide_only_what_the_intervals_decide():
    a, b = row("a", "x", 0.9, 0.88, 0.92), row("b", "x", 0.8, 0.78, 0.82)
    assert compare(a, b)[0] == HOLDS and compare(b, a)[0] == FAILS
    assert compare(a, row("c", "x", 0.87, 0.85, 0.89))[0] == UNDECIDED  # overlap
    assert compare(a, row("c", "x", 0.1))[0] == UNDECIDED  # no interval: no decision
    assert within(row("a", "x", 0.1, 0.08, 0.12), 0.05, 0.15)[0] == HOLDS
    assert within(row("a", "x", 0.5, 0.45, 0.55), 0.05, 0.15)[0] == FAILS
    assert within(row("a", "x", 0.15, 0.1, 0.2), 0.05, 0.15)[0] == UNDECIDED
    with pytest.raises(ValueError, match="verdict"):
        Claim("p", "c", "f", "d", "f", "maybe", "why")


def _capacity(rhos, *, repeats=None, seed=0):
    """rho rows; with ``repeats``, per-repeat accuracies of protocol 2 (cycles of 5) whose
    ratio of means is the given value, sharing a partition effect (sd 0.03)."""
    rng = np.random.default_rng(seed)
    z = 0.03 * rng.standard_normal(repeats or 1)
    out = []
    for m, (v, lo, hi) in rhos.items():
        r = row(m, "rho", v, lo, hi)
        if repeats:
            i = np.full(repeats, 0.95)
            x = v * 0.95 + z + 0.002 * rng.standard_normal(repeats)
            x += v * 0.95 - x.mean()
            r["details"] = {"acc_exclusive": x.tolist(), "acc_inclusive": i.tolist(),
                            "repeats_exclusive": list(range(repeats)),
                            "repeats_inclusive": list(range(repeats)),
                            "held_out": {"held_out": "balanced", "cycle": 5}}
        out.append(r)
    return out


def _by_claim(claims, word):
    (c,) = [c for c in claims if word in c.claim]
    return c


def test_rho_capacity_claim_holds_fails_or_is_undecided():
    """Each step by the one paired test (balanced design, 10 repeats: two cycles)."""
    ordered = {"svm": (0.80, 0.78, 0.82), "mlp": (0.85, 0.83, 0.87),
               "cnn-1": (0.90, 0.88, 0.92)}
    c = _by_claim(rho_claims(_capacity(ordered, repeats=10)), "capacity")
    assert c.verdict == HOLDS and c.dataset == "mnist-5k" and "svm 0.800" in c.figure
    assert "svm -> mlp: +0.050 over 10 shared repeats: holds" in c.why
    # the quick run's SVM > MLP, decided: does not hold
    reversed_ = {**ordered, "svm": (0.90, 0.89, 0.91), "mlp": (0.85, 0.84, 0.86)}
    c = _by_claim(rho_claims(_capacity(reversed_, repeats=10)), "capacity")
    assert c.verdict == FAILS and "svm -> mlp: -0.050 over 10 shared repeats: does not hold" in c.why
    # three repeats (no complete cycle): undecided, as every table of R = 3
    assert _by_claim(rho_claims(_capacity(ordered, repeats=3)), "capacity").verdict == UNDECIDED
    # no per-repeat values: no test, whatever the intervals say
    c = _by_claim(rho_claims(_capacity(ordered)), "capacity")
    assert c.verdict == UNDECIDED and "no per-repeat values" in c.why


def test_inclusive_above_exclusive_is_paired_by_repeat_and_needs_every_model():
    rng = np.random.default_rng(1)
    rows = []
    for m, gap in (("mlp", 0.12), ("svm", 0.001)):
        i = 0.95 + 0.01 * rng.standard_normal(10)
        x = i - gap + 0.01 * rng.standard_normal(10)
        r = row(m, "rho", float(x.mean() / i.mean()))
        r["details"] = {"acc_exclusive": x.tolist(), "acc_inclusive": i.tolist(),
                        "repeats_exclusive": list(range(10)),
                        "repeats_inclusive": list(range(10)),
                        "held_out": {"held_out": "balanced", "cycle": 5}}
        rows.append(r)
    gap = _by_claim(rho_claims(rows), "E[AccI] > E[AccX]")
    # mlp is shown (12 points), svm is not (0.1 point): the intersection-union test waits
    assert gap.verdict == UNDECIDED and "1 of 2" in gap.figure
    assert gap.would_decide.startswith(("more repeats", "not decidable"))
    assert "k-means sources of i.i.d. Gaussian classes" in gap.control


def test_evaluate_collects_the_registered_claims():
    from robench.plugins import get_registry

    rows = _capacity({"svm": (0.80, 0.78, 0.82), "mlp": (0.85, 0.83, 0.87)}, repeats=10)
    rows.append(row("svm", "rho", 0.1, dataset="other", metric="adequacy"))  # other metric
    claims = evaluate(get_registry(), rows)
    assert [c.verdict for c in claims if "capacity" in c.claim] == [HOLDS]


def test_purity_ratio_claims_permute_the_zoo_points():
    from robench.families.purity_ratio.claims import purity_claims

    def zoo(xs, ys):
        return [{"dataset": "digits", "model": "zoo", "metric": "purity-ratio",
                 "score": "r|purity-ratio|corruption", "value": 0.0,
                 "details": {"points": [[f"m{j}", x, y] for j, (x, y) in
                                        enumerate(zip(xs, ys))]}},
                {"dataset": "digits", "model": "zoo", "metric": "purity-ratio",
                 "score": "validation_holds", "value": 1.0,
                 "details": {"r": 0.0, "tau": 0.5, "n": len(xs), "reason": "why"}}]

    def head(claims):
        return _by_claim(claims, "rises with corruption robustness")

    x = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    # a perfect order over 8 models: p = 1/8! one-sided
    c = head(purity_claims(zoo(x, [v + 0.01 * (j % 2) for j, v in enumerate(x)])))
    assert c.verdict == HOLDS and "permutation test (exact)" in c.why
    assert "shuffled" in c.control and "undecided" in c.control
    c = head(purity_claims(zoo(x, [-v for v in x])))
    assert c.verdict == FAILS
    c = head(purity_claims(zoo(x, [0.3, 0.1, 0.4, 0.2, 0.5, 0.2, 0.6, 0.1])))
    assert c.verdict == UNDECIDED and c.would_decide.startswith(("more models",
                                                                 "not decidable"))
    # without the zoo's points nothing is decided
    claims = purity_claims(zoo([], []))
    assert {c.verdict for c in claims} == {UNDECIDED}


def test_fisher_interval_of_r_matches_hand_values():
    from robench.families.purity_ratio.metric import r_interval

    lo, hi = r_interval(0.5, 8)  # atanh(0.5) = 0.5493, se = 1/sqrt(5) = 0.4472
    assert lo == pytest.approx(math.tanh(0.5493061 - 1.959964 * 0.4472136), abs=1e-6)
    assert hi == pytest.approx(math.tanh(0.5493061 + 1.959964 * 0.4472136), abs=1e-6)
    assert (round(lo, 3), round(hi, 3)) == (-0.316, 0.891)
    assert r_interval(0.5, 3) == (None, None) and r_interval(1.0, 8) == (None, None)


def test_coverage_claims_decide_table_2_from_the_reference_models():
    from robench.families.coverage.claims import coverage_claims

    def acc(mix, per):
        return {"dataset": "digits", "model": "mlp", "metric": "coverage",
                "score": f"acc@{mix}@1000", "value": sum(per) / len(per),
                "details": {"per_repeat": per}}

    head = {"dataset": "digits", "model": "mlp", "metric": "coverage", "score": "coverage",
            "value": 0.5, "details": {"size": 1000, "knobs": {"boundary_rule": "paper"},
                                      "quality": {"ep": [1.0] * 10}}}
    rows = [head, acc("100-0", [0.99, 0.98, 0.985]), acc("0-100", [0.10, 0.102, 0.098])]
    trend, level = coverage_claims(rows)
    # the paper's rule misclassifies boundary points by construction: not evidence, though
    # 10% +- 99% t lies inside the window [8%, 12%]; and a weak model without learnt
    # features is classified better at the centroids too: the trend is by construction
    assert trend.verdict == BY_CONSTRUCTION and trend.evidence["rule verdict"] == HOLDS
    assert level.verdict == BY_CONSTRUCTION
    assert "near chance" in level.figure and "by construction" in level.why
    rows[2] = acc("0-100", [0.50, 0.55, 0.52])  # the band rule's level: far above chance
    trend, level = coverage_claims(rows)
    assert trend.verdict == BY_CONSTRUCTION and level.verdict == BY_CONSTRUCTION
    assert "above chance" in level.figure


def test_adequacy_claim_compares_rho_at_the_full_size_with_the_smallest():
    from robench.families.source_aware.claims import adequacy_claims

    def r(size, v, lo, hi, model="cnn-1"):
        return {"dataset": "mnist-5k", "model": model, "clusterer": "kmeans",
                "metric": "adequacy", "score": f"rho@{size}", "value": v, "ci_low": lo,
                "ci_high": hi}

    rows = [r(100, 0.60, 0.55, 0.65), r(1000, 0.8, 0.7, 0.9), r("full", 0.90, 0.88, 0.92)]
    (claim,) = adequacy_claims(rows)
    assert claim.verdict == HOLDS and "n=100" in claim.figure
    rows.append(r(100, 0.8, 0.6, 1.0, model="mlp"))
    rows.append(r("full", 0.85, 0.7, 0.95, model="mlp"))
    (claim,) = adequacy_claims(rows)
    assert claim.verdict == UNDECIDED and "1 of 2" in claim.why


def test_less_accurate_more_robust_compares_the_extremes_of_test_accuracy():
    from robench.families.coverage.claims import accuracy_vs_robustness_claims

    def rows(model, acc, per):
        base = {"dataset": "mnist-5k", "model": model, "metric": "coverage"}
        return [{**base, "score": "model_acc", "value": acc},
                {**base, "score": "coverage", "value": sum(per) / len(per),
                 "details": {"per_repeat": per, "knobs": {"boundary_rule": "paper"}}}]

    table = rows("lenet", 0.93, [0.80, 0.81, 0.79, 0.80, 0.82]) \
        + rows("cnn-3", 0.97, [0.70, 0.70, 0.69, 0.71, 0.71]) \
        + rows("mlp", 0.95, [0.75, 0.6, 0.9, 0.7, 0.8])
    (claim,) = accuracy_vs_robustness_claims(table)
    # paired by repeat: lenet shown above cnn-3, which the control (a weak and a strong
    # model without learnt features) never shows: evidence
    assert claim.verdict == HOLDS and "lenet vs cnn-3" in claim.claim
    table = rows("lenet", 0.93, [0.60, 0.61, 0.59, 0.60, 0.62]) \
        + rows("cnn-3", 0.97, [0.70, 0.70, 0.69, 0.71, 0.71])
    (claim,) = accuracy_vs_robustness_claims(table)
    # the more accurate model more robust: what the construction gives the strong null model
    assert claim.verdict == BY_CONSTRUCTION and claim.evidence["rule verdict"] == FAILS


def test_capacity_claim_orders_nothing_the_paired_test_did_not():
    """Marginal intervals apart (svm 0.82 [0.78, 0.86] vs cnn-2 0.91 [0.87, 0.95]) are no
    test of the pair: without per-repeat values every step is undecided."""
    rows = _capacity({"svm": (0.82, 0.78, 0.86), "mlp": (0.80, 0.75, 0.84),
                      "cnn-1": (0.84, 0.78, 0.90), "cnn-2": (0.91, 0.87, 0.95)})
    (claim,) = [c for c in rho_claims(rows) if "capacity" in c.claim]
    assert claim.verdict == UNDECIDED and set(claim.evidence.values()) == {UNDECIDED}


def test_a_step_falling_only_at_the_loose_level_reads_undecided_like_its_row():
    """A capacity row "does not hold" only when a step falls at 0.025 / steps (Bonferroni,
    decide_parts); a step shown falling at 0.025 alone must not read "does not hold" in a row
    whose verdict is undecided (the standard run's digits row did, at 15 repeats)."""
    from robench.families.source_aware.claims import _step_text
    from robench.stats.claims import decide_parts

    class Loose:
        def stats(self):
            return {"d": -0.021}

        def __call__(self, level):
            return FAILS if level > 0.01 else UNDECIDED

    class Strict(Loose):
        def __call__(self, level):
            return FAILS

    assert decide_parts([Loose()] * 4) == UNDECIDED
    assert _step_text("svm", "mlp", Loose(), 15, False, 4) == (
        "svm -> mlp: -0.021 over 15 shared repeats: undecided (falling at one-sided 0.025, "
        "not at 0.025 / 4)")
    assert decide_parts([Strict()] + [Loose()] * 3) == FAILS
    assert _step_text("svm", "mlp", Strict(), 15, False, 4).endswith(": does not hold")
    # one step: the two levels are the same
    assert _step_text("svm", "mlp", Loose(), 15, False, 1).endswith(": does not hold")


def test_the_claims_budget_counts_in_the_standard_profiles_repeats():
    """robench.stats.claims cannot import the run room; its copy must follow the profile."""
    from robench.run.config import REPEATS
    from robench.stats.claims import PAPER_REPEATS, STANDARD_REPEATS

    assert STANDARD_REPEATS == REPEATS["standard"] and PAPER_REPEATS == REPEATS["paper"]
