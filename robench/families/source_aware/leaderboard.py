"""Leaderboard section of the rho metric: one ranked table per clusterer with the interval."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Optional

from robench.families.source_aware.adequacy import METRIC as ADEQUACY
from robench.families.source_aware.rho import MARGIN
from robench.present.formatting import interval_label, interval_text, is_finite
from robench.metric_kit import score_index
from robench.specs import LeaderboardSection
from robench.stats.ranks import chance_level, chance_reason, equivalence_margin

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
#: What the overview's legend says about this family's headline column.
LEGEND = ("rho = E[AccX]/E[AccI] (robustness to unseen sources; 1 means no loss), shown beside "
          "E[AccX], E[AccI] and the random-split accuracy it comes from")
RHO_SCORES = ("rho", "acc_exclusive", "acc_inclusive", "acc_random")


def _interval_bar(low, high) -> Optional[dict]:
    """Return left/width percentages of the [low, high] accuracy interval, clamped to [0, 100]."""
    if not (is_finite(low) and is_finite(high)):
        return None
    left, right = (min(max(v * 100, 0.0), 100.0) for v in sorted((low, high)))
    # A zero-width interval would vanish; keep a hairline so the reader still sees where it is.
    return {"left": round(left, 2), "width": round(max(right - left, 0.4), 2)}


def rho_samples(details: dict) -> Optional[dict]:
    """Return a rho score's {repeat: (AccX_r, AccI_r)} (None where its repeats are unknown:
    scores before issue 28 list them by position, which are the repeats if no trial failed)."""
    xs, is_ = details.get("acc_exclusive"), details.get("acc_inclusive")
    if not (isinstance(xs, list) and isinstance(is_, list)):
        return None
    rx, ri = details.get("repeats_exclusive"), details.get("repeats_inclusive")
    if not (isinstance(rx, list) and isinstance(ri, list)):
        if details.get("n_failed"):
            return None
        rx, ri = list(range(len(xs))), list(range(len(is_)))
    x, i = dict(zip(rx, xs)), dict(zip(ri, is_))
    return {r: (x[r], i[r]) for r in x if r in i}


def rho_chance(details: dict) -> tuple:
    """Return (chance accuracy, its basis) of a rho score's inclusive test sets."""
    chance = details.get("chance")
    if isinstance(chance, dict) and is_finite(chance.get("level")):
        return chance["level"], chance.get("basis") or ""
    k = len(details.get("per_class") or [])
    if not k:
        return None, "the number of classes is not recorded"
    level, basis = chance_level(k)
    return level, basis + (" (this score records no majority-class rate: scored before "
                           "issue 28; `robench run --rescore` records it for trials that kept "
                           "their test sets' class counts)")


def at_chance(rho: dict, inclusive: dict) -> Optional[str]:
    """Return why a model takes no rank on rho: E[AccI]'s interval does not exclude chance
    (then rho ~ 1 would top the table; docs/leaderboard.md)."""
    details = rho.get("details") if isinstance(rho.get("details"), dict) else {}
    chance, basis = rho_chance(details)
    inc_details = inclusive.get("details") if isinstance(inclusive.get("details"), dict) else {}
    return chance_reason(inclusive.get("value"), inclusive.get("ci_low"),
                         inclusive.get("ci_high"), chance, basis,
                         values=inc_details.get("per_repeat") or details.get("acc_inclusive")
                         or (),
                         interval_reason=(inc_details.get("interval") or {}).get("reason"))


def _rho_row(model: str, parts: dict) -> dict:
    """Return one model's row of a rho table from its {sub-score: score row}."""
    from robench.present.leaderboard import adaptive_of

    rho, inc = parts["rho"], parts.get("acc_inclusive") or {}
    acc_x, acc_i, acc_r = ((parts.get(f"acc_{k}") or {}).get("value")
                           for k in ("exclusive", "inclusive", "random"))
    details = rho.get("details") if isinstance(rho.get("details"), dict) else {}
    text, note = interval_text(rho["ci_low"], rho["ci_high"], floor=0.0,
                               reason=(details.get("interval") or {}).get("reason")
                               or details.get("missing"))
    held_out = details.get("held_out")
    cycle = held_out.get("cycle") if isinstance(held_out, dict) else None
    if note is None and cycle and is_finite(rho["n"]) and 0 < rho["n"] < cycle:
        # 3 repeats of 5 sources: svm's digits interval [0.881, 0.959] excluded its own
        # 6-repeat estimate 0.874 (issue 49)
        note = (f"from {rho['n']} repeat(s), which complete no rotation of the held-out "
                f"sources (a cycle is {cycle} repeats): sources not yet held out are not in "
                "this interval, which may miss the value whole cycles give")
    return {"model": model, "value": rho["value"], "ci_low": rho["ci_low"],
            "ci_high": rho["ci_high"], "interval": text, "interval_note": note, "n": rho["n"],
            "adaptive": adaptive_of(rho), "higher_is_better": rho["higher_is_better"],
            "samples": rho_samples(details), "cycle": cycle,
            "unranked": at_chance(rho, inc), "acc_exclusive": acc_x, "acc_inclusive": acc_i,
            "acc_random": acc_r, "acc_inclusive_low": inc.get("ci_low"),
            "acc_inclusive_high": inc.get("ci_high"), "bar": _interval_bar(acc_x, acc_i),
            "random_mark": (round(min(max(acc_r * 100, 0.0), 100.0), 2)
                            if is_finite(acc_r) else None)}


def rho_tables(scores: list) -> list:
    """Return one ranked table per clusterer from the rho metric's sub-scores (ties within
    :data:`MARGIN`; no rank, and ``unranked`` says why, where E[AccI] is not above chance)."""
    from robench.present.leaderboard import rank_table

    by_group = score_index([s for s in scores if s["score"] in RHO_SCORES], "rho",
                           by=(("clusterer", "model"),))
    by_clusterer: dict = defaultdict(list)
    for (clusterer, model), parts in by_group.items():
        if parts.get("rho") is not None:
            by_clusterer[clusterer].append(_rho_row(model, parts))
    tables = []
    for clusterer, rows in sorted(by_clusterer.items()):
        ranked = rank_table(rows, margin=equivalence_margin("rho", MARGIN))
        tables.append({"clusterer": clusterer or "(none)", "rows": ranked["rows"],
                       "interval_label": interval_label(rows),
                       "rule": ranked["rule"], "pairs": ranked["pairs"],
                       "notes": [{"model": r["model"], "text": t} for r in ranked["rows"]
                                 for t in (r["unranked"], r["interval_note"]) if t]})
    return tables


def ranks(rows: list) -> list:
    """Return the rank of every rho score of one data set's rows (what ``robench results``
    adds to its JSON): model, clusterer, score "rho", rank, tied, unranked (why not ranked,
    or None), rule, interval text and note, and the test against the model below."""
    out = []
    for table in rho_tables(rows):
        clusterer = "" if table["clusterer"] == "(none)" else table["clusterer"]
        out.extend({"model": r["model"], "clusterer": clusterer, "score": "rho",
                    **{k: r[k] for k in ("rank", "rank_best", "rank_worst", "rank_interval",
                                         "tied", "unranked")},
                    "rule": table["rule"], "interval": r["interval"],
                    "interval_note": r["interval_note"],
                    "pairs": [p for p in table["pairs"] if r["model"] in p["pair"]]}
                   for r in table["rows"])
    return out


def section(rows: list):
    """Return the rho section of one data set (its tables), or None without rho scores."""
    tables = rho_tables(rows)
    return {"tables": tables} if tables else None


HEADLINE_COLUMNS = (("acc_exclusive", "E[AccX]", "pct"), ("acc_inclusive", "E[AccI]", "pct"),
                    ("acc_random", "random split", "pct"))


def headline(rows: list) -> Optional[dict]:
    """Return rho's column of the overview: the k-means table (tie ranks), accuracies beside."""
    tables = rho_tables(rows)  # the headline clusterer's: k-means where scored, else the first
    table = next((t for t in tables if t["clusterer"] == "kmeans"), tables[0] if tables else None)
    if table is None:
        return None
    return {"label": f"rho ({table['clusterer']})", "format": "num", "rows": table["rows"],
            "rule": table["rule"], "pairs": table.get("pairs") or [],
            "note": "E[AccX]/E[AccI] with Fieller's 95% interval; read it with E[AccX], "
                    "E[AccI] and the random-split accuracy beside it, since a weak model can "
                    "have a high ratio; a model whose E[AccI] is not shown above chance gets "
                    f"no rank. Ranks: {table['rule']}."}


def plots(rows: list) -> list:
    """Return rho's plots per clusterer: rho against E[AccI] with whiskers, and the
    [E[AccX], E[AccI]] intervals on a zoomed axis with the random-split accuracy marked."""
    out = []
    for table in rho_tables(rows):
        c = table["clusterer"]
        out += [{
            "kind": "scatter", "title": f"Robustness vs accuracy (clusterer {c})",
            "alt": (f"Scatter plot of rho (vertical) against E[AccI] (horizontal) for "
                    f"{len(table['rows'])} models, clusterer {c}, with 95% interval whiskers; "
                    "the exact values are in the overview table."),
            "caption": "rho with its 95% interval (vertical whiskers) against source-inclusive "
                       "accuracy E[AccI] (horizontal whiskers where stored): up is more robust, "
                       "right is more accurate",
            "xlabel": "E[AccI] (source-inclusive accuracy)", "ylabel": "rho = E[AccX]/E[AccI]",
            "percent": ("x",),
            "points": [{"label": r["model"], "x": r["acc_inclusive"], "y": r["value"],
                        "x_low": r["acc_inclusive_low"], "x_high": r["acc_inclusive_high"],
                        "y_low": r["ci_low"], "y_high": r["ci_high"]} for r in table["rows"]],
        }, {
            "kind": "intervals", "title": f"Accuracy interval [E[AccX], E[AccI]] (clusterer {c})",
            "alt": (f"Horizontal bars from E[AccX] to E[AccI] for {len(table['rows'])} models, "
                    f"clusterer {c}, best rho first, with the random-split accuracy marked; the "
                    "axis is zoomed to the values."),
            "caption": "bar from E[AccX] to E[AccI], tick at the random-split accuracy; the "
                       "axis is zoomed to the data, not 0-100%",
            "xlabel": "accuracy", "percent": ("x",),
            "rows": [{"label": r["model"], "low": r["acc_exclusive"], "high": r["acc_inclusive"],
                      "mark": r["acc_random"]} for r in table["rows"]],
        }]
    return out


def adequacy_tables(rows: list) -> list:
    """Return the adequacy sweep per (model, clusterer): the size table, the 'enough'
    readings and the three least robust classes (from the ``worst_class_rho`` details)."""
    groups: dict = defaultdict(dict)
    for s in rows:
        if s["metric"] == ADEQUACY:
            groups[(s["model"], s["clusterer"] or "")][s["score"]] = s
    tables = (_adequacy_table(model, clusterer, sc)
              for (model, clusterer), sc in sorted(groups.items()))
    return [t for t in tables if t is not None]


def _adequacy_table(model: str, clusterer: str, sc: dict) -> Optional[dict]:
    """Return one (model, clusterer)'s adequacy entry from its {score: row}, or None."""
    details = (sc.get("worst_class_rho") or {}).get("details") or {}
    table = [t for t in details.get("table") or [] if isinstance(t, dict)]
    if not table:
        return None
    readings = [((sc.get(f"enough_{kind}") or {}).get("details") or {}).get("reading")
                for kind in ("inclusive", "exclusive")]
    classes = [c for c in details.get("ranking") or []
               if isinstance(c, dict) and c.get("rho") and c["rho"][-1] is not None][:3]
    for t in table:
        t["interval"], t["interval_note"] = size_interval(sc, t)
    return {"model": model, "clusterer": clusterer or "(none)", "table": table,
            "readings": [r for r in readings if r],
            "classes": [{"class": c.get("class"), "rho": c["rho"][-1],
                         "reading": c.get("reading", "")} for c in classes]}


def size_interval(scores: dict, entry: dict) -> tuple:
    """Return (text, note) of one adequacy size's rho interval: as computed, with the reason
    an empty one was stored with (its ``rho@size`` score) or a note on a bound below 0."""
    details = (scores.get(f"rho@{entry.get('size')}") or {}).get("details")
    reason = ((details or {}).get("interval") or {}).get("reason") if isinstance(
        details, dict) else None
    if reason is None and entry.get("rho") is None:
        reason = "no rho at this size (no successful exclusive and inclusive trials)"
    return interval_text(entry.get("ci_low"), entry.get("ci_high"), reason=reason, floor=0.0)


def adequacy_section(rows: list):
    """Return the adequacy section of one data set, or None without a stored sweep."""
    tables = adequacy_tables(rows)
    if not tables:
        return None
    for t in tables:
        t["cells"] = {str(r.get("size")): r for r in t["table"]}
    sizes = list(dict.fromkeys(str(r.get("size")) for t in tables for r in t["table"]))
    return {"models": tables, "sizes": sizes}


def _series(label: str, table: list, key: str, **bands) -> dict:
    """Return one line of an adequacy plot: ``key`` (and ``bands``' keys) per training size."""
    return {"label": label, "x": [r.get("n_samples") for r in table],
            **{band: [r.get(k) for r in table] for band, k in {"y": key, **bands}.items()}}


def adequacy_plots(rows: list) -> list:
    """Return adequacy curves: rho against the training size per model (the data set's plot)
    and, per model, E[AccX] and E[AccI] against the training size."""
    tables = adequacy_tables(rows)
    if not tables:
        return []
    return [{"kind": "lines", "title": "Dataset adequacy: rho as the training set grows",
            "alt": (f"Line plot of rho (vertical) against the number of training samples "
                    f"(horizontal) for {len(tables)} model and clusterer pairs, with 95% "
                    "interval bands; values in the adequacy table."),
            "caption": "rho with its 95% interval (band) per training size; a curve still "
                       "rising at the right says more data of the same sources would help",
            "xlabel": "training samples", "ylabel": "rho",
            "series": [_series(f"{t['model']} ({t['clusterer']})", t["table"], "rho",
                               y_low="ci_low", y_high="ci_high") for t in tables][:8]}] + [
        {"kind": "lines", "model": t["model"],
         "title": f"{t['model']}: accuracy as the training set grows ({t['clusterer']})",
         "alt": (f"Line plot of {t['model']}'s E[AccX] and E[AccI] against the number "
                 "of training samples; values in the adequacy table."),
         "caption": "source-exclusive (E[AccX]) and source-inclusive (E[AccI]) "
                    "accuracy per training size",
         "xlabel": "training samples", "ylabel": "accuracy", "percent": ("y",),
         "series": [_series("E[AccX]", t["table"], "acc_exclusive"),
                    _series("E[AccI]", t["table"], "acc_inclusive")]} for t in tables]


#: The rho metric's section of each data set's leaderboard (MetricSpec.leaderboard).
SECTION = LeaderboardSection(build=section, template="rho.html", templates=TEMPLATES,
                             title="Robustness rho", headline=headline,
                             columns=HEADLINE_COLUMNS, legend=LEGEND, plots=plots, ranks=ranks)
#: The adequacy metric's section.
ADEQUACY_SECTION = LeaderboardSection(build=adequacy_section, template="adequacy.html",
                                      templates=TEMPLATES, title="Dataset adequacy",
                                      plots=adequacy_plots)
