"""The ``lost-test`` metric: estimating a random split's test accuracy as if its test set
were lost (the blog post "What If You Lose Your Test Set?", corrected)."""

from __future__ import annotations

from robench.families.source_aware import estimators as est
from robench.metric_kit import failure
from robench.specs import Score

METRIC = "lost-test"
#: 2: batches sampled as hypergeometric counts (same distribution); 3: headline
#: 'lost-test' = the realistic estimator's (practical_logged) absolute error.
VERSION = "3"
DESCRIPTION = ("Lost-test-set estimators vs the true test accuracy of the random "
               "splits; headline: the realistic estimator's (practical_logged) error.")
HIGHER_IS_BETTER = False
USES_CLUSTERER = False
DISPLAY_ORDER = 50
#: The plugin module that registered lost-test before the families moved (score fingerprints).
MOVED_FROM = "robench.builtin.adequacy"
REFERENCES = (("What If You Lose Your Test Set? (blog post, 2017-02-16); robench "
               "implements the corrected estimator", ""),)
DEFINITION = (
    "Lost-test-set estimators on the source-aware protocol's stratified random splits (the "
    "trials rho's E[Acc] uses). true_accuracy a: accuracy on the split's test set (N2 "
    "samples); whole_data_accuracy p: accuracy on all N samples. alpha_in: the corrected batch "
    "estimator alpha = k*(a_hat - p*(1 - 1/k)) (the blog post's 1/k factor is wrong), with "
    "k = 10 batches of N2 samples drawn from the data set of which one is the real test set; "
    "mean over 200 seeded simulations per trial (rmse in details: one draw's error). "
    "alpha_out: the same when the real test set is not among the batches (then E[alpha] = p). "
    "practical: a = (N*p - N1*(1 - eps1))/N2 with N1 = fit + validation samples and 1 - eps1 "
    "the final model's accuracy on exactly those (reported train and validation accuracies); "
    "practical_logged uses the training accuracy of the training log instead (torch models). "
    "*_abs_error: mean over trials of |estimate - a| (lower is better); signed errors and "
    "per-trial values are in details. Headline (version 3): 'lost-test' = "
    "practical_logged_abs_error, the realistic estimator's error (practical is an oracle "
    "consistency check fed with the lost split: it equals a by construction and cannot fail)."
)

#: Sub-scores of the lost-test metric and their direction.
SCORES = (
    ("true_accuracy", True), ("whole_data_accuracy", True),
    ("alpha_in", True), ("alpha_in_abs_error", False),
    ("alpha_out", True), ("alpha_out_abs_error", False),
    ("practical", True), ("practical_abs_error", False),
    ("practical_logged", True), ("practical_logged_abs_error", False),
)


def aggregate(group: dict, trials: list) -> list:
    """Estimate each random-split trial's test accuracy as if its test set were lost."""
    base = dict(dataset=group["dataset"], model=group["model"], clusterer="", metric=METRIC)
    usable = [t for t in trials if failure(t) is None and t.get("kind") == "random"
              and t.get("correct") and t.get("all_accuracy") is not None]
    per_trial = [est.lost_test_trial(t, seed=int(t.get("seed") or 0))
                 for t in sorted(usable, key=lambda t: t["repeat"])]
    summary = est.summarize_lost_test(per_trial)
    extra = {"alpha_in": {"rmse_one_draw": summary["alpha_in_rmse"][0],
                          "a_hat": summary["a_hat_in"][0],
                          "blog_formula": summary["blog_alpha_in"][0]},
             "alpha_out": {"rmse_one_draw": summary["alpha_out_rmse"][0]},
             "true_accuracy": {"trials": per_trial, "n_unusable": len(trials) - len(usable)}}
    scores = []
    for name, higher in SCORES:
        value, n = summary.get(name, (None, 0))
        if not n and name.startswith("practical_logged"):
            continue  # the model keeps no training log (e.g. the SVM)
        stem = name.replace("_abs_error", "")
        details = {"k": est.LOST_TEST_K, "n_sims": est.LOST_TEST_SIMS,
                   "per_trial": [t.get(stem) for t in per_trial]}
        if name.endswith("_abs_error"):
            details["mean_signed_error"] = summary[f"{stem}_error"][0]
            details["per_trial"] = [None if t.get(stem) is None else t[stem] - t["true_accuracy"]
                                    for t in per_trial]
        details.update(extra.get(name, {}), **est.ESTIMATORS.get(name, {}))
        scores.append(Score(**base, score=name, value=value, n=n, higher_is_better=higher,
                            details=details))
    scores.insert(0, headline_score(base, summary, per_trial))
    return scores


def headline_score(base: dict, summary: dict, per_trial: list) -> Score:
    """Return the headline: mean |estimate - true accuracy| of :data:`estimators.HEADLINE`
    (lower is better); None, with the reason, without a training log."""
    name = est.HEADLINE
    value, n = summary.get(f"{name}_abs_error", (None, 0))
    details = {"estimator": name, **est.ESTIMATORS[name],
               "estimate": summary.get(name, (None, 0))[0],
               "true_accuracy": summary.get("true_accuracy", (None, 0))[0],
               "mean_signed_error": summary.get(f"{name}_error", (None, 0))[0],
               "oracle_check_abs_error": summary.get("practical_abs_error", (None, 0))[0]}
    if not n:
        details["reason"] = ("the model keeps no training log (e.g. the SVM): the realistic "
                             "estimator has nothing to read")
    return Score(**base, score="lost-test", value=value, n=n, higher_is_better=False,
                 details=details)
