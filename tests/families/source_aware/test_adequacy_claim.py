"""The adequacy claim "rho rises with the training size": sizes paired by repeat, Bonferroni
over the models, the marginal rule only for scores stored without repeat indices."""

import numpy as np
import pytest

from robench.families.source_aware.claims import (ADEQUACY_ALPHA, adequacy_claims,
                                                  adequacy_decisions)
from robench.families.source_aware.adequacy import aggregate as aggregate_adequacy
from robench.stats.claims import BY_CONSTRUCTION, FAILS, HOLDS, MORE_REPEATS, UNDECIDED, compare

SMALL = 100


def trial(kind, repeat, size, acc):
    params = {"k": 3, "test_size": 0.2} | ({} if size == "full" else {"size": size})
    n = 400 if size == "full" else size
    return {"status": "ok", "kind": kind, "repeat": repeat, "clusterer": "kmeans",
            "protocol": "source-aware" if size == "full" else "adequacy", "params": params,
            "accuracy": acc, "per_class": [acc, acc], "n_train": n - n // 10, "n_val": n // 10}


def stored(model, x_full, i_full, x_small, i_small, repeats=None, dataset="mnist-5k"):
    """Score rows (as dicts) the adequacy metric stores for one model's sweep."""
    repeats = list(range(len(x_full))) if repeats is None else repeats
    trials = []
    for size, xs, is_ in (("full", x_full, i_full), (SMALL, x_small, i_small)):
        for r, x, i in zip(repeats, xs, is_):
            trials += [trial("exclusive", r, size, x), trial("inclusive", r, size, i)]
    group = {"dataset": dataset, "model": model, "clusterer": "kmeans"}
    return [{**s.__dict__} for s in aggregate_adequacy(group, trials)]


def without_repeats(rows):
    """The same rows as an adequacy version 2 store holds them: no repeat indices."""
    out = []
    for r in rows:
        d = dict(r.get("details") or {})
        d.pop("repeats", None)
        out.append({**r, "details": d})
    return out


def by_score(rows, model="m"):
    return {r["score"]: r for r in rows if r["model"] == model}


# Four repeats whose partitions differ a lot in difficulty (AccX 0.60-0.90), the same
# inclusive accuracies at both sizes, and a full-size AccX 3-5 points above the smallest
# size's in *every* repeat.
X_SMALL = [0.60, 0.70, 0.80, 0.90]
GAIN = [0.03, 0.05, 0.04, 0.04]
X_FULL = [x + g for x, g in zip(X_SMALL, GAIN)]
I_BOTH = [0.94, 0.96, 0.95, 0.95]


def test_the_accuracy_scores_store_the_repeat_of_each_value():
    rows = by_score(stored("m", X_FULL, I_BOTH, X_SMALL, I_BOTH, repeats=[3, 0, 2, 1]))
    for name in ("acc_exclusive@full", "acc_inclusive@full", f"acc_exclusive@{SMALL}",
                 f"acc_inclusive@{SMALL}"):
        assert rows[name]["details"]["repeats"] == [3, 0, 2, 1]
    assert rows[f"acc_exclusive@{SMALL}"]["details"]["per_repeat"] == X_SMALL


def test_paired_repeats_decide_what_overlapping_marginal_intervals_cannot():
    rows = stored("m", X_FULL, I_BOTH, X_SMALL, I_BOTH)
    scores = by_score(rows)
    # the old rule: rho's Fieller intervals at the two sizes overlap, so it was undecided
    assert compare(scores["rho@full"], scores[f"rho@{SMALL}"])[0] == UNDECIDED
    (claim,) = adequacy_claims(rows)
    assert claim.verdict == HOLDS and claim.would_decide == ""
    ev = claim.evidence["m"]
    # by hand: the same AccI at both sizes, so rho(full) - rho(100) = mean gain / mean AccI
    assert ev["rule"] == "paired" and ev["n"] == 4
    assert ev["difference"] == pytest.approx(0.04 / 0.95)
    assert ev["level"] == pytest.approx(0.95)  # one model: no multiplicity correction
    assert 0 < ev["low"] < ev["difference"] < ev["high"]
    assert "+0.042 [" in claim.figure and "over 4 shared repeats" in claim.figure
    assert "Bonferroni over 1 model(s)" in claim.why and "paired by repeat" in claim.why

    # the other way round (every repeat loses at the full size): does not hold
    (claim,) = adequacy_claims(stored("m", X_SMALL, I_BOTH, X_FULL, I_BOTH))
    assert claim.verdict == FAILS
    assert claim.evidence["m"]["difference"] == pytest.approx(-0.04 / 0.95)
    assert claim.evidence["m"]["high"] < 0


def test_bonferroni_over_the_models_of_a_data_set_is_stated_and_applied():
    x_small, i_both = X_SMALL * 2, I_BOTH * 2  # 8 repeats
    rows = stored("a", [x + g for x, g in zip(x_small, GAIN * 2)], i_both, x_small, i_both)
    # a second model whose gain is not the same sign in every repeat
    rows += stored("b", [x + g for x, g in zip(x_small, [0.04, 0.0, 0.06, -0.02] * 2)], i_both,
                   x_small, i_both)
    (claim,) = adequacy_claims(rows)
    assert claim.verdict == UNDECIDED
    assert claim.evidence["a"]["level"] == pytest.approx(1 - ADEQUACY_ALPHA / 2)
    assert claim.evidence["a"]["low"] > 0 and claim.evidence["b"]["low"] < 0
    assert "97.5% interval below 0 (Bonferroni over 2 model(s))" in claim.why
    assert "every model's 95% interval above 0 (intersection-union)" in claim.why
    assert "1 of 2 models" in claim.why and "b: rho(full) - rho(n=100)" in claim.why
    assert claim.would_decide.startswith(MORE_REPEATS) and "about" in claim.would_decide
    # only the repeats both sizes completed are paired
    partial = stored("c", X_FULL[:3], I_BOTH[:3], X_SMALL, I_BOTH)
    (claim,) = adequacy_claims(partial)
    assert claim.evidence["c"]["n"] == 3


def test_rows_without_repeat_indices_fall_back_to_the_marginal_rule_and_say_so():
    old = without_repeats(stored("m", X_FULL, I_BOTH, X_SMALL, I_BOTH))
    (claim,) = adequacy_claims(old)
    assert claim.verdict == UNDECIDED
    assert claim.evidence["m"]["rule"] == "marginal"
    assert "no repeat indices stored" in claim.why and "overlap" in claim.why
    assert claim.would_decide.startswith((MORE_REPEATS, "not decidable within"))
    # a store mixing both: each model by the rule its rows allow, no crash
    mixed = old + stored("n", X_FULL, I_BOTH, X_SMALL, I_BOTH)
    (claim,) = adequacy_claims(mixed)
    assert claim.evidence["m"]["rule"] == "marginal"
    assert claim.evidence["n"]["rule"] == "paired"
    assert "Bonferroni over 1 model(s)" in claim.why and "1 model(s) by the overlap" in claim.why
    # rho rows alone (no accuracy rows at all) and a single repeat: a verdict, no crash
    only_rho = [r for r in old if r["score"].startswith("rho@")]
    assert adequacy_claims(only_rho)[0].verdict == UNDECIDED
    (claim,) = adequacy_claims(stored("m", X_FULL[:1], I_BOTH[:1], X_SMALL[:1], I_BOTH[:1]))
    assert claim.verdict == UNDECIDED and "needs 2" in claim.why


# --- the familywise wrong-call rate under a true null ----------------------------------------


def null_tables(rng, runs: int, models: int, repeats: int):
    """Simulated sweeps where every model's rho is the same at both sizes (a true null).

    Repeat r's partitions are shared by both sizes and every model: a left-skewed shared
    effect (Gamma(2)-shaped, skewness -1.4: rare hard partitions) lowers AccX and AccI,
    three times as hard at the smallest size as at the full size, so the per-repeat
    differences are skewed and the two sizes' accuracies correlate ~0.9. The smallest size
    is also 10% less accurate on both partitions, so its rho (a ratio of means) is the
    same. Returns x_full, i_full, x_small, i_small of shape (runs, models, repeats).
    """
    def shared():
        return -(rng.gamma(2.0, size=(runs, 1, repeats)) - 2.0) / np.sqrt(2.0)

    gx, gi = shared(), shared()
    mu_x = np.linspace(0.80, 0.90, models)[:, None]
    mu_i = np.linspace(0.93, 0.97, models)[:, None]
    out = []
    for level, load in ((1.0, 0.5), (0.9, 1.5)):
        x = level * mu_x + 0.04 * load * gx + 0.01 * rng.standard_normal((runs, models, repeats))
        i = level * mu_i + 0.01 * load * gi + 0.005 * rng.standard_normal((runs, models, repeats))
        out += [x, i]
    return out[0], out[1], out[2], out[3]


RUNS = 20_000
#: Three Monte-Carlo standard errors of a 5% rate over RUNS tables.
SLACK = 3 * np.sqrt(0.05 * 0.95 / RUNS)


@pytest.mark.parametrize("repeats", [4, 8])
@pytest.mark.parametrize("models", [1, 4])
def test_familywise_wrong_calls_stay_at_5_percent_on_skewed_correlated_accuracies(repeats,
                                                                                   models):
    rng = np.random.default_rng(28 + 10 * repeats + models)
    xf, if_, xs, is_ = null_tables(rng, RUNS, models, repeats)
    corr = np.corrcoef(xf[:, 0].ravel(), xs[:, 0].ravel())[0, 1]
    assert 0.8 < corr < 0.95  # correlated as the shared partitions make them
    dec = adequacy_decisions(xf, if_, xs, is_)
    assert np.all(dec["n"] == repeats) and np.all(dec["tests"] == models)
    wrong = (dec["status"] != 0).any(-1).mean()
    # measured 2.5-3.0% (the skewness correction is conservative at a few repeats)
    assert wrong <= ADEQUACY_ALPHA + SLACK, f"familywise wrong-call rate {wrong:.4f}"


def test_the_setting_is_hostile_student_intervals_would_break_the_rate():
    """The same null with Student's interval (no skewness correction) calls wrongly ~6.3%:
    the simulation above can fail."""
    from robench.stats.sequential import paired_difference

    rng = np.random.default_rng(5)
    xf, if_, xs, is_ = null_tables(rng, RUNS, 1, 8)
    pd = paired_difference(xf, if_, xs, is_, 1 - ADEQUACY_ALPHA, skew_corrected=False)
    assert ((pd["low"] > 0) | (pd["high"] < 0)).mean() > ADEQUACY_ALPHA + SLACK


def test_the_claim_decides_as_the_vectorised_rule_on_simulated_sweeps():
    rng = np.random.default_rng(7)
    xf, if_, xs, is_ = null_tables(rng, 40, 2, 8)
    xf = xf + np.array([0.03, 0.06])[:, None]  # the full size gains 3 and 6 points of AccX
    dec = adequacy_decisions(xf, if_, xs, is_)
    # "holds" is an intersection-union test: every model at 95%, no correction
    iut = adequacy_decisions(xf, if_, xs, is_, alpha=0.05 * 2)
    seen = set()
    for t in range(40):
        rows = []
        for j, m in enumerate(("a", "b")):
            rows += stored(m, xf[t, j], if_[t, j], xs[t, j], is_[t, j])
        (claim,) = adequacy_claims(rows)
        for j, m in enumerate(("a", "b")):
            assert claim.evidence[m]["difference"] == pytest.approx(dec["d"][t, j])
            assert claim.evidence[m]["low"] == pytest.approx(dec["low"][t, j])
            assert claim.evidence[m]["high"] == pytest.approx(dec["high"][t, j])
        expected = (FAILS if (dec["status"][t] == -1).any() else
                    HOLDS if (iut["status"][t] == 1).all() else UNDECIDED)
        assert claim.verdict in (expected, BY_CONSTRUCTION)
        assert claim.evidence.get("rule verdict", claim.verdict) == expected
        seen.add(claim.verdict)
    assert len(seen) >= 2  # more than one outcome was exercised
