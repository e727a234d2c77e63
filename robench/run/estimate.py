"""What a planned run will do before it does it: its trials per group and a projected time.

``robench run --dry-run`` plans exactly as ``robench run`` does (the same planner, the same
skips) and prints :func:`summarize`'s table and :func:`project`'s estimate; nothing runs and
the results database is only read.

The projection is made from durations already stored, never from a model of the machine:
a trial to run is charged the mean seconds of the stored successful trials of the same data
set, model, protocol and kind (:meth:`robench.storage.store.Store.trial_durations`) with the same
epoch budget (``params.train.max_epochs``); where only another budget is stored, that mean
is scaled by the ratio of the budgets (linear in epochs: it scales a trial's fixed costs too,
and early stopping ends many trainings sooner, so it over-estimates more often than not);
where only other kinds of the same data set, model and protocol are stored, their mean is
used the same way. A trial with none of these has no estimate and is counted apart. Finding
sources (the driver's preparation) is not estimated.

Where the results database holds nothing like a planned trial (a fresh directory), the same
rule runs on robench's reference durations: ``reference_durations.json`` beside this module,
the mean seconds of the built-in data sets, models and protocols in the idle runs of a named
database on a named machine, written by ``benchmarks/reference_durations.py`` (its stamp says
which). The output says how many trials were estimated from each source, since another
machine can be several times faster or slower.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

#: The packaged reference durations (see the module docstring).
REFERENCE = Path(__file__).with_name("reference_durations.json")


def load_reference(path: Path = REFERENCE) -> tuple:
    """Return (rows, stamp) of a reference-durations file; ([], {}) if there is none."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return [], {}
    return list(data.get("rows") or []), dict(data.get("measured") or {})


def group_of(spec: dict) -> tuple:
    """Return the row of the plan table a trial belongs to: (data set, model, protocol)."""
    return (spec["dataset"], spec.get("model") or "-", spec["protocol"])


def _budget(spec: dict):
    train = (spec.get("params") or {}).get("train") or {}
    value = train.get("max_epochs")
    return None if value is None else int(value)


class Durations:
    """Stored trial durations (rows of ``Store.trial_durations``) and the estimate of a spec.

    ``fallback``: other durations (the reference ones) asked only for a spec these rows know
    nothing like; :meth:`estimate` says which answered.
    """

    def __init__(self, rows=(), fallback: "Durations" = None):
        self.fallback = fallback
        self.by_kind = defaultdict(list)  # (dataset, model, protocol, kind) -> [(budget, s, n)]
        self.by_protocol = defaultdict(list)  # (dataset, model, protocol) -> [(budget, s, n)]
        for r in rows:
            budget = None if r["max_epochs"] is None else int(r["max_epochs"])
            entry = (budget, float(r["seconds"]), int(r["n"]))
            self.by_kind[(r["dataset"], r["model"], r["protocol"], r["kind"])].append(entry)
            self.by_protocol[(r["dataset"], r["model"], r["protocol"])].append(entry)

    def estimate(self, spec: dict) -> tuple:
        """Return (seconds, source) of one planned trial: source "stored" when these rows
        answered, "reference" when the fallback did; (None, None) when neither knows it."""
        own = self.seconds(spec)
        if own is not None:
            return own, "stored"
        if self.fallback is not None:
            ref = self.fallback.seconds(spec)
            if ref is not None:
                return ref, "reference"
        return None, None

    def seconds(self, spec: dict):
        """Return the estimated seconds of one planned trial from these rows alone, or None."""
        budget = _budget(spec)
        model = spec.get("model") or ""
        for entries in (self.by_kind.get((spec["dataset"], model, spec["protocol"],
                                          spec["kind"])),
                        self.by_protocol.get((spec["dataset"], model, spec["protocol"]))):
            if not entries:
                continue
            same = [(s, n) for b, s, n in entries if b == budget]
            if same:
                return sum(s * n for s, n in same) / sum(n for _, n in same)
            scaled = [(s * (budget / b if budget and b else 1.0), n) for b, s, n in entries]
            return sum(s * n for s, n in scaled) / sum(n for _, n in scaled)
        return None


def summarize(plan, stored_keys=frozenset(), durations: Durations = None) -> list:
    """Return the plan table: per (data set, model, protocol) its trials, stored and to run.

    Each row: ``dataset``, ``model`` (``-`` for trials without one), ``protocol``,
    ``trials``, ``stored``, ``todo``, ``seconds`` (estimated seconds of the trials to run
    that have an estimate), ``unestimated`` (trials to run without one) and ``reference``
    (trials estimated from the reference durations, not the database).
    """
    durations = durations or Durations()
    rows = {}
    for key, spec in plan.specs.items():
        g = group_of(spec)
        row = rows.setdefault(g, {"dataset": g[0], "model": g[1], "protocol": g[2],
                                  "trials": 0, "stored": 0, "todo": 0, "seconds": 0.0,
                                  "unestimated": 0, "reference": 0})
        row["trials"] += 1
        if key in stored_keys:
            row["stored"] += 1
            continue
        row["todo"] += 1
        est, source = durations.estimate(spec)
        if est is None:
            row["unestimated"] += 1
        else:
            row["seconds"] += est
            row["reference"] += source == "reference"
    return [rows[g] for g in sorted(rows)]


def project(rows: list, jobs: int) -> dict:
    """Return the projection of a plan table: worker-seconds, wall seconds on ``jobs`` workers.

    ``wall_seconds`` is the worker-seconds shared evenly by the workers, and at least the
    longest group's mean trial (a lower bound: workers rarely finish together).
    """
    todo = sum(r["todo"] for r in rows)
    unestimated = sum(r["unestimated"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    longest = max((r["seconds"] / (r["todo"] - r["unestimated"]) for r in rows
                   if r["todo"] > r["unestimated"]), default=0.0)
    return {"todo": todo, "estimated": todo - unestimated, "unestimated": unestimated,
            "reference": sum(r.get("reference", 0) for r in rows),
            "worker_seconds": seconds, "jobs": int(jobs),
            "wall_seconds": max(seconds / max(int(jobs), 1), longest)}
