"""The ``rho`` metric (Kilinc & Uysal): E[AccX]/E[AccI] from source-aware trials."""

from __future__ import annotations

from robench.metric_kit import failure
from robench.specs import Score
from robench.families.source_aware import protocol as sa
from robench.stats.intervals import mean_interval, ratio_interval
from robench.stats.ranks import chance_level

DEFINITION = (
    "rho = E[AccX] / E[AccI] (source-aware robustness, Kilinc & Uysal eq. 3): the mean test "
    "accuracy over R repeats of the source-exclusive partition (per class one whole source, "
    "found by clustering the class into k sources, is held out for test) divided by the mean "
    "over R repeats of the source-inclusive partition (20% of every source is test). The "
    "expected accuracy interval is [E[AccX], E[AccI]]; E[Acc] is the mean over R source-unaware "
    "stratified random splits of the same test fraction. 95% CI of rho (version 2): Fieller's "
    "interval for a ratio of two independent means, Student-t with Welch-Satterthwaite degrees "
    "of freedom (coverage verified by simulation at R = 3, 5, 10, 30: docs/intervals.md); of "
    "each mean: Student's t interval clipped to [0, 1]. None, with the reason in details, "
    "where no finite interval exists (fewer than 2 repeats, no spread, a denominator not "
    "significantly above 0). Version 1 used a percentile bootstrap, which covers ~75% at R = 3. "
    "Models early-stop on a validation split carved from the training partition, never on test."
)

METRIC = "rho"
#: Version of the rho metric's definition (2: Fieller / t intervals instead of the bootstrap).
#: Scores since issue 28 also carry each accuracy's repeat and the chance accuracy in their
#: details (what tables rank by); no value changed, so the version did not.
VERSION = "2"
#: Practical-equivalence margin of rho's pair verdicts: two models whose rho differ by less
#: are "the same" (``ROBENCH_MARGIN="rho=..."`` or ``--precision`` sets another;
#: docs/intervals.md argues for it: 5% of the accuracy kept on unseen sources, reachable in
#: 15-40 repeats, where 0.01 needs 1,000-2,500).
MARGIN = 0.05
#: The trial kinds rho's paired test uses (the random-split trials are the random-split
#: accuracy beside it, run at the profile's repeats only when a race adds repeats).
PAIRED_KINDS = ("exclusive", "inclusive")
DESCRIPTION = "Source-aware robustness E[AccX]/E[AccI] with the interval and Fieller's CI."
HIGHER_IS_BETTER = True
USES_CLUSTERER = True
DISPLAY_ORDER = 10
#: The plugin module that registered rho before the families moved: score fingerprints name it.
MOVED_FROM = "robench.builtin.metrics"
REFERENCES = (("Ozsel Kilinc and Ismail Uysal, Source-aware Partitioning for Robust "
               "Cross-validation (2019)", ""),)


def mean_score_interval(values) -> tuple:
    """Return (low, high, details) of the t interval of a mean accuracy (None bounds: reason)."""
    iv = mean_interval(values, bounds=(0.0, 1.0))
    return iv.low, iv.high, iv.as_dict()


def rho_interval(acc_x, acc_i) -> tuple:
    """Return (low, high, details) of Fieller's interval of E[AccX]/E[AccI]."""
    iv = ratio_interval(acc_x, acc_i, method="fieller")
    return iv.low, iv.high, iv.as_dict()


def chance_of(trials: list) -> dict:
    """Return the chance accuracy of trials' test sets (what a model must be shown above):
    1/classes, or the mean majority-class rate where higher and every trial recorded its test
    set's class counts (``extra.test_class_counts``)."""
    k = max((len(t.get("per_class") or []) for t in trials), default=0) or None
    counts = [(t.get("extra") if isinstance(t.get("extra"), dict) else {}).get(
        "test_class_counts") for t in trials]
    shares = [max(c) / sum(c) for c in counts if isinstance(c, list) and c and sum(c) > 0]
    majority = sum(shares) / len(shares) if shares and len(shares) == len(trials) else None
    level, basis = chance_level(k, majority)
    if majority is None and k:
        basis += " (the test sets' class counts were not recorded)"
    return {"level": level, "basis": basis, "n_classes": k, "majority": majority}


def aggregate(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s source-aware trials into rho and its interval."""
    ok = [t for t in trials if failure(t) is None]
    clus = group["clusterer"]
    by_kind = {kind: [t for t in ok if t["kind"] == kind
                      and (kind == "random" or t["clusterer"] == clus)]
               for kind in ("exclusive", "inclusive", "random")}
    base = dict(dataset=group["dataset"], model=group["model"], clusterer=clus, metric=METRIC)
    details = {"k": next((t["params"].get("k") for t in by_kind["exclusive"]), None),
               "n_failed": sum(1 for t in trials if failure(t) is not None),
               "held_out": design_of(by_kind["exclusive"])}
    return [rho_score(base, by_kind, details)] + [accuracy_score(base, kind, ts)
                                                   for kind, ts in by_kind.items()]


def accuracy_score(base: dict, kind: str, trials: list) -> Score:
    """Return ``acc_<kind>``: the mean accuracy of one kind's trials with its t interval."""
    vals = [t["accuracy"] for t in trials]
    lo, hi, interval = mean_score_interval(vals)
    # "repeats": the repeat index of each value, so that models (which share a repeat's
    # partitions) can be compared repeat by repeat
    return Score(**base, score=f"acc_{kind}", value=sum(vals) / len(vals) if vals else None,
                 ci_low=lo, ci_high=hi, n=len(vals),
                 details={"per_repeat": vals, "interval": interval,
                          "repeats": [t.get("repeat") for t in trials]})


def rho_score(base: dict, by_kind: dict, details: dict) -> Score:
    """Return ``rho`` = E[AccX]/E[AccI] with Fieller's interval (None without both kinds)."""
    exclusive, inclusive = by_kind["exclusive"], by_kind["inclusive"]
    acc_x, acc_i = ([t["accuracy"] for t in kind] for kind in (exclusive, inclusive))
    if not (acc_x and acc_i):
        details["missing"] = "no successful exclusive and inclusive trials"
        return Score(**base, score="rho", value=None, ci_low=None, ci_high=None, n=0,
                     details=details)
    rho = sa.ratio_of_means(acc_x, acc_i)
    lo, hi, interval = rho_interval(acc_x, acc_i)
    paired = [x / i for x, i in zip(
        [t["accuracy"] for t in sorted(exclusive, key=lambda t: t["repeat"])],
        [t["accuracy"] for t in sorted(inclusive, key=lambda t: t["repeat"])],
    ) if i > 0]
    details.update(
        acc_exclusive=acc_x, acc_inclusive=acc_i,
        repeats_exclusive=[t["repeat"] for t in exclusive],
        repeats_inclusive=[t["repeat"] for t in inclusive], chance=chance_of(inclusive),
        interval=interval, paired_ratio_mean=sum(paired) / len(paired) if paired else None,
        per_class=sa.class_rho([t["per_class"] for t in exclusive],
                               [t["per_class"] for t in inclusive]))
    return Score(**base, score="rho", value=rho, ci_low=lo, ci_high=hi,
                 n=min(len(acc_x), len(acc_i)), details=details)


def design_of(exclusive: list) -> dict:
    """Return the held-out design of exclusive trials (``details.held_out`` of a rho score):
    ``balanced`` with its cycle when every trial ran protocol 2's balanced design with one
    cycle length, else ``random`` (protocol 1)."""
    extras = [t.get("extra") if isinstance(t.get("extra"), dict) else {} for t in exclusive]
    cycles = {int(e["cycle"]) if (t.get("params") or {}).get("held_out") == "balanced"
              and e.get("cycle") else None for t, e in zip(exclusive, extras)}
    if len(cycles) != 1 or None in cycles:
        return {"held_out": "random", "cycle": None}
    return {"held_out": "balanced", "cycle": cycles.pop()}


def paired_values(trial: dict):
    """Return ("x", AccX) of an exclusive trial, ("i", AccI) of an inclusive one, else None
    (MetricSpec.paired: repeat r's partitions are the same for every model of a table)."""
    side = {"exclusive": "x", "inclusive": "i"}.get(trial.get("kind"))
    return None if side is None else (side, trial["accuracy"])


def interval_at(score, level: float):
    """Return rho's (Fieller) or an accuracy's (t) interval at ``level``, or None."""
    details = score.details or {}
    if score.score == METRIC and details.get("acc_exclusive") and details.get("acc_inclusive"):
        return ratio_interval(details["acc_exclusive"], details["acc_inclusive"], level)
    if score.score.startswith("acc_") and "per_repeat" in details:
        return mean_interval(details["per_repeat"], level, bounds=(0.0, 1.0))
    return None
