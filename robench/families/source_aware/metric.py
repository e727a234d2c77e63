"""The ``adequacy`` (training-size sweep, class-specific rho) and ``lost-test`` metrics."""

from __future__ import annotations

from robench.families.source_aware.rho import mean_score_interval, rho_interval
from robench.specs import Score

ADEQUACY = "adequacy"
LOST_TEST = "lost-test"
ADEQUACY_DEFINITION = (
    "Dataset adequacy (Kilinc & Uysal, section 5.2). For each repeat and each of the "
    "source-inclusive and source-exclusive partitions, the test partition is exactly the "
    "source-aware protocol's (same seed, repeat, kind); the model is trained on nested, "
    "stratified, seeded subsets of that partition's training part (default sizes 100, 300, "
    "1000, 3000 where the partition is larger, plus the full partition, which is the rho "
    "metric's own trial). A size counts fit + validation samples; validation is carved from the "
    "subset. Per size: E[AccX], E[AccI] (means over repeats, Student-t CI clipped to [0, 1]) and "
    "rho = E[AccX]/E[AccI] with Fieller's CI (version 2; version 1 used a percentile "
    "bootstrap, which under-covers at a few repeats); None with the reason where undefined. "
    "Each per-size accuracy score lists the repeat of each value (version 3), since every "
    "size of repeat r is tested on repeat r's partitions. enough_inclusive / "
    "enough_exclusive: the smallest size from which E[AccI] (E[AccX]) stays within 1 point of "
    "its full-size value. Per class: E[AccX_c], E[AccI_c], rho_c at every size (paper Figures "
    "9-10); worst_class_rho is the lowest full-size rho_c, with every class ranked least robust "
    "first and a one-line reading in its details."
)

LOST_TEST_DEFINITION = (
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


# --- adequacy ------------------------------------------------------------------------------


def aggregate_adequacy(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s adequacy trials into per-size and class scores."""
    from robench.families.source_aware import adequacy as ad
    from robench.families.source_aware import protocol as sa

    base = dict(dataset=group["dataset"], model=group["model"], clusterer=group["clusterer"],
                metric=ADEQUACY)
    curves = ad.size_curves(trials, clusterer=group["clusterer"])
    n_failed = sum(1 for t in trials if t.get("status") != "ok")
    scores, table = [], []
    for c in curves:
        label, xs, is_ = c["label"], c["acc_exclusive"], c["acc_inclusive"]
        info = {"size": label, "n_samples": c["n_samples"], "n_capped": c["n_capped"]}
        for kind, vals in (("exclusive", xs), ("inclusive", is_)):
            lo, hi, interval = mean_score_interval(vals)
            # "repeats" (version 3): each value's repeat, so that sizes, which share a
            # repeat's test partitions, are compared repeat by repeat (the adequacy claim)
            scores.append(Score(**base, score=f"acc_{kind}@{label}", value=ad.mean_or_none(vals),
                                ci_low=lo, ci_high=hi, n=len(vals),
                                details={**info, "per_repeat": vals, "interval": interval,
                                         "repeats": c[f"repeats_{kind}"]}))
        if xs and is_:
            rho = sa.ratio_of_means(xs, is_)
            lo, hi, interval = rho_interval(xs, is_)
            per_class = sa.class_rho(c["per_class_exclusive"], c["per_class_inclusive"])
        else:
            rho, lo, hi, per_class, interval = None, None, None, [], None
        scores.append(Score(**base, score=f"rho@{label}", value=rho, ci_low=lo, ci_high=hi,
                            n=min(len(xs), len(is_)),
                            details={**info, "acc_exclusive": ad.mean_or_none(xs),
                                     "acc_inclusive": ad.mean_or_none(is_),
                                     "per_class": per_class, "interval": interval}))
        table.append({**info, "acc_exclusive": ad.mean_or_none(xs),
                      "acc_inclusive": ad.mean_or_none(is_), "rho": rho, "ci_low": lo,
                      "ci_high": hi, "n": min(len(xs), len(is_))})

    for kind, acc, likely in (("inclusive", "AccI", "likely"), ("exclusive", "AccX", "unlikely")):
        hit = ad.enough_size(curves, kind)
        value = None if hit is None else hit["n_samples"]
        scores.append(Score(
            **base, score=f"enough_{kind}", value=value, n=len(curves), higher_is_better=False,
            details={"size": None if hit is None else hit["label"],
                     "tolerance": ad.ENOUGH_TOLERANCE,
                     "reading": (f"E[{acc}] ({likely} inputs) "
                                 + _enough_text(hit, ad.ENOUGH_TOLERANCE)),
                     "curve": [{"size": c["label"], "n_samples": c["n_samples"],
                                "mean": ad.mean_or_none(c[f"acc_{kind}"])} for c in curves]},
        ))

    per_class = ad.class_curves(curves)
    ranked = ad.rank_classes(per_class)
    ranking = [{**c, "reading": ad.class_reading(c)} for c in ranked]
    worst = next((c for c in ranking if c["rho"] and c["rho"][-1] is not None), None)
    scores.append(Score(
        **base, score="worst_class_rho", value=None if worst is None else worst["rho"][-1],
        n=len(per_class),
        details={"class": None if worst is None else worst["class"],
                 "reading": None if worst is None else worst["reading"],
                 "ranking": ranking, "table": table, "n_failed": n_failed},
    ))
    return scores


def _enough_text(hit, tol: float) -> str:
    if hit is None:
        return "is unknown (no full-size trials)"
    if hit["label"] == "full":
        return f"reaches its full-size value only at the full size (~{hit['n_samples']:.0f})"
    return f"is within {100 * tol:g} point of its full-size value from n = {hit['label']} on"


# --- lost test set -------------------------------------------------------------------------


#: Sub-scores of the lost-test metric and their direction.
LOST_TEST_SCORES = (
    ("true_accuracy", True), ("whole_data_accuracy", True),
    ("alpha_in", True), ("alpha_in_abs_error", False),
    ("alpha_out", True), ("alpha_out_abs_error", False),
    ("practical", True), ("practical_abs_error", False),
    ("practical_logged", True), ("practical_logged_abs_error", False),
)


def aggregate_lost_test(group: dict, trials: list) -> list:
    """Estimate each random-split trial's test accuracy as if its test set were lost."""
    from robench.families.source_aware import estimators as est

    base = dict(dataset=group["dataset"], model=group["model"], clusterer="", metric=LOST_TEST)
    usable = [t for t in trials if t.get("status") == "ok" and t.get("kind") == "random"
              and t.get("correct") and t.get("all_accuracy") is not None]
    per_trial = [est.lost_test_trial(t, seed=int(t.get("seed") or 0))
                 for t in sorted(usable, key=lambda t: t["repeat"])]
    summary = est.summarize_lost_test(per_trial)
    skipped = len(trials) - len(usable)
    scores = []
    for name, higher in LOST_TEST_SCORES:
        value, n = summary.get(name, (None, 0))
        if not n and name.startswith("practical_logged"):
            continue  # the model keeps no training log (e.g. the SVM)
        details = {"k": est.LOST_TEST_K, "n_sims": est.LOST_TEST_SIMS,
                   "per_trial": [t.get(name.replace("_abs_error", "")) for t in per_trial]}
        stem = name.replace("_abs_error", "")
        if name.endswith("_abs_error"):
            details["mean_signed_error"] = summary[f"{stem}_error"][0]
            details["per_trial"] = [None if t.get(stem) is None else t[stem] - t["true_accuracy"]
                                    for t in per_trial]
        if name == "alpha_in":
            details.update(rmse_one_draw=summary["alpha_in_rmse"][0],
                           a_hat=summary["a_hat_in"][0],
                           blog_formula=summary["blog_alpha_in"][0])
        if name == "alpha_out":
            details["rmse_one_draw"] = summary["alpha_out_rmse"][0]
        if name == "true_accuracy":
            details.update(trials=per_trial, n_unusable=skipped)
        if name in est.ESTIMATORS:
            details.update(role=est.ESTIMATORS[name]["role"], label=est.ESTIMATORS[name]["label"])
        scores.append(Score(**base, score=name, value=value, n=n, higher_is_better=higher,
                            details=details))
    scores.insert(0, headline_score(base, summary, per_trial))
    return scores


def headline_score(base: dict, summary: dict, per_trial: list) -> Score:
    """Return the metric's headline: the realistic estimator's abs. error (lower is better).

    The headline is :data:`estimators.HEADLINE` (``practical_logged``, what a practitioner
    still has once the test set is lost), not ``practical``, an oracle identity that cannot
    fail. Its value is the mean |estimate - true accuracy| over the random-split trials, so
    the ranking says whose lost test accuracy is recovered best; None, with the reason, for a
    model that keeps no training log.
    """
    from robench.families.source_aware import estimators as est

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
