"""Estimate a model's test accuracy when its test set is lost (docs/lost-test-set.md).

The corrected batch estimator and the practical identity, as pure functions of numbers and
boolean vectors; :mod:`robench.families.source_aware.lost_test` applies them to stored trials.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from robench.stats.bits import unpack_bits

#: Number of batches k the metric simulates (documented in docs/lost-test-set.md).
LOST_TEST_K = 10
#: Simulated sets of k batches per trial: enough to pin E[alpha] to ~0.3 points per trial.
LOST_TEST_SIMS = 200

#: What each estimate of :func:`lost_test_trial` is: its role ("realistic" ones use nothing
#: the premise says is lost) and a one-line label.
ESTIMATORS = {
    "practical_logged": {"role": "realistic", "label": (
        "identity N·p = N1·(1 - eps1) + N2·a with eps1 from the training log (restored epoch) "
        "and the logged validation accuracy: what a practitioner has; biased by -(N1/N2) x "
        "the log's error")},
    "alpha_out": {"role": "realistic", "label": (
        "corrected batch estimator k·(a_hat - p(1 - 1/k)) with random batches (the real test "
        "set is practically never among them): estimates p, not a")},
    "practical": {"role": "oracle consistency check", "label": (
        "identity fed with the exact fit/validation rows and the final model's accuracy on "
        "them, i.e. the lost split itself: equals a by construction, cannot fail")},
    "alpha_in": {"role": "oracle", "label": (
        "corrected batch estimator with the real test set planted among the k batches: "
        "unbiased for a, but needs the lost test set")},
    "blog_alpha_in": {"role": "counterexample", "label": (
        "the blog post's printed (1/k)·(a_hat - p(1 - 1/k)): expectation a/k², biased")},
}
#: The estimate to headline: realistic, and able to fail.
HEADLINE = "practical_logged"


def alpha_estimate(a_hat, p, k: int):
    """Return the corrected batch estimator alpha = k·(a_hat - p·(1 - 1/k)) (unbiased for a
    only if the real test set is one of the k batches; else E[alpha] = p)."""
    return k * (a_hat - p * (1 - 1 / k))


def blog_alpha(a_hat, p, k: int):
    """Return the estimator as the blog post prints it, (1/k)·(a_hat - p(1 - 1/k)): its
    expectation is a/k², not a (kept only to show the error)."""
    return (a_hat - p * (1 - 1 / k)) / k


def practical_estimate(n: int, p, n_seen: int, seen_acc, n_test: int):
    """Return a = (N·p - N1·(1 - eps1)) / N2 from ``n`` = N, ``p``, ``n_seen`` = N1, ``seen_acc``
    = 1 - eps1 and ``n_test`` = N2 (docs/lost-test-set.md; exact with Fractions too)."""
    if n != n_seen + n_test:
        raise ValueError(f"N must equal N1 + N2: got N={n}, N1={n_seen}, N2={n_test}")
    if n_test <= 0:
        raise ValueError("N2 (the test-set size) must be positive")
    return (n * p - n_seen * seen_acc) / n_test


def seen_accuracy(n_fit: int, fit_acc, n_val: int, val_acc) -> Optional[float]:
    """Return 1 - eps1 over the fit and validation parts together (None if one is unknown)."""
    if fit_acc is None or (n_val and val_acc is None):
        return None
    return (n_fit * fit_acc + (n_val * val_acc if n_val else 0)) / (n_fit + n_val)


def simulate_batches(correct, n_test: int, k: int, *, test_correct: Optional[int], n_sims: int,
                     rng: np.random.Generator) -> dict:
    """Simulate the batch estimator ``n_sims`` times; return a_hat and alpha per simulation:
    k batches of ``n_test`` of the samples (``correct``), one the real test set (with
    ``test_correct`` correct answers) if given."""
    correct = np.asarray(correct, dtype=bool)
    n = correct.size
    if not 0 < n_test <= n:
        raise ValueError(f"batch size N2={n_test} must be in 1..N={n}")
    if k < 1 or n_sims < 1:
        raise ValueError("k and n_sims must be at least 1")
    n_random = k - 1 if test_correct is not None else k
    # The number of correct answers in a batch drawn without replacement is exactly
    # hypergeometric(C correct, N - C wrong, N2 drawn): sample it directly instead of drawing
    # the indices (same distribution, vectorised; this was most of a warm rerun's time).
    n_correct = int(correct.sum())
    counts = np.zeros(n_sims, dtype=np.int64)
    if n_random:
        counts += rng.hypergeometric(n_correct, n - n_correct, n_test,
                                     size=(n_sims, n_random)).sum(axis=1)
    if test_correct is not None:
        counts += int(test_correct)
    p = float(correct.mean())
    a_hat = counts / (k * n_test)
    return {"a_hat": a_hat, "alpha": alpha_estimate(a_hat, p, k), "p": p, "k": k,
            "n_sims": n_sims}


def lost_test_trial(row: dict, *, k: int = LOST_TEST_K, n_sims: int = LOST_TEST_SIMS,
                    seed: int = 0) -> dict:
    """Return every estimate of one stored random-split trial row's test accuracy next to the
    truth; ``headline`` repeats the :data:`HEADLINE` estimate (None without a training log)."""
    n_fit, n_val, n2 = int(row["n_train"]), int(row["n_val"]), int(row["n_test"])
    n1, n = n_fit + n_val, n_fit + n_val + n2
    a, p = float(row["accuracy"]), float(row["all_accuracy"])
    correct = unpack_bits(row["correct"], n)
    test_correct = int(round(a * n2))
    rng = np.random.default_rng([int(seed), int(row.get("repeat") or 0), 7])
    inside = simulate_batches(correct, n2, k, test_correct=test_correct, n_sims=n_sims, rng=rng)
    outside = simulate_batches(correct, n2, k, test_correct=None, n_sims=n_sims, rng=rng)

    def rmse(values):
        return float(math.sqrt(np.mean((np.asarray(values) - a) ** 2)))

    out = {
        "repeat": row.get("repeat"), "true_accuracy": a, "whole_data_accuracy": p,
        "n": n, "n_seen": n1, "n_test": n2, "k": k, "n_sims": n_sims,
        "a_hat_in": float(inside["a_hat"].mean()),
        # share of simulated sets whose a_hat falls below a: refutes the post's "a_hat >= a"
        "a_hat_in_below_a": float(np.mean(inside["a_hat"] < a)),
        "alpha_in": float(inside["alpha"].mean()),
        "alpha_in_rmse": rmse(inside["alpha"]),
        "alpha_out": float(outside["alpha"].mean()),
        "alpha_out_rmse": rmse(outside["alpha"]),
        "blog_alpha_in": float(blog_alpha(inside["a_hat"], p, k).mean()),
    }
    def practical(acc1):
        return None if acc1 is None else float(practical_estimate(n, p, n1, acc1, n2))

    acc1 = seen_accuracy(n_fit, row.get("train_accuracy"), n_val, row.get("val_accuracy"))
    logged = logged_train_accuracy(row)
    acc1_logged = None if logged is None else seen_accuracy(n_fit, logged, n_val,
                                                            row.get("val_accuracy"))
    out.update(seen_accuracy=acc1, practical=practical(acc1), logged_train_accuracy=logged,
               practical_logged=practical(acc1_logged))
    return {**out, "headline": out[HEADLINE], "headline_estimator": HEADLINE}


def logged_train_accuracy(row: dict) -> Optional[float]:
    """Return the training accuracy a training log shows for the restored epoch, if any
    (averaged over the epoch's changing weights: not the final model's; docs/lost-test-set.md)."""
    history = row.get("history") or []
    best = int(row.get("best_epoch") or 0)
    if not history or best < 1 or best > len(history):
        return None
    value = history[best - 1].get("train_accuracy")
    return None if value is None else float(value)


def summarize_lost_test(per_trial: list) -> dict:
    """Average each estimate and its error over trials; errors are estimate - true accuracy."""
    def mean(vals):
        return (float(np.mean(vals)), len(vals)) if len(vals) else (None, 0)

    out = {key: mean([t[key] for t in per_trial if t.get(key) is not None]) for key in (
        "true_accuracy", "whole_data_accuracy", "alpha_in", "alpha_out", "practical",
        "practical_logged", "alpha_in_rmse", "alpha_out_rmse", "a_hat_in", "blog_alpha_in")}
    for key in ("alpha_in", "alpha_out", "practical", "practical_logged", "blog_alpha_in"):
        errs = np.array([t[key] - t["true_accuracy"] for t in per_trial if t.get(key) is not None])
        out[f"{key}_error"], out[f"{key}_abs_error"] = mean(errs), mean(np.abs(errs))
    return out
