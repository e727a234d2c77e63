"""Leaderboard section of the rho metric: one ranked table per clusterer with the interval."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Optional

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
RHO_SCORES = ("rho", "acc_exclusive", "acc_inclusive", "acc_random")


def _finite(value) -> bool:
    import math

    return isinstance(value, (int, float)) and math.isfinite(value)


def _interval_bar(low, high) -> Optional[dict]:
    """Return left/width percentages of the [low, high] accuracy interval, clamped to [0, 100]."""
    if not (_finite(low) and _finite(high)):
        return None
    low, high = sorted((low, high))
    left = min(max(low * 100, 0.0), 100.0)
    right = min(max(high * 100, 0.0), 100.0)
    # A zero-width interval would vanish; keep a hairline so the reader still sees where it is.
    return {"left": round(left, 2), "width": round(max(right - left, 0.4), 2)}


def rho_tables(scores: list) -> list:
    """Return one ranked table per clusterer from the rho metric's sub-scores."""
    from robench.leaderboard import rank_rows

    by_group: dict = defaultdict(dict)
    for s in scores:
        if s["metric"] == "rho" and s["score"] in RHO_SCORES:
            by_group[(s["clusterer"], s["model"])][s["score"]] = s

    by_clusterer: dict = defaultdict(list)
    for (clusterer, model), parts in by_group.items():
        rho = parts.get("rho")
        if rho is None:
            continue
        acc_x = (parts.get("acc_exclusive") or {}).get("value")
        acc_i = (parts.get("acc_inclusive") or {}).get("value")
        acc_r = (parts.get("acc_random") or {}).get("value")
        by_clusterer[clusterer].append(
            {
                "model": model,
                "value": rho["value"],
                "ci_low": rho["ci_low"],
                "ci_high": rho["ci_high"],
                "n": rho["n"],
                "higher_is_better": rho["higher_is_better"],
                "acc_exclusive": acc_x,
                "acc_inclusive": acc_i,
                "acc_random": acc_r,
                "bar": _interval_bar(acc_x, acc_i),
                "random_mark": (
                    round(min(max(acc_r * 100, 0.0), 100.0), 2) if _finite(acc_r) else None
                ),
            }
        )
    return [
        {
            "clusterer": clusterer or "(none)",
            # sorting by name first makes tied ranks list in a stable, readable order
            "rows": tie_ranked(rank_rows(sorted(rows, key=lambda r: r["model"]))),
        }
        for clusterer, rows in sorted(by_clusterer.items())
    ]


def tie_ranked(rows: list) -> list:
    """Return ``rows`` (best first) re-ranked so that overlapping intervals share a rank.

    :func:`robench.intervals.tie_ranks`: a model whose 95% interval overlaps its block
    leader's takes the leader's rank (1, 1, 3, ...), so the table does not print an order the
    repeats cannot decide. ``tied`` marks a row that shares its rank.
    """
    from robench.intervals import tie_ranks

    higher = all(r.get("higher_is_better", True) for r in rows)
    ranks = tie_ranks([r["value"] for r in rows], [r["ci_low"] for r in rows],
                      [r["ci_high"] for r in rows], higher_is_better=higher)
    counts: dict = defaultdict(int)
    for rank in ranks:
        counts[rank] += 1
    for row, rank in zip(rows, ranks):
        row["rank"] = rank
        row["tied"] = rank is not None and counts[rank] > 1
    return rows


def section(rows: list):
    """Return the rho section of one data set (its tables), or None without rho scores."""
    tables = rho_tables(rows)
    return {"tables": tables} if tables else None
