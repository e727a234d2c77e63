"""The leaderboard's shared pieces: number formats, ranking, and the jinja2 environment.

Accuracies are stored as fractions in [0, 1] and shown as percentages. Each registered metric
with a :class:`robench.specs.LeaderboardSection` supplies its own part of every data set's
page (a context builder and a jinja2 template found through a loader chain).
:func:`robench.present.site.build_site` writes the static site from these pieces.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe

from robench.present.formatting import is_finite, percent
from robench.present.skips import summarize_skips
from robench.stats.intervals import tie_ranks
from robench.storage.store import Store

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def environment(sections: dict) -> jinja2.Environment:
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
    # The site (robench.present.site) replaces these two: a model's name links to its page and a
    # decoded image becomes a file; here a name is text and an image stays inline.
    env.filters["model"] = markupsafe.escape
    env.filters["png_src"] = lambda png: f"data:image/png;base64,{png}"
    return env


def format_percent(value, digits: int = 2) -> str:
    """Format a fraction in [0, 1] as a percentage, or an em dash if it is missing."""
    return percent(value, digits)


def format_number(value, digits: int = 3) -> str:
    """Format a number with ``digits`` decimals, or an em dash if it is missing."""
    return f"{value:.{digits}f}" if is_finite(value) else "—"


def rank_rows(rows: list[dict], value_key: str = "value") -> list[dict]:
    """Return ``rows`` best first, each with a competition rank ("1, 2, 2, 4").

    The direction comes from each row's ``higher_is_better``; rows without a value come last
    and get no rank.
    """

    def order(row):
        value = row.get(value_key)
        if not is_finite(value):
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


def tie_ranked(rows: list) -> list:
    """Return ``rows`` (best first) re-ranked so that overlapping intervals share a rank.

    :func:`robench.stats.intervals.tie_ranks`: a model whose 95% interval overlaps its block
    leader's takes the leader's rank (1, 1, 3, ...), so the table does not print an order the
    repeats cannot decide. ``tied`` marks a row that shares its rank. A table run with
    ``--until decided`` takes the ranks its pair decisions gave (``details.adaptive.rank``:
    a new rank only after an ordered pair).
    """
    higher = all(r.get("higher_is_better", True) for r in rows)
    ranks = tie_ranks([r["value"] for r in rows], [r["ci_low"] for r in rows],
                      [r["ci_high"] for r in rows], higher_is_better=higher)
    if rows and all((r.get("adaptive") or {}).get("rank") is not None for r in rows):
        # --until decided: ranks from the paired decisions of adjacent models (robench.stats.sequential)
        ranks = [r["adaptive"]["rank"] for r in rows]
    counts: dict = defaultdict(int)
    for rank in ranks:
        counts[rank] += 1
    for row, rank in zip(rows, ranks):
        row["rank"] = rank
        row["tied"] = rank is not None and counts[rank] > 1
    return rows


def not_applicable(skips: list[dict], rows: list[dict]) -> list[dict]:
    """Return the data set's recorded skips that no stored score contradicts, summarized."""
    scored = {(r["model"], r.get("clusterer") or "", r["metric"]) for r in rows}
    live = [s for s in skips if (s["model"], s["clusterer"], s["metric"]) not in scored]
    return summarize_skips(live)


def registered_sections(registry) -> dict:
    """Return {metric name: LeaderboardSection} of the registered metrics, in display order."""
    metrics = sorted((m for m in registry.all("metrics") if m.leaderboard is not None),
                     key=lambda m: (m.display_order, m.name))
    return {m.name: m.leaderboard for m in metrics}


def chosen_configurations(store: Store, config: Optional[str] = None) -> tuple[list, dict]:
    """Return (the scores the leaderboard shows, {(dataset, metric): Choice}).

    One configuration per table (:func:`robench.run.configurations.choose`: the one covering the
    most models x clusterers, ties to the latest; ``config`` picks one by id, prefix, label
    or 'legacy'). ``Choice.label`` and ``Choice.text`` say which one a table shows.
    """
    from robench.run.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations

    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    return table_configurations(store.scores(), labels, resolve(config, labels))
