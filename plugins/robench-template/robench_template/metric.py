"""Template metric ``template-gap``: a metric family of one module, built with robench's kit.

A metric module owns what its metric is, and ``__init__.py`` only wires it with
:meth:`robench.specs.MetricSpec.from_module` (docs/plugin-hooks.md, "The family kit"):
``METRIC`` (the name), ``VERSION``, ``DESCRIPTION``, ``DEFINITION`` and ``aggregate`` are
required; ``HIGHER_IS_BETTER``, ``USES_CLUSTERER``, ``DISPLAY_ORDER``, ``REFERENCES`` ...
are optional. Every line you change is marked ``CHANGE``; drop this module (and its
``register_metrics``) for a plugin that only adds models.

The metric reads the trials of a protocol another plugin registers: ``random-split``, the
source-aware family's stratified random partitions (shared by key with ``rho`` and
``lost-test``, so it trains nothing of its own). Trial triage (:func:`robench.metric_kit.failure`,
:func:`robench.metric_kit.not_applicable`) and the intervals (:mod:`robench.stats.intervals`)
come from robench.
"""

from __future__ import annotations

from robench.metric_kit import failure, not_applicable
from robench.specs import Score
from robench.stats.intervals import mean_interval

METRIC = "template-gap"  # CHANGE: a lowercase slug no other plugin registers
#: Part of every score's identity: bump it when what ``aggregate`` computes changes.
VERSION = "1"  # CHANGE
PROTOCOL = "random-split"  # CHANGE: the registered protocol whose trials it reads
DESCRIPTION = ("Generalisation gap: training minus test accuracy of the stratified random "
               "splits, with its t interval (lower is better).")  # CHANGE
DEFINITION = (  # CHANGE: what the number is, exactly (shown with every score)
    "gap = mean over the R stratified random splits (the source-aware protocol's random "
    "partitions) of train accuracy - test accuracy, train accuracy being the final model's "
    "accuracy on its fit rows (validation rows excluded). 95% Student-t interval over the "
    "repeats, clipped to [-1, 1]; none, with the reason, with fewer than 2 repeats or no "
    "spread. Trials without a training accuracy are left out.")
HIGHER_IS_BETTER = False  # a smaller gap: the test accuracy is closer to the training one
USES_CLUSTERER = False  # random splits need no sources
DISPLAY_ORDER = 90  # after the built-in families' reports


def aggregate(group: dict, trials: list) -> list:  # CHANGE: your metric
    """Return one (data set, model)'s gap: the mean of train - test accuracy over repeats."""
    base = dict(dataset=group["dataset"], model=group["model"], clusterer="", metric=METRIC,
                higher_is_better=HIGHER_IS_BETTER)
    failed = [why for why in map(failure, trials) if why is not None]
    usable = sorted((t for t in trials if failure(t) is None and not not_applicable(t)
                     and t.get("train_accuracy") is not None and t.get("accuracy") is not None),
                    key=lambda t: int(t.get("repeat") or 0))
    if not usable:
        why = failed[0] if failed else "no finished trial with a training accuracy"
        return [Score(**base, score=METRIC, value=None, details={"error": why})]
    gaps = [float(t["train_accuracy"]) - float(t["accuracy"]) for t in usable]
    interval = mean_interval(gaps, bounds=(-1.0, 1.0))
    return [Score(**base, score=METRIC, value=interval.estimate, ci_low=interval.low,
                  ci_high=interval.high, n=len(gaps),
                  details={"per_repeat": gaps, "repeats": [t.get("repeat") for t in usable],
                           "interval": interval.as_dict(), "n_failed": len(failed)})]
