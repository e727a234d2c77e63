"""Render the stored scores as one static, self-contained HTML leaderboard page.

The page has no scripts and no external resources, so it works from ``file://`` and from any
static host. Accuracies are stored as fractions in [0, 1] and shown as percentages. Each
registered metric with a :class:`robench.specs.LeaderboardSection` supplies its own part of
every data set's section (a context builder and a jinja2 template found through a loader
chain); the scores of every other metric go to a generic, ranked table.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Optional

import jinja2
import markupsafe

from robench.skips import summarize_skips
from robench.store import Store

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment(sections: dict) -> jinja2.Environment:
    """Return the jinja2 environment: autoescaping, the number filters, and a loader chain of
    the core templates and, under ``<metric>/``, each metric section's template folder."""
    loader = jinja2.ChoiceLoader([
        jinja2.FileSystemLoader(str(_TEMPLATES)),
        jinja2.PrefixLoader({name: jinja2.FileSystemLoader(str(section.templates))
                             for name, section in sections.items()}),
    ])
    env = jinja2.Environment(
        loader=loader,
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


def _other_scores(scores: list[dict]) -> list[dict]:
    """Return scores ranked within (metric, score, clusterer): those without their own section."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in scores:
        groups[(s["metric"], s["score"], s["clusterer"])].append(dict(s))
    rows: list[dict] = []
    for _, group in sorted(groups.items()):
        rows.extend(rank_rows(sorted(group, key=lambda r: r["model"])))
    return rows


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


def _sections(registry) -> dict:
    """Return {metric name: LeaderboardSection} of the registered metrics, in display order."""
    metrics = sorted((m for m in registry.all("metrics") if m.leaderboard is not None),
                     key=lambda m: (m.display_order, m.name))
    return {m.name: m.leaderboard for m in metrics}


def chosen_configurations(store: Store, config: Optional[str] = None) -> tuple[list, dict]:
    """Return (the scores the leaderboard shows, {(dataset, metric): Choice}).

    One configuration per table (:func:`robench.configurations.choose`: the one covering the
    most models x clusterers, ties to the latest; ``config`` picks one by id, prefix, label
    or 'legacy'). ``Choice.label`` and ``Choice.text`` say which one a table shows.
    """
    from robench.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations

    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    return table_configurations(store.scores(), labels, resolve(config, labels))


def leaderboard_context(scores: list[dict], runs: Iterable[dict], skips: Iterable[dict] = (),
                        registry=None, env: Optional[jinja2.Environment] = None,
                        choices: Optional[dict] = None) -> dict:
    """Return the template context for score rows, the runs that produced them and the skips.

    Every registered metric with a leaderboard section renders its part of each data set
    (``ds["sections"]``: title, metric and ``html``); the scores of other metrics (no section,
    or not registered here) go to ``ds["other_scores"]``. ``skips`` are the stored
    combinations that could not apply; each data set lists those without a score (a later run
    may have scored what an earlier one skipped). ``choices`` ({(dataset, metric): Choice},
    from :func:`chosen_configurations`) label each data set's tables (``ds["configurations"]``).
    """
    if registry is None:
        from robench.plugins import get_registry

        registry = get_registry()
    sections = _sections(registry)
    env = env or _environment(sections)
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for s in scores:
        by_dataset[s["dataset"]].append(s)
    skips_by_dataset: dict[str, list[dict]] = defaultdict(list)
    for s in skips:
        if s["dataset"] in by_dataset:
            skips_by_dataset[s["dataset"]].append(s)
    datasets = []
    for name, rows in sorted(by_dataset.items()):
        parts, shown = [], set()
        for metric, section in sections.items():
            mine = [r for r in rows if r["metric"] == metric]
            context = section.build(mine) if mine else None
            if not context:
                continue
            template = env.get_template(f"{metric}/{section.template}")
            html = template.render(section=context, dataset=name,
                                   metric=registry.get("metrics", metric))
            parts.append({"metric": metric, "title": section.title, "context": context,
                          "html": markupsafe.Markup(html)})
            shown.add(metric)
        datasets.append({
            "name": name,
            "sections": parts,
            "other_scores": _other_scores([r for r in rows if r["metric"] not in shown]),
            "not_applicable": _not_applicable(skips_by_dataset[name], rows),
            "configurations": [{"metric": c.metric, "label": c.label, "text": c.text}
                               for (d, _), c in sorted((choices or {}).items()) if d == name],
        })
    return {
        "datasets": datasets,
        "definitions": _definitions(scores),
        "runs": sorted(runs, key=lambda r: r["id"]),
        "n_scores": len(scores),
    }


def build_leaderboard(store: Store, out_dir, registry=None, config: Optional[str] = None) -> Path:
    """Write the leaderboard of ``store``'s scores to ``out_dir/index.html``; return it.

    Each table shows one configuration (see :func:`chosen_configurations`).
    """
    if registry is None:
        from robench.plugins import get_registry

        registry = get_registry()
    scores, choices = chosen_configurations(store, config)
    run_ids = sorted({s["run_id"] for s in scores if s.get("run_id") is not None})
    runs = store.runs(run_ids) if run_ids else []
    env = _environment(_sections(registry))
    html = env.get_template("leaderboard.html").render(
        **leaderboard_context(scores, runs, store.skips(), registry=registry, env=env,
                              choices=choices)
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(html, encoding="utf-8")
    return path
