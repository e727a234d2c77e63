"""Skipped combinations, summarised for people: one row each would bury the few reasons."""

from __future__ import annotations

from typing import Iterable


def summarize_skips(skipped: Iterable[dict]) -> list[dict]:
    """Group skip rows by (metric, reason) in first-seen order; ``where`` names the models
    and data sets the reason does not ("models: a, b; data sets: x, y")."""
    groups: dict = {}
    for s in skipped:
        groups.setdefault((s["metric"], s["reason"]), []).append(s)
    out = []
    for (metric, reason), rows in groups.items():
        where = []
        for kind, label in (("model", "models"), ("dataset", "data sets")):
            names = sorted({r[kind] for r in rows if r.get(kind)})
            if names and not all(f"'{n}'" in reason for n in names):
                where.append(f"{label}: {', '.join(names)}")
        out.append({"metric": metric, "reason": reason, "where": "; ".join(where)})
    return out
