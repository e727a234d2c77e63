"""Leaderboard section of the purity-ratio metric: the model table and the validation tables."""

from __future__ import annotations

from pathlib import Path

from robench.families.purity_ratio.metric import INDICATORS, METRIC, ZOO_MODEL, target_order
from robench.present.formatting import scores_by_model, why_not

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
#: What the overview's legend says about this family's headline column.
LEGEND = "purity-ratio = how clusterable the model's feature space is relative to its accuracy"


def leaderboard_tables(rows: list) -> dict:
    """Return the leaderboard context of one data set's purity-ratio score rows (dicts)."""
    models = scores_by_model(rows, METRIC)
    if not models:
        return {}
    zoo = models.pop(ZOO_MODEL, {})
    table = []
    for model, sc in models.items():
        head = sc.get(METRIC) or {}
        details = head.get("details") if isinstance(head.get("details"), dict) else {}
        g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
        table.append({
            "model": model, "value": head.get("value"), "ci_low": head.get("ci_low"),
            "ci_high": head.get("ci_high"), "higher_is_better": True, "zoo_member": bool(details.get("zoo_member")),
            "note": why_not(details),
            **{k: g(k) for k in ("model_acc", "p_purity_kmeans", "p_purity_multicut",
                                 "p_acc_kmeans", "p_acc_multicut", "p_acc_combined", "delta",
                                 "corruption_robustness", "acc_corrupted_all")},
        })
    pairs: dict = {}
    for name, r in zoo.items():
        kind, _, rest = name.partition("|")
        if kind in ("r2", "r", "tau"):
            ind, _, target = rest.partition("|")
            cell = pairs.setdefault(ind, {}).setdefault(target, {})
            cell[kind], cell["n"] = r.get("value"), r.get("n")
    targets_all = sorted({t for d in pairs.values() for t in d}, key=target_order)
    validation_tables = []
    for title, cols in (("corruption robustness (ACC*/ACC_clean; overall and per severity)",
                         [t for t in targets_all if t.startswith("corruption")]),
                        ("adversarial robustness (relative robust accuracy per attack and eps)",
                         [t for t in targets_all if not t.startswith("corruption")])):
        if not cols:
            continue
        vrows = [{"indicator": ind,
                  "n": max((c.get("n") or 0) for c in pairs[ind].values()),
                  "cells": [pairs[ind].get(c, {}) for c in cols]}
                 for ind in INDICATORS if ind in pairs]
        validation_tables.append({"title": title, "columns": cols, "rows": vrows})
    val = zoo.get("validation") or {}
    holds = zoo.get("validation_holds") or {}
    return {"models": table, "validation": validation_tables,
            "validation_note": why_not(val.get("details") or {}),
            "verdict": holds.get("details") or None}


#: Why a purity-ratio table without intervals ranks nobody.
NO_INTERVAL = ("no interval (one reference model per model): an order of point values is not "
               "a tested order, so no rank")


def section(rows: list):
    """Return the purity-ratio section of one data set, or None without scores.

    Models are ranked (:func:`robench.present.leaderboard.rank_table`: ties shown as ``1=``)
    only when every model's p_purity has an interval; otherwise they are listed best first
    with no rank (``ranked`` False), like any score without an interval.
    """
    from robench.present.leaderboard import rank_rows, rank_table
    from robench.present.formatting import is_finite

    tables = leaderboard_tables(rows)
    if not tables:
        return None
    models = sorted(tables["models"], key=lambda r: r["model"])
    tables["ranked"] = bool(models) and all(
        is_finite(r.get("ci_low")) and is_finite(r.get("ci_high")) for r in models)
    if tables["ranked"]:
        table = rank_table(models)
        tables["models"], tables["rule"] = table["rows"], table["rule"]
    else:
        tables["models"] = rank_rows(models)  # best first; the order is not a rank
        for r in tables["models"]:
            r["rank"], r["tied"], r["unranked"] = None, False, NO_INTERVAL
        tables["rule"] = NO_INTERVAL
    return tables


def ranks(rows: list) -> list:
    """Return the rank of every purity-ratio score of one data set's rows (None: not ranked)."""
    tables = section(rows)
    if not tables:
        return []
    return [{"model": r["model"], "clusterer": "", "score": METRIC, "rank": r["rank"],
             "tied": r.get("tied", False), "unranked": r.get("unranked"),
             "rule": tables["rule"]} for r in tables["models"]]


def headline(rows: list):
    """Return purity-ratio's column of the overview (p_purity combined; Model_ACC beside)."""
    tables = section(rows)
    if not tables or not tables["models"]:
        return None
    return {"label": "purity-ratio", "format": "num", "rows": tables["models"],
            "rule": tables["rule"],
            "note": "p_purity combined (eq. 10): how clusterable the feature space is "
                    "relative to the model's accuracy Model_ACC, shown beside it"
                    + ("." if tables["ranked"] else "; " + NO_INTERVAL + ".")}
