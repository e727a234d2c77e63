"""Render the stored scores as one static, self-contained HTML leaderboard page.

The page has no scripts and no external resources, so it works from ``file://`` and from any
static host. Accuracies are stored as fractions in [0, 1] and shown as percentages.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Optional

import jinja2

from robench.skips import summarize_skips
from robench.store import Store

#: The metric and its sub-scores the main per-clusterer tables are built from.
RHO_METRIC = "rho"
RHO_SCORES = ("rho", "acc_exclusive", "acc_inclusive", "acc_random")

#: The feature-space clusterability metric, shown as a model table and a validation table.
PURITY_METRIC = "purity-ratio"
#: Coverage-guided accuracy, shown as a ranked table with per-mix curves and decoded examples.
COVERAGE_METRIC = "coverage"

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment() -> jinja2.Environment:
    """Return the jinja2 environment with autoescaping and the number filters."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = format_percent
    env.filters["num"] = format_number
    return env


def _finite(value) -> bool:
    """Return True if ``value`` is a real, finite number."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def format_percent(value, digits: int = 2) -> str:
    """Format a fraction in [0, 1] as a percentage, or an em dash if it is missing."""
    return f"{value * 100:.{digits}f}%" if _finite(value) else "—"


def format_number(value, digits: int = 3) -> str:
    """Format a number with ``digits`` decimals, or an em dash if it is missing."""
    return f"{value:.{digits}f}" if _finite(value) else "—"


def rank_rows(rows: list[dict], value_key: str = "value") -> list[dict]:
    """Return ``rows`` best first, each with a competition rank ("1, 2, 2, 4").

    The direction comes from each row's ``higher_is_better``; rows without a value come last
    and get no rank.
    """

    def order(row):
        value = row.get(value_key)
        if not _finite(value):
            return (1, 0.0)
        return (0, -value if row.get("higher_is_better", True) else value)

    ranked = sorted(rows, key=order)
    previous, rank = None, 0
    for position, row in enumerate(ranked, start=1):
        key = order(row)
        if key[0] == 1:
            row["rank"] = None
            continue
        if key != previous:
            rank, previous = position, key
        row["rank"] = rank
    return ranked


def _interval_bar(low, high) -> Optional[dict]:
    """Return left/width percentages of the [low, high] accuracy interval, clamped to [0, 100]."""
    if not (_finite(low) and _finite(high)):
        return None
    low, high = sorted((low, high))
    left = min(max(low * 100, 0.0), 100.0)
    right = min(max(high * 100, 0.0), 100.0)
    # A zero-width interval would vanish; keep a hairline so the reader still sees where it is.
    return {"left": round(left, 2), "width": round(max(right - left, 0.4), 2)}


def _rho_tables(scores: list[dict]) -> list[dict]:
    """Return one ranked table per clusterer from the rho metric's sub-scores."""
    by_group: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for s in scores:
        if s["metric"] == RHO_METRIC and s["score"] in RHO_SCORES:
            by_group[(s["clusterer"], s["model"])][s["score"]] = s

    by_clusterer: dict[str, list[dict]] = defaultdict(list)
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
            "rows": rank_rows(sorted(rows, key=lambda r: r["model"])),
        }
        for clusterer, rows in sorted(by_clusterer.items())
    ]


def _other_scores(scores: list[dict]) -> list[dict]:
    """Return every score not shown in the rho tables, ranked within (metric, score, clusterer)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in scores:
        if s["metric"] == RHO_METRIC and s["score"] in RHO_SCORES:
            continue
        if s["metric"] in (PURITY_METRIC, COVERAGE_METRIC):  # shown in their own tables
            continue
        groups[(s["metric"], s["score"], s["clusterer"])].append(dict(s))
    rows: list[dict] = []
    for _, group in sorted(groups.items()):
        rows.extend(rank_rows(sorted(group, key=lambda r: r["model"])))
    return rows


def _purity_ratio(scores: list[dict]) -> dict:
    """Return the purity-ratio model table (ranked) and validation tables of one data set."""
    from robench.builtin.clusterability import leaderboard_tables

    tables = leaderboard_tables(scores)
    if tables:
        tables["models"] = rank_rows(sorted(tables["models"], key=lambda r: r["model"]))
    return tables


def _coverage(scores: list[dict]) -> dict:
    """Return the coverage model table (ranked by coverage-guided accuracy) of one data set."""
    from robench.builtin.coverage import leaderboard_tables, mix_order

    tables = leaderboard_tables(scores)
    if not tables:
        return {}
    models = rank_rows(sorted(tables["models"], key=lambda r: r["model"]))
    mixes = mix_order({m for r in models for m in r["mixes"]})
    sizes = sorted({int(s) for r in models for t in r["table"].values() for s in t})
    knobs = next((r["knobs"] for r in models if r["knobs"]), {})
    text = ", ".join(f"{k} = {v}" for k, v in knobs.items() if k in ("radius", "theta1",
                                                                       "theta2", "step"))
    size = next((r["size"] for r in models if r["size"]), None)
    return {"models": models, "mixes": mixes, "sizes": sizes, "size": size or "the largest set of",
            "knobs": f"Settings of these scores: {text}" if text else "Settings: see details"}


def _definitions(scores: list[dict]) -> list[dict]:
    """Return each distinct (metric, version, definition) that produced a stored score."""
    seen = {(s["metric"], s["metric_version"] or "", s["definition"] or "") for s in scores}
    return [
        {"metric": metric, "version": version, "definition": definition}
        for metric, version, definition in sorted(seen)
    ]


def _not_applicable(skips: list[dict], rows: list[dict]) -> list[dict]:
    """Return the data set's recorded skips that no stored score contradicts, summarized."""
    scored = {(r["model"], r.get("clusterer") or "", r["metric"]) for r in rows}
    live = [s for s in skips if (s["model"], s["clusterer"], s["metric"]) not in scored]
    return summarize_skips(live)


def leaderboard_context(scores: list[dict], runs: Iterable[dict],
                        skips: Iterable[dict] = ()) -> dict:
    """Return the template context for score rows, the runs that produced them and the skips.

    ``skips`` are the stored combinations that could not apply (store ``skips`` table); each data
    set lists those without a score (a later run may have scored what an earlier one skipped).
    """
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for s in scores:
        by_dataset[s["dataset"]].append(s)
    skips_by_dataset: dict[str, list[dict]] = defaultdict(list)
    for s in skips:
        if s["dataset"] in by_dataset:
            skips_by_dataset[s["dataset"]].append(s)
    datasets = [
        {
            "name": name,
            "rho_tables": _rho_tables(rows),
            "other_scores": _other_scores(rows),
            "purity": _purity_ratio(rows),
            "coverage": _coverage(rows),
            "not_applicable": _not_applicable(skips_by_dataset[name], rows),
        }
        for name, rows in sorted(by_dataset.items())
    ]
    return {
        "datasets": datasets,
        "definitions": _definitions(scores),
        "runs": sorted(runs, key=lambda r: r["id"]),
        "n_scores": len(scores),
    }


def build_leaderboard(store: Store, out_dir) -> Path:
    """Write the leaderboard for every score in ``store`` to ``out_dir/index.html``; return it."""
    scores = store.scores()
    run_ids = sorted({s["run_id"] for s in scores if s.get("run_id") is not None})
    runs = store.runs(run_ids) if run_ids else []
    html = _environment().get_template("leaderboard.html").render(
        **leaderboard_context(scores, runs, store.skips())
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    return path
