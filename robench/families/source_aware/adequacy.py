"""The ``adequacy`` metric (Kilinc & Uysal, section 5.2): E[AccX], E[AccI] and rho as the
training set grows, per class too, from the ``adequacy`` protocol's trials."""

from __future__ import annotations

from robench.families.source_aware import adequacy_protocol as ad
from robench.families.source_aware import protocol as sa
from robench.families.source_aware import rho
from robench.families.source_aware.rho import mean_score_interval, rho_interval
from robench.metric_kit import failure
from robench.specs import Score

METRIC = "adequacy"
#: 2: Fieller / t intervals, as rho; 3: per-size accuracies carry their repeats.
VERSION = "3"
DESCRIPTION = ("Dataset adequacy: E[AccX], E[AccI] and rho as the training set grows, "
               "per class too.")
HIGHER_IS_BETTER = True
USES_CLUSTERER = True
DISPLAY_ORDER = 60
#: The plugin module that registered adequacy before the families moved (score fingerprints).
MOVED_FROM = "robench.builtin.adequacy"
#: The source-aware paper, as rho's (its section 5.2).
REFERENCES = rho.REFERENCES
DEFINITION = (
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


def aggregate(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s adequacy trials into per-size and class scores."""
    base = dict(dataset=group["dataset"], model=group["model"], clusterer=group["clusterer"],
                metric=METRIC)
    curves = ad.size_curves(trials, clusterer=group["clusterer"])
    n_failed = sum(1 for t in trials if failure(t) is not None)
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
        rho, (lo, hi, interval), per_class = (
            (sa.ratio_of_means(xs, is_), rho_interval(xs, is_),
             sa.class_rho(c["per_class_exclusive"], c["per_class_inclusive"]))
            if xs and is_ else (None, (None, None, None), []))
        means = {"acc_exclusive": ad.mean_or_none(xs), "acc_inclusive": ad.mean_or_none(is_)}
        scores.append(Score(**base, score=f"rho@{label}", value=rho, ci_low=lo, ci_high=hi,
                            n=min(len(xs), len(is_)), details={
                                **info, **means, "per_class": per_class, "interval": interval}))
        table.append({**info, **means, "rho": rho, "ci_low": lo, "ci_high": hi,
                      "n": min(len(xs), len(is_))})

    for kind, acc, likely in (("inclusive", "AccI", "likely"), ("exclusive", "AccX", "unlikely")):
        hit = ad.enough_size(curves, kind)
        scores.append(Score(
            **base, score=f"enough_{kind}", value=None if hit is None else hit["n_samples"],
            n=len(curves), higher_is_better=False,
            details={"size": None if hit is None else hit["label"],
                     "tolerance": ad.ENOUGH_TOLERANCE,
                     "reading": (f"E[{acc}] ({likely} inputs) "
                                 + _enough_text(hit, ad.ENOUGH_TOLERANCE)),
                     "curve": [{"size": c["label"], "n_samples": c["n_samples"],
                                "mean": ad.mean_or_none(c[f"acc_{kind}"])} for c in curves]},
        ))

    per_class = ad.class_curves(curves)
    ranking = [{**c, "reading": ad.class_reading(c)} for c in ad.rank_classes(per_class)]
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


