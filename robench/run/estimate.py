"""What a planned run will do before it does it: its trials per group and a projected time.

``robench run --dry-run`` prints :func:`summarize`'s table and :func:`project`'s estimate;
docs/running.md (``--dry-run``) has the rule (stored durations, else the reference ones written
by ``benchmarks/reference_durations.py``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

#: The packaged reference durations (its stamp says where and when they were measured).
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


class Durations:
    """Stored trial durations (rows of ``Store.trial_durations``) and the estimate of a spec;
    ``fallback`` (the reference ones) answers only for a spec these rows know nothing like."""

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
        if (own := self.seconds(spec)) is not None:
            return own, "stored"
        ref = self.fallback.seconds(spec) if self.fallback is not None else None
        return (ref, "reference") if ref is not None else (None, None)

    def seconds(self, spec: dict):
        """Return the estimated seconds of one planned trial from these rows alone, or None."""
        budget = ((spec.get("params") or {}).get("train") or {}).get("max_epochs")
        budget = None if budget is None else int(budget)
        model = spec.get("model") or ""
        for entries in (self.by_kind.get((spec["dataset"], model, spec["protocol"],
                                          spec["kind"])),
                        self.by_protocol.get((spec["dataset"], model, spec["protocol"]))):
            if not entries:
                continue
            # the same training budget, else every budget scaled to this one
            pairs = ([(s, n) for b, s, n in entries if b == budget]
                     or [(s * (budget / b if budget and b else 1.0), n) for b, s, n in entries])
            return sum(s * n for s, n in pairs) / sum(n for _, n in pairs)
        return None


def summarize(plan, stored_keys=frozenset(), durations: Durations = None) -> list:
    """Return the plan table: per (data set, model, protocol) its trials, stored and to run,
    the ``seconds`` of those estimated, how many are ``unestimated`` or from the ``reference``."""
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
    """Return the projection of a plan table: worker-seconds, wall seconds on ``jobs`` workers
    (shared evenly, at least the longest group's mean trial: a lower bound)."""
    todo, unestimated, seconds = (sum(r[k] for r in rows)
                                  for k in ("todo", "unestimated", "seconds"))
    longest = max((r["seconds"] / (r["todo"] - r["unestimated"]) for r in rows
                   if r["todo"] > r["unestimated"]), default=0.0)
    return {"todo": todo, "estimated": todo - unestimated, "unestimated": unestimated,
            "reference": sum(r.get("reference", 0) for r in rows),
            "worker_seconds": seconds, "jobs": int(jobs),
            "wall_seconds": max(seconds / max(int(jobs), 1), longest)}
