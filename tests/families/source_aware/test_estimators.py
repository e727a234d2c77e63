"""The lost-test-set estimators: the corrected alpha by simulation, the practical identity."""

from fractions import Fraction

import numpy as np
import pytest

from robench.families.source_aware import estimators as est
from robench.stats.bits import pack_bits

N, N2, K, SIMS = 1000, 200, 5, 3000


@pytest.fixture(scope="module")
def synthetic():
    """N samples, the first N2 are the real test set: test accuracy 0.70, the rest 0.95."""
    rng = np.random.default_rng(3)
    correct = np.zeros(N, dtype=bool)
    correct[rng.choice(N2, size=140, replace=False)] = True  # a = 140/200 = 0.70
    correct[N2 + rng.choice(N - N2, size=760, replace=False)] = True  # p = 900/1000 = 0.90
    is_test = np.zeros(N, dtype=bool)
    is_test[:N2] = True
    order = rng.permutation(N)  # the test set is scattered through the data set
    return correct[order], is_test[order]


def within_standard_errors(values, target, n_se=4.0):
    """Return (ok, tolerance): the simulation mean is within n_se standard errors of target."""
    values = np.asarray(values, float)
    se = values.std(ddof=1) / np.sqrt(values.size)
    return abs(values.mean() - target) <= n_se * se, n_se * se


def test_alpha_is_unbiased_when_the_real_test_set_is_among_the_batches(synthetic):
    correct, is_test = synthetic
    a, p = correct[is_test].mean(), correct.mean()
    assert (a, p) == (0.70, 0.90)
    sim = est.simulate_batches(correct, N2, K, test_correct=int(correct[is_test].sum()),
                               n_sims=SIMS, rng=np.random.default_rng(0))
    ok, tol = within_standard_errors(sim["alpha"], a)
    assert ok, (sim["alpha"].mean(), a, tol)
    assert tol < (p - a) / 10, "the simulation is precise enough to tell a from p"
    # the naive average is the upper bound E[a_hat] = a/k + p(1 - 1/k) the post derives
    ok, _ = within_standard_errors(sim["a_hat"], a / K + p * (1 - 1 / K))
    assert ok and sim["a_hat"].mean() > a + 0.1


def test_alpha_estimates_p_when_the_real_test_set_is_not_among_the_batches(synthetic):
    correct, is_test = synthetic
    a, p = correct[is_test].mean(), correct.mean()
    sim = est.simulate_batches(correct, N2, K, test_correct=None, n_sims=SIMS,
                               rng=np.random.default_rng(1))
    ok, tol = within_standard_errors(sim["alpha"], p)
    assert ok, (sim["alpha"].mean(), p, tol)
    assert abs(sim["alpha"].mean() - a) > 20 * tol, "it does not estimate the test accuracy"


def test_the_blog_posts_one_over_k_form_is_biased(synthetic):
    correct, is_test = synthetic
    a, p = correct[is_test].mean(), correct.mean()
    sim = est.simulate_batches(correct, N2, K, test_correct=int(correct[is_test].sum()),
                               n_sims=SIMS, rng=np.random.default_rng(2))
    printed = est.blog_alpha(sim["a_hat"], p, K)
    ok, _ = within_standard_errors(printed, a / K**2)
    assert ok and abs(printed.mean() - a) > 0.5
    # alpha is an affine map of a_hat, so the two estimators differ by the factor k**2 exactly
    np.testing.assert_allclose(est.alpha_estimate(sim["a_hat"], p, K), K**2 * printed)


def test_practical_estimator_recovers_the_test_accuracy_exactly(synthetic):
    correct, is_test = synthetic
    rng = np.random.default_rng(4)
    seen = np.flatnonzero(~is_test)
    is_val = np.zeros(N, dtype=bool)
    is_val[rng.choice(seen, size=80, replace=False)] = True
    is_fit = ~is_test & ~is_val
    n_fit, n_val, n2 = int(is_fit.sum()), int(is_val.sum()), int(is_test.sum())
    # exact rational arithmetic: the identity N*p = N1*(1 - eps1) + N2*a holds with no rounding
    frac = lambda m: Fraction(int(correct[m].sum()), int(m.sum()))  # noqa: E731
    seen_acc = est.seen_accuracy(n_fit, frac(is_fit), n_val, frac(is_val))
    assert seen_acc == frac(~is_test)  # N1 counts fit *and* validation samples
    a = est.practical_estimate(N, frac(np.ones(N, bool)), n_fit + n_val, seen_acc, n2)
    assert a == frac(is_test) == Fraction(7, 10)
    # and in floating point, as the metric computes it, to rounding error
    a_float = est.practical_estimate(N, correct.mean(), n_fit + n_val,
                                     est.seen_accuracy(n_fit, correct[is_fit].mean(), n_val,
                                                       correct[is_val].mean()), n2)
    assert a_float == pytest.approx(0.70, abs=1e-12)


def test_practical_estimator_rejects_sizes_that_do_not_add_up():
    with pytest.raises(ValueError, match="N1 \\+ N2"):
        est.practical_estimate(100, 0.9, 70, 0.95, 20)


def test_lost_test_trial_on_a_stored_row(synthetic):
    correct, is_test = synthetic
    seen = ~is_test
    row = {"repeat": 0, "accuracy": float(correct[is_test].mean()),
           "all_accuracy": float(correct.mean()), "correct": pack_bits(correct),
           "n_train": int(seen.sum()), "n_val": 0, "n_test": int(is_test.sum()),
           "train_accuracy": float(correct[seen].mean()), "val_accuracy": None,
           "history": [{"train_accuracy": 0.90}], "best_epoch": 1}
    out = est.lost_test_trial(row, k=K, n_sims=400)
    assert out["practical"] == pytest.approx(0.70, abs=1e-12)
    # a log that under-reports the training accuracy by 5 points costs N1/N2 * 5 = 20 points
    assert out["practical_logged"] == pytest.approx(0.70 + 4 * 0.05, abs=1e-9)
    assert out["alpha_out"] == pytest.approx(0.90, abs=0.03)
    assert out["alpha_in"] == pytest.approx(0.70, abs=0.03)
    summary = est.summarize_lost_test([out])
    assert summary["practical_abs_error"][0] == pytest.approx(0, abs=1e-12)
    assert summary["alpha_out_error"][0] == pytest.approx(0.2, abs=0.03)


def test_the_practical_identity_is_labelled_an_oracle_and_a_realistic_estimate_is_headlined(
        synthetic):
    # `practical` uses the exact fit/validation rows, which the premise says are lost: it
    # cannot fail, so it is a consistency check, never the headline.
    assert est.ESTIMATORS["practical"]["role"] == "oracle consistency check"
    assert est.ESTIMATORS["alpha_in"]["role"] == "oracle"
    assert est.ESTIMATORS[est.HEADLINE]["role"] == "realistic"
    assert est.HEADLINE == "practical_logged"
    assert {k for k, v in est.ESTIMATORS.items() if v["role"] == "realistic"} == {
        "practical_logged", "alpha_out"}
    correct, is_test = synthetic
    seen = ~is_test
    row = {"repeat": 0, "accuracy": float(correct[is_test].mean()),
           "all_accuracy": float(correct.mean()), "correct": pack_bits(correct),
           "n_train": int(seen.sum()), "n_val": 0, "n_test": int(is_test.sum()),
           "train_accuracy": float(correct[seen].mean()), "val_accuracy": None,
           "history": [{"train_accuracy": 0.90}], "best_epoch": 1}
    out = est.lost_test_trial(row, k=K, n_sims=50)
    assert out["headline_estimator"] == "practical_logged"
    assert out["headline"] == out["practical_logged"] != pytest.approx(out["true_accuracy"])
    assert out["practical"] == pytest.approx(out["true_accuracy"], abs=1e-12)  # by construction
    assert set(est.ESTIMATORS) <= set(out)  # every labelled estimate is in a trial's output
    no_log = est.lost_test_trial({**row, "history": []}, k=K, n_sims=50)
    assert no_log["headline"] is None


def test_the_realistic_estimator_errs_by_n1_over_n2_times_the_logs_error():
    # N = 1000, N2 = 200, N1 = 800, p = .9, true seen accuracy .95 -> a = (900 - 760)/200 = .70
    # a log that shows .93 instead of .95 (-0.02) gives (900 - 744)/200 = .78 = a + 4 x .02
    assert est.practical_estimate(1000, 0.9, 800, 0.95, 200) == pytest.approx(0.70)
    assert est.practical_estimate(1000, 0.9, 800, 0.93, 200) == pytest.approx(0.78)
