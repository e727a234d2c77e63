"""The ``rho`` metric (Kilinc & Uysal): E[AccX]/E[AccI] from source-aware trials."""

from __future__ import annotations

from robench.specs import Score

RHO_DEFINITION = (
    "rho = E[AccX] / E[AccI] (source-aware robustness, Kilinc & Uysal eq. 3): the mean test "
    "accuracy over R repeats of the source-exclusive partition (per class one whole source, "
    "found by clustering the class into k sources, is held out for test) divided by the mean "
    "over R repeats of the source-inclusive partition (20% of every source is test). The "
    "expected accuracy interval is [E[AccX], E[AccI]]; E[Acc] is the mean over R source-unaware "
    "stratified random splits of the same test fraction. 95% CI: percentile bootstrap over "
    "repeats (2,000 resamples, exclusive and inclusive resampled independently). Models "
    "early-stop on a validation split carved from the training partition, never on test."
)


def aggregate_rho(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s source-aware trials into rho and its interval."""
    from robench.families.source_aware import protocol as sa

    ok = [t for t in trials if t["status"] == "ok"]
    clus = group["clusterer"]
    by_kind = {
        "exclusive": [t for t in ok if t["kind"] == "exclusive" and t["clusterer"] == clus],
        "inclusive": [t for t in ok if t["kind"] == "inclusive" and t["clusterer"] == clus],
        "random": [t for t in ok if t["kind"] == "random"],
    }
    accs = {k: [t["accuracy"] for t in v] for k, v in by_kind.items()}
    n_failed = sum(1 for t in trials if t["status"] != "ok")
    base = dict(dataset=group["dataset"], model=group["model"], clusterer=clus, metric="rho")
    k = next((t["params"].get("k") for t in by_kind["exclusive"]), None)
    scores = []
    for kind in ("exclusive", "inclusive", "random"):
        vals = accs[kind]
        mean = sum(vals) / len(vals) if vals else None
        lo, hi = sa.bootstrap_mean_ci(vals) if vals else (None, None)
        scores.append(Score(**base, score=f"acc_{kind}", value=mean, ci_low=lo, ci_high=hi,
                            n=len(vals), details={"per_repeat": vals}))
    details = {"k": k, "n_failed": n_failed}
    if accs["exclusive"] and accs["inclusive"]:
        rho = sa.ratio_of_means(accs["exclusive"], accs["inclusive"])
        lo, hi = sa.bootstrap_rho_ci(accs["exclusive"], accs["inclusive"])
        n = min(len(accs["exclusive"]), len(accs["inclusive"]))
        paired = [x / i for x, i in zip(
            [t["accuracy"] for t in sorted(by_kind["exclusive"], key=lambda t: t["repeat"])],
            [t["accuracy"] for t in sorted(by_kind["inclusive"], key=lambda t: t["repeat"])],
        ) if i > 0]
        details.update(
            acc_exclusive=accs["exclusive"], acc_inclusive=accs["inclusive"],
            paired_ratio_mean=sum(paired) / len(paired) if paired else None,
            per_class=sa.class_rho([t["per_class"] for t in by_kind["exclusive"]],
                                   [t["per_class"] for t in by_kind["inclusive"]]),
        )
    else:
        rho, lo, hi, n = None, None, None, 0
        details["missing"] = "no successful exclusive and inclusive trials"
    scores.insert(0, Score(**base, score="rho", value=rho, ci_low=lo, ci_high=hi, n=n,
                           details=details))
    return scores
