"""The leaderboard's shared pieces: number formats, ranking, and the jinja2 environment.

Accuracies are stored as fractions in [0, 1] and shown as percentages.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe

from robench.present.formatting import is_finite, percent
from robench.present.skips import summarize_skips
from robench.storage.store import Store
from robench.run.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations
from robench.run.ranking import NOT_COMPUTED, STORED as _STORED, stored_rankings
from robench.stats.paired import ALPHA
from robench.stats.ranks import rank_models
from robench.stats.sequential import PRECISION

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def environment(sections: dict) -> jinja2.Environment:
    """Return the jinja2 environment: autoescaping, number filters, template loaders."""
    loader = jinja2.ChoiceLoader([
        jinja2.FileSystemLoader(str(_TEMPLATES)),
        jinja2.PrefixLoader({name: jinja2.FileSystemLoader(str(section.templates))
                             for name, section in sections.items()}),
    ])
    env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = format_percent
    env.filters["num"] = format_number
    env.filters["rank_legend"] = rank_legend
    # the site replaces these two (a name links to its page, an image becomes a file)
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
    """Return ``rows`` best first with competition ranks ("1, 2, 2, 4"), no value last."""
    def order(row):
        value = row.get(value_key)
        if not is_finite(value):
            return (1, 0.0)
        return (0, -value if row.get("higher_is_better", True) else value)

    ranked = sorted(rows, key=order)
    previous, rank = None, 0
    for position, row in enumerate(ranked, start=1):
        key = order(row)
        if key[0] == 0 and key != previous:
            rank, previous = position, key
        row["rank"] = rank if key[0] == 0 else None
    return ranked


def _stored_tables(store: Store) -> list:
    """Return the stored ranks as [{model: ranking}], one per stored table."""
    tables: dict = defaultdict(dict)
    for (dataset, metric, configuration, clusterer, model), ranking in \
            stored_rankings(store).items():
        tables[(dataset, metric, configuration, clusterer)][model] = ranking
    return list(tables.values())


@contextlib.contextmanager
def reading_stored_ranks(store: Store):
    """Within it, :func:`rank_table` reads the ranks stored with the scores instead of ranking
    (every view, the site and ``robench results``, wraps its sections in it: none ranks again)."""
    token = _STORED.set(_stored_tables(store))
    try:
        yield
    finally:
        _STORED.reset(token)


def _same(a, b) -> bool:
    return (a is None and b is None) or (
        is_finite(a) and is_finite(b) and abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(a)))


def _read_stored(tables: list, rows: list) -> dict:
    """Return :func:`rank_table`'s answer for ``rows`` from the stored table of them."""
    models = {r["model"] for r in rows}

    def agrees(table):
        return models <= set(table) and all(_same(table[r["model"]].get("value"), r.get("value"))
                                             for r in rows)

    # the table of these models, else the stored table they are part of (a run of some of a
    # table's models shows their ranks in the whole table, as the site does)
    hit = next((t for t in tables if set(t) == models and agrees(t)),
               next((t for t in tables if agrees(t)), None))
    out = [_with_stored_rank(r, hit[r["model"]] if hit else None)
           for r in sorted(rows, key=lambda r: str(r["model"]))]
    if hit is None:  # nothing stored: best estimate first, as the table would list them
        higher = all(r.get("higher_is_better", True) for r in out)
        out.sort(key=lambda r: (not is_finite(r.get("value")),
                                -(r["value"] if higher else -r["value"])
                                if is_finite(r.get("value")) else 0.0))
    out.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
    pairs = list({json.dumps(p, sort_keys=True, default=str): p
                  for r in (hit or {}).values() for p in r.get("pairs") or []}.values())
    rule = next((r["rank_rule"] for r in out if r["rank_rule"]), "")
    return {"rows": out, "rule": rule, "pairs": pairs}


def _with_stored_rank(row: dict, got: Optional[dict]) -> dict:
    """Return a score row (without samples) with its stored rank ``got`` (None: said so)."""
    got = got or {"rank": None, "unranked": NOT_COMPUTED, "rule": NOT_COMPUTED}
    out = {k: v for k, v in row.items() if k != "samples"}
    out.update(rank=got.get("rank"), rank_best=got.get("rank_best"),
               rank_worst=got.get("rank_worst"), rank_interval=got.get("rank_interval"),
               tied=bool(got.get("tied")), unranked=got.get("unranked"),
               rank_rule=got.get("rule") or "")
    return out


def adaptive_of(score: dict) -> Optional[dict]:
    """Return what a raced score row says of its race for its table's ranking, or None."""
    details = score.get("details") or {}
    ad = details.get("adaptive") if isinstance(details, dict) else None
    if not isinstance(ad, dict):
        return None
    return {"repeats": ad.get("repeats"), "max_repeats": ad.get("max_repeats"),
            "stopped": ad.get("model_stopped") or ad.get("stopped"),
            "level": ad.get("level"), "alpha_look": ad.get("alpha_look"),
            "spending": ad.get("spending"), "precision": ad.get("precision"),
            "looks": len(ad.get("looks_planned") or []) or 1}


def rank_table(rows: list, margin: Optional[float] = None) -> dict:
    """Rank one table's rows by :func:`robench.stats.ranks.rank_models`; return the table.

    Rows have ``model``, ``value``, ``ci_low``, ``ci_high``, ``higher_is_better`` and where
    known ``samples`` ({repeat: value}), ``cycle`` and ``unranked``. Equivalence is within a
    race's ``adaptive.precision``, else ``margin``, else :data:`robench.stats.sequential.PRECISION`;
    returns ``{"rows", "rule", "pairs"}`` (within :func:`reading_stored_ranks`, as stored).
    """
    stored = _STORED.get()
    if stored is not None:
        return _read_stored(stored, rows)
    higher = all(r.get("higher_is_better", True) for r in rows)
    adaptive = [r.get("adaptive") for r in rows if isinstance(r.get("adaptive"), dict)]
    precision = next((a["precision"] for a in adaptive if a.get("precision")),
                     PRECISION if margin is None else margin)
    # a race's tests at the alpha its table's stopping look spent (the smallest where models
    # stopped at different looks); a score of an older race split alpha over its looks
    spent = [float(a["alpha_look"]) for a in adaptive if a.get("alpha_look")]
    looks = max((int(a.get("looks") or 1) for a in adaptive), default=1)
    alpha = min(spent) if spent else ALPHA / looks
    out = rank_models(sorted(rows, key=lambda r: str(r["model"])), higher_is_better=higher,
                      precision=precision, alpha=alpha if adaptive else ALPHA)
    ranked, rule = out["rows"], out["rule"]
    if adaptive:
        how = (f"alpha spent across a look at every complete cycle ({adaptive[0]['spending']}), "
               f"the stopping look's alpha {alpha:.4f}" if spent else
               f"{looks} planned looks, every test at the level corrected for the looks")
        rule += f"; adaptive repeats (--until decided, {how}), R = repeats used"
    for r in ranked:
        r.pop("samples", None)
        r["rank_rule"] = rule
    return {"rows": ranked, "rule": rule, "pairs": out["pairs"]}


def rank_legend(rules) -> str:
    """Return the one legend of ranks every view shows, with the tables' rules."""
    distinct = list(dict.fromkeys(str(r).strip().rstrip(".") for r in rules if r))
    return ("A rank such as 1-2 is the ranks a model can hold given every tested pair (1 + the "
            "models shown better, to the number ranked - the models shown worse); a single "
            "rank is decided; a model without a rank (—) says why beside it, e.g. at chance "
            "(its score is shown but not ranked)."
            + (" Ranked by: " + "; ".join(distinct) + "." if distinct else ""))


def attach_ranks(store: Store, rows: list, sections: dict) -> None:
    """Add the stored ``ranking`` to each headline score row, in place."""
    stored = stored_rankings(store)
    for r in rows:
        if r.get("score") != r["metric"]:
            continue
        hit = stored.get((r["dataset"], r["metric"], r.get("configuration"),
                          r.get("clusterer") or "", r["model"]))
        if hit is not None:
            r["ranking"] = dict(hit)
        elif not stored and getattr(sections.get(r["metric"]), "ranks", None) is not None:
            r["ranking"] = {"rank": None, "unranked": NOT_COMPUTED}


def not_applicable(skips: list[dict], rows: list[dict]) -> list[dict]:
    """Return the data set's recorded skips that no stored score contradicts, summarized."""
    scored = {(r["model"], r.get("clusterer") or "", r["metric"]) for r in rows}
    return summarize_skips([s for s in skips
                            if (s["model"], s["clusterer"], s["metric"]) not in scored])


def registered_sections(registry) -> dict:
    """Return {metric name: LeaderboardSection} of the registered metrics, in display order."""
    metrics = sorted((m for m in registry.all("metrics") if m.leaderboard is not None),
                     key=lambda m: (m.display_order, m.name))
    return {m.name: m.leaderboard for m in metrics}


def chosen_configurations(store: Store, config: Optional[str] = None,
                          **filters) -> tuple[list, dict]:
    """Return (the scores each table shows, with their ``configuration_label``, {(dataset,
    metric): Choice}); the choice is made over all models of a table."""
    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    rows, choices = table_configurations(store.scores(**filters), labels,
                                         resolve(config, labels))
    for row in rows:
        row["configuration_label"] = labels.get(row["configuration"], row["configuration"])
    return rows, choices
