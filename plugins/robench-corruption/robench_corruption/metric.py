"""Metric ``mce``: corruption accuracy, CE per corruption and mCE against a baseline model."""

from __future__ import annotations

from robench.metric_kit import failure, not_applicable
from robench.specs import Score

from robench_corruption import science

METRIC = "mce"
VERSION = "1"
DESCRIPTION = ("Mean corruption error (mCE) relative to a baseline model, relative mCE "
               "and mean corruption accuracy (Hendrycks & Dietterich).")
HIGHER_IS_BETTER = False
USES_CLUSTERER = False
DISPLAY_ORDER = 30
REFERENCES = (("Dan Hendrycks and Thomas Dietterich, Benchmarking Neural Network "
               "Robustness to Common Corruptions and Perturbations (ICLR 2019)",
               "https://arxiv.org/abs/1903.12261"),)
DEFINITION = ("mCE = mean over corruptions c of CE_c = sum_s E_{s,c}(model) / sum_s "
              "E_{s,c}(baseline), E the top-1 error at severity s on a stratified test "
              "subsample (Hendrycks & Dietterich 2019); lower is better, the baseline scores 1. "
              "relative_mce subtracts each model's clean error first; corruption_accuracy is "
              "the mean accuracy over every corruption x severity")


def applies_to(dataset_spec, model_spec):
    """Return why mce cannot score a combination whatever the run (tabular data), or None."""
    if not dataset_spec.is_image:
        return f"mce needs images and data set '{dataset_spec.name}' is tabular"
    return None


def _row_of(trials: list, model: str):
    for t in trials:
        if t.get("model") == model:
            return t
    return None


def _problem(row, who: str):
    if row is None:
        return f"no {who} trial"
    why = failure(row)
    return f"{who} trial failed: {why}" if why is not None else not_applicable(row)


def aggregate(group: dict, trials: list) -> list:
    """Return the group model's mCE, relative mCE, accuracies and one CE per corruption."""
    model = group["model"]
    base = dict(dataset=group["dataset"], model=model, clusterer="", metric=METRIC)
    row = _row_of(trials, model)
    baseline = (row or {}).get("baseline") or next(
        (t.get("baseline") for t in trials if t.get("baseline")), None)
    if baseline is None:  # the spec's baseline is not stored: the baseline is the other trial
        others = [t for t in trials if t.get("model") != model]
        baseline = others[0]["model"] if others else model
    brow = _row_of(trials, baseline)
    for r, who in ((row, f"model '{model}'"), (brow, f"baseline '{baseline}'")):
        why = _problem(r, who)
        if why:
            key = "not_applicable" if r is not None and r.get("status") == "ok" else "error"
            return [Score(**base, score=METRIC, value=None, higher_is_better=False,
                          details={key: why, "baseline": baseline})]
    ex, bx = row["extra"], brow["extra"]
    ce = science.corruption_errors(ex["accuracy"], bx["accuracy"])
    rce = science.relative_corruption_errors(ex["accuracy"], ex["clean"], bx["accuracy"],
                                             bx["clean"])
    undefined = sorted(c for c, v in ce.items() if v is None)
    n = ex["n"]
    details = {"baseline": baseline, "n": n, "severities": ex["severities"],
               "ce": ce, "relative_ce": rce, "undefined": undefined}
    scores = [
        Score(**base, score=METRIC, value=science.mean_defined(ce), n=n,
              higher_is_better=False, details=details),
        Score(**base, score="relative_mce", value=science.mean_defined(rce), n=n,
              higher_is_better=False, details={"baseline": baseline}),
        Score(**base, score="corruption_accuracy",
              value=science.mean_corruption_accuracy(ex["accuracy"]), n=n),
        Score(**base, score="clean_accuracy", value=ex["clean"], n=n),
    ]
    for c in sorted(ex["accuracy"]):
        scores.append(Score(**base, score=f"ce|{c}", value=ce[c], n=n, higher_is_better=False,
                            details={"accuracy": ex["accuracy"][c],
                                     "baseline_accuracy": bx["accuracy"][c]}))
    return scores
