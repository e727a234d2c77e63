"""The headline summary ``robench run`` ends with: per data set one line per model.

Built from the metrics' leaderboard headlines, so every value, rank and interval is the one
the families' tables show; the rank column is the first headline with a ``rule``.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from typing import Optional

from robench.present.formatting import (as_dict, fixed, interval_label, is_finite, percent,
                                        printable, why_not)

#: Columns when stdout is not a terminal (a pipe, a log file).
DEFAULT_WIDTH = 100
#: Narrowest width the summary lays itself out for.
MIN_WIDTH = 40


def output_width(stream=None) -> int:
    """Return the terminal's width when ``stream`` (default stdout) is one, else 100."""
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns) if tty \
        else DEFAULT_WIDTH


def wrap(text: str, width: int, indent: str = "", subsequent: Optional[str] = None) -> list:
    """Return ``text`` wrapped to ``width`` columns (words longer than a line are split)."""
    return textwrap.wrap(text, max(width, MIN_WIDTH // 2), initial_indent=indent,
                         subsequent_indent=indent + "  " if subsequent is None else subsequent,
                         break_on_hyphens=False) or [indent.rstrip()]


def fit(text: str, width: int) -> str:
    """Return ``text`` cut to ``width`` columns, a cut marked by "~"."""
    return text if len(text) <= width else text[:max(width - 1, 0)] + "~"


def _direction(head: dict, rows: list, metric: str):
    """Return whether a headline's higher values are better (None: unknown)."""
    found = next((r["higher_is_better"] for source in (
        head.get("rows") or [], [r for r in rows if r.get("score") == metric], rows)
        for r in source if isinstance(r, dict) and r.get("higher_is_better") is not None), None)
    return None if found is None else bool(found)


def _heads(rows: list, sections: dict) -> list:
    """Return the headline columns of one data set's rows, each with its ``why_empty``."""
    heads = []
    for metric, section in sections.items():
        mine = [r for r in rows if r["metric"] == metric]
        if getattr(section, "headline", None) is None or not mine:
            continue
        try:
            head = section.headline(mine)
        except Exception:  # noqa: BLE001 - a value its family cannot read: -v shows the report
            continue
        if isinstance(head, dict) and head.get("rows"):
            heads.append({"metric": metric, "label": str(head.get("label") or metric),
                          "format": head.get("format", "num"), "rule": head.get("rule") or "",
                          "rows": head["rows"], "pairs": head.get("pairs") or [],
                          "by_model": {r["model"]: r for r in head["rows"]},
                          "higher_is_better": _direction(head, mine, metric),
                          "baseline": str(head.get("baseline") or ""),
                          # the first reason a score row gives for having no value
                          "why_empty": "" if any(is_finite(r.get("value")) for r in head["rows"])
                          else next((w for w in (why_not(as_dict(r.get("details")))
                                                 for r in mine) if w), "no value stored")})
    return heads


def _value(v, fmt: str) -> str:
    return percent(v, 1, missing="-") if fmt == "pct" else fixed(v, width=0)


def _ranked_cell(row: dict, fmt: str) -> str:
    """Return the rank column's value with its interval as the family's table shows it."""
    value = _value(row.get("value"), fmt)
    interval = row.get("interval")
    if not interval and is_finite(row.get("ci_low")) and is_finite(row.get("ci_high")):
        interval = f"[{_value(row['ci_low'], fmt)}, {_value(row['ci_high'], fmt)}]"
    return f"{value} {interval}" if interval and value != "-" else value


def rank_text(row: Optional[dict]) -> str:
    """Return a rank as the tables show it: "1-3" (its interval), "1", "1=" (shared), "-"."""
    if row is None or row.get("rank") is None:
        return "-"
    if row.get("rank_interval"):
        return str(row["rank_interval"])
    return f"{row['rank']}{'=' if row.get('tied') else ''}"


def _ordered(a: dict, b: dict) -> bool:
    """Return whether the rank column orders ``a`` above ``b`` (intervals apart, or ranks)."""
    if a.get("rank_worst") is not None and b.get("rank_best") is not None:
        return a["rank_worst"] < b["rank_best"]
    return a["rank"] != b["rank"]


def dataset_table(dataset: str, rows: list, sections: dict, models=None) -> Optional[dict]:
    """Return one data set's summary table, or None when no metric has a headline."""
    every = _heads(rows, sections)
    # a column no model has a value in (its metric measured nothing here: e.g. a --budget
    # spent before its trials ran) is not drawn as a column of dashes: its line says why
    heads = [h for h in every if not h["why_empty"]]
    empty = [h for h in every if h["why_empty"]]
    ranked = next((h for h in heads if h["rule"]), None)
    names = {m for h in heads for m in h["by_model"]}
    if models is not None:
        names &= set(models)
    if not names and not empty:
        return None
    others = [h for h in heads if h is not ranked]
    # by position in the rank column, then in the other columns
    positions = [{r["model"]: i for i, r in enumerate(h["rows"])}
                 for h in ([ranked] if ranked else []) + others]
    order = sorted(names, key=lambda m: ([p.get(m, 10 ** 9) for p in positions], str(m)))
    ordered, pairs = _decided(ranked, names) if ranked else (0, 0)
    return {"dataset": dataset, "ranked": ranked, "others": others,
            "empty": empty, "models": order, "ordered": ordered, "pairs": pairs,
            "unranked": [m for m in order if ranked and m in ranked["by_model"]
                         and ranked["by_model"][m].get("rank") is None]}


def _decided(ranked: dict, names: set) -> tuple[int, int]:
    """Return (pairs decided, pairs) of the rank column among the models ``names``."""
    if ranked.get("pairs"):
        tested = [p for p in ranked["pairs"] if set(p.get("pair") or ()) <= names]
        return sum(1 for p in tested if p.get("status") in ("ordered", "equivalent")), len(tested)
    ranks = [r for r in ranked["rows"] if r.get("model") in names and r.get("rank") is not None]
    return sum(1 for a, b in zip(ranks, ranks[1:]) if _ordered(a, b)), max(len(ranks) - 1, 0)


def table_lines(table: dict, width: int) -> list:
    """Return a data set's summary table as lines no wider than ``width``."""
    models = [printable(m) for m in table["models"]]
    cells = _cells(table, models)
    return ([fit(printable(table["dataset"]), width)]
            + (_grid(table, cells, models, width) if cells else []) + _footer(table, width))


def _cells(table: dict, models: list) -> list:
    """Return per model the text of its cells: [rank, model, ranked value, other values...]."""
    ranked, others = table["ranked"], table["others"]
    cells = []
    for name, model in zip(models, table["models"]):
        hit = ranked["by_model"].get(model) if ranked else None
        row = [rank_text(hit), name, _ranked_cell(hit, ranked["format"]) if hit else "-"] \
            if ranked else ["", name]
        for h in others:
            hit = h["by_model"].get(model)
            # a column ranked by its own tested pairs shows that rank interval
            row.append((_value(hit.get("value"), h["format"]) if hit else "-")
                       + (f" ({hit['rank_interval']})" if hit and hit.get("rank_interval") else ""))
        cells.append(row)
    return cells


def _labels(table: dict, cells: list) -> list:
    """Return the value columns' labels, with the interval level or "(rank)" they show."""
    ranked = table["ranked"]
    first = 3 if ranked else 2  # where the other columns start in a row of cells
    labels = ([f"{ranked['label']}" + (f" [{interval_label(ranked['rows'])}]" if any(
        "[" in c[2] for c in cells) else "")] if ranked else []) + [
        h["label"] + (" (rank)" if any(c[first + j].endswith(")") for c in cells) else "")
        for j, h in enumerate(table["others"])]
    return [printable(label) for label in labels]


def _grid(table: dict, cells: list, models: list, width: int) -> list:
    """Return the header line and one line per model of a summary table's cells."""
    ranked = table["ranked"]
    labels = _labels(table, cells)
    value_widths = [max([len(label)] + [len(c[2 + i]) for c in cells])
                    for i, label in enumerate(labels)]
    rank_w = max([len(c[0]) for c in cells] + [len("rank")]) if ranked else 0
    name_w = max([len(m) for m in models] + [len("model")])
    lead = (rank_w + 1 if ranked else 0)  # the rank column and its space

    def total(n_values, nw):
        return 2 + lead + nw + sum(2 + w for w in value_widths[:n_values])

    shown = len(labels)
    min_name = min(name_w, 12)
    note = lambda n: f"  (+{len(labels) - n})" if n < len(labels) else ""  # noqa: E731
    while shown > 1 and total(shown, min_name) + len(note(shown)) > width:
        shown -= 1  # a very narrow terminal: the last columns go, counted on the header
    name_w = max(min_name, min(name_w, width - total(shown, 0)))

    def line(rank: str, name: str, values: list, after: str = "") -> str:
        text = "  " + (rank.rjust(rank_w) + " " if ranked else "") + fit(name, name_w).ljust(
            name_w) + "".join("  " + v.rjust(w) for v, w in zip(values[:shown], value_widths))
        return fit((text + after).rstrip(), width)

    return [line("rank", "model", labels, note(shown))] + [line(c[0], c[1], c[2:]) for c in cells]


def _footer(table: dict, width: int) -> list:
    """Return the lines after a summary table: models without a rank, headlines without values."""
    lines = []
    if table["unranked"]:  # why "-": the rank column's own reason, on one line
        first = table["ranked"]["by_model"][table["unranked"][0]]
        why = printable(first.get("unranked") or "no rank given")
        lines.append(fit(f"  - not ranked: {', '.join(printable(m) for m in table['unranked'])}"
                         f" ({why})", width))
    for h in table.get("empty") or ():
        lines += wrap(f"{printable(h['label'])}: no value for any model, so no column "
                      f"({printable(h['why_empty'])})", width, indent="  ")
    return lines


def columns_text(tables: list) -> str:
    """Return what the summary's columns are: the rank's source, directions, baselines."""
    seen: dict = {}
    for h in (h for t in tables for h in ([t["ranked"]] if t["ranked"] else []) + t["others"]):
        label, hib = printable(h["label"]), h.get("higher_is_better")
        seen.setdefault(label, label + (
            (": higher is better" if hib else ": lower is better") if hib is not None else "")
            + (f", relative to the baseline model '{printable(h['baseline'])}' (= 1)"
               if h.get("baseline") else ""))
    if not seen:
        return ""
    rank_of = next((t["ranked"]["label"] for t in tables if t["ranked"] and t["ranked"]["label"]),
                   "")
    return ("Columns: " + (f"rank = the {printable(rank_of)} column's rank from every tested "
                           "pair; " if rank_of else "") + "; ".join(seen.values()) + ".")


def not_run_text(metrics, rows: list, *, budget_spent: bool = False) -> str:
    """Return a sentence naming the ``metrics`` without a score in ``rows`` and why ("" if none)."""
    scored = {r.get("metric") for r in rows}
    missing = [m for m in dict.fromkeys(metrics or ()) if m not in scored]
    if not missing:
        return ""
    names = ", ".join(printable(m) for m in missing)
    if budget_spent:
        return (f"Not run: {names} (the time budget was spent before enough of their trials "
                "ran to give a score; a larger --budget runs them, stored trials are reused).")
    return f"No score: {names} (no combination of theirs applied; -v lists the skips)."


def summary_lines(rows: list, sections: dict, *, models=None, width: int = DEFAULT_WIDTH,
                  metrics=None, budget_spent: bool = False) -> dict:
    """Return ``{"lines", "tables", "rest"}``: the summary's lines, its tables
    (:func:`dataset_table`) and {data set: [metrics with scores but no headline column]}."""
    lines, tables, rest = [], [], {}
    for dataset, mine in sorted(_by_dataset(rows).items(), key=lambda item: str(item[0])):
        table = dataset_table(dataset, mine, sections, models)
        if table is not None:
            tables.append(table)
            lines += table_lines(table, width)
        shown = {h["metric"] for h in ((table["ranked"], *table["others"], *table["empty"])
                                       if table else ()) if h}
        others = sorted({r["metric"] for r in mine} - shown, key=str)
        if others:
            rest[dataset] = others
    for text in (columns_text(tables), not_run_text(metrics, rows, budget_spent=budget_spent)):
        if text:
            lines += wrap(text, width)
    return {"lines": lines, "tables": tables, "rest": rest}


def _by_dataset(rows: list) -> dict:
    by_dataset: dict = {}
    for r in rows:
        by_dataset.setdefault(r["dataset"], []).append(r)
    return by_dataset


def has_summary(rows: list, sections: dict, models=None) -> bool:
    """Return whether any data set of ``rows`` has a headline column to summarize."""
    return any(dataset_table(d, mine, sections, models) is not None
               for d, mine in _by_dataset(rows).items())


def decided_text(tables: list) -> str:
    """Return what the rank columns decided: pairs ordered or equivalent, per data set."""
    ranked = [t for t in tables if t["ranked"] and t["pairs"]]
    if not ranked:
        return ""
    ordered, pairs = sum(t["ordered"] for t in ranked), sum(t["pairs"] for t in ranked)
    each = ", ".join(f"{t['dataset']} {t['ordered']}/{t['pairs']}" for t in ranked)
    label = ranked[0]["ranked"]["label"]
    if any(t["ranked"].get("pairs") for t in ranked):
        return (f"Decided by {label}: {ordered} of {pairs} pairs ordered or equivalent "
                f"({each}; \"1-3\" is the ranks a model can hold given every tested pair).")
    return (f"Decided by {label}: {ordered} of {pairs} adjacent pairs ordered ({each}; "
            "\"1=\" is a shared rank).")
