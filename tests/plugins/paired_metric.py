"""A metric outside the rho family that declares a paired comparison: --until decided works
for it as for rho (the core names no metric)."""

from __future__ import annotations

from robench import hookimpl
from robench.families.source_aware import protocol
from robench.specs import MetricSpec, PairedComparison, Score
from robench.stats.intervals import mean_interval


def aggregate(group: dict, trials: list) -> list:
    vals = [t["accuracy"] for t in trials
            if t["status"] == "ok" and t["kind"] == "exclusive"
            and t["clusterer"] == group["clusterer"]]
    iv = mean_interval(vals)
    return [Score(dataset=group["dataset"], model=group["model"], clusterer=group["clusterer"],
                  metric="held-out-acc", score="held-out-acc", value=iv.estimate,
                  ci_low=iv.low, ci_high=iv.high, n=len(vals),
                  details={"per_repeat": vals, "interval": iv.as_dict()})]


def values(trial: dict):
    return ("x", trial["accuracy"]) if trial.get("kind") == "exclusive" else None


def interval(score, level):
    return mean_interval((score.details or {}).get("per_repeat") or [], level)


@hookimpl
def register_metrics(register):
    register(MetricSpec(
        name="held-out-acc", description="Mean accuracy on held-out sources (a test metric).",
        protocol=protocol.NAME, aggregate=aggregate, definition="E[AccX] over the repeats.",
        paired=PairedComparison(score="held-out-acc", values=values, interval=interval)))
