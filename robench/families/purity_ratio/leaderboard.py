"""Leaderboard section of the purity-ratio metric: the model table and the validation tables."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from robench.families.purity_ratio.metric import INDICATORS, METRIC, ZOO_MODEL, target_order
from robench.present.formatting import interval_text, is_finite, scores_by_model, why_not
from robench.specs import LeaderboardSection
from robench.stats.ranks import chance_reason, equivalence_margin

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
#: What the overview's legend says about this family's headline column.
LEGEND = "purity-ratio = how clusterable the model's feature space is relative to its accuracy"
#: Practical-equivalence margin of purity-ratio's pair verdicts (``ROBENCH_MARGIN=
#: "purity-ratio=..."`` sets another; docs/intervals.md says why).
MARGIN = 0.05


def purity_samples(details: dict) -> Optional[dict]:
    """Return a purity-ratio score's {repeat: p_purity combined}, None before metric version 4."""
    per = details.get("per_repeat") if isinstance(details, dict) else None
    if not isinstance(per, dict) or not isinstance(per.get("repeats"), list):
        return None
    values = (per.get("values") or {}).get(METRIC)
    if not isinstance(values, list):
        return None
    # a database can come from anyone: a repeat that is not a whole number pairs nothing
    return {r: float(v) for r, v in zip(per["repeats"], values)
            if isinstance(r, int) and not isinstance(r, bool) and is_finite(v)}


#: Why a model with fewer than 2 repeats (or a score of metric version 3 or older) is not ranked.
FEW_REPEATS = ("no interval and no paired test: fewer than 2 repeats of the reference model "
               "(one reference model), so no rank")


def unranked_reason(value, details: dict) -> Optional[str]:
    """Return why a model takes no rank: fewer than 2 repeats, or Model_ACC not above chance."""
    if not is_finite(value):
        return None  # no value: rank_models says so
    samples = purity_samples(details) or {}
    if len(samples) < 2:
        return FEW_REPEATS
    chance = details.get("chance") if isinstance(details.get("chance"), dict) else {}
    acc = details.get("model_acc") if isinstance(details.get("model_acc"), dict) else {}
    per = details.get("per_repeat") or {}
    return chance_reason(acc.get("value"), acc.get("low"), acc.get("high"), chance.get("level"),
                         chance.get("basis") or "", values=(per.get("values") or {}).get(
                             "model_acc") or (), name="Model_ACC") or None


#: The sub-scores shown beside purity-ratio in its model table.
COLUMNS = ("model_acc", "p_purity_kmeans", "p_purity_multicut", "p_acc_kmeans",
           "p_acc_multicut", "p_acc_combined", "delta", "corruption_robustness",
           "acc_corrupted_all")


def _model_row(model: str, sc: dict) -> dict:
    """Return one model's row of the purity-ratio table from its {score: row}."""
    head = sc.get(METRIC) or {}
    details = head.get("details") if isinstance(head.get("details"), dict) else {}
    reason = (details.get("interval") or {}).get("reason") if isinstance(
        details.get("interval"), dict) else None
    text, note = interval_text(head.get("ci_low"), head.get("ci_high"),
                               reason=reason or ("no interval: one reference model, no "
                                                 "repeats (metric version before 4)"),
                               floor=0.0)
    return {
        "model": model, "value": head.get("value"), "ci_low": head.get("ci_low"),
        "ci_high": head.get("ci_high"), "interval": text, "interval_note": note,
        "n": head.get("n"), "higher_is_better": True,
        "zoo_member": bool(details.get("zoo_member")),
        "samples": purity_samples(details), "cycle": None,
        # the zoo's helper models are trained for the validation's correlations: shown,
        # never ranked among the models a user asked for (nor counted in their ranks)
        "unranked": ("a helper of the validation's model zoo: shown, never ranked"
                     if details.get("zoo_member")
                     else unranked_reason(head.get("value"), details)),
        "note": why_not(details),
        **{k: (sc.get(k) or {}).get("value") for k in COLUMNS},
    }


def correlations(zoo: dict, kinds=("r2", "r", "tau")) -> dict:
    """Return {indicator: {target: {kind: value, "n"}}} of the zoo's ``kind|ind|target`` scores."""
    pairs: dict = {}
    for name, r in zoo.items():
        kind, _, rest = name.partition("|")
        if kind in kinds:
            ind, _, target = rest.partition("|")
            cell = pairs.setdefault(ind, {}).setdefault(target, {})
            cell[kind], cell["n"] = r.get("value"), r.get("n")
    return pairs


def target_groups(pairs: dict) -> tuple:
    """Return (corruption targets, adversarial targets) of :func:`correlations`, in order."""
    targets_all = sorted({t for d in pairs.values() for t in d}, key=target_order)
    return ([t for t in targets_all if t.startswith("corruption")],
            [t for t in targets_all if not t.startswith("corruption")])


def _validation_tables(zoo: dict) -> list:
    """Return the zoo's correlation tables (corruption, adversarial) by indicator and target."""
    pairs = correlations(zoo)
    titles = ("corruption robustness (ACC*/ACC_clean; overall and per severity)",
              "adversarial robustness (relative robust accuracy per attack and eps)")
    return [{"title": title, "columns": cols,
             "rows": [{"indicator": ind, "n": max((c.get("n") or 0) for c in pairs[ind].values()),
                       "cells": [pairs[ind].get(c, {}) for c in cols]}
                      for ind in INDICATORS if ind in pairs]}
            for title, cols in zip(titles, target_groups(pairs)) if cols]


def leaderboard_tables(rows: list) -> dict:
    """Return the leaderboard context of one data set's purity-ratio score rows (dicts)."""
    models = scores_by_model(rows, METRIC)
    if not models:
        return {}
    zoo = models.pop(ZOO_MODEL, {})
    return {"models": [_model_row(model, sc) for model, sc in models.items()],
            "validation": _validation_tables(zoo),
            "validation_note": why_not((zoo.get("validation") or {}).get("details") or {}),
            "verdict": (zoo.get("validation_holds") or {}).get("details") or None}


def section(rows: list):
    """Return the purity-ratio section of one data set ranked by ``rank_table``, or None."""
    from robench.present.leaderboard import rank_table

    tables = leaderboard_tables(rows)
    if not tables:
        return None
    ranked = rank_table(tables["models"], margin=equivalence_margin(METRIC, MARGIN))
    tables.update(models=ranked["rows"], rule=ranked["rule"], pairs=ranked["pairs"])
    tables["ranked"] = any(r.get("rank") is not None for r in tables["models"])
    if not tables["ranked"]:  # say why nobody is, not the rule of an empty table
        why = {r.get("unranked") for r in tables["models"]}
        tables["rule"] = (why.pop() if len(why) == 1 and None not in why
                          else "no model ranked (each model's reason is beside it)")
    tables["notes"] = [{"model": r["model"], "text": t} for r in tables["models"]
                       for t in (r.get("unranked"), r.get("interval_note")) if t]
    return tables


def ranks(rows: list) -> list:
    """Return the rank of every purity-ratio score of one data set's rows (``robench results``
    adds it to its JSON and CSV)."""
    tables = section(rows)
    if not tables:
        return []
    return [{"model": r["model"], "clusterer": "", "score": METRIC, "rank": r["rank"],
             "rank_best": r.get("rank_best"), "rank_worst": r.get("rank_worst"),
             "rank_interval": r.get("rank_interval"), "tied": r.get("tied", False),
             "unranked": r.get("unranked"), "rule": tables["rule"],
             "interval": r.get("interval"), "interval_note": r.get("interval_note"),
             "pairs": [p for p in tables["pairs"] if r["model"] in p["pair"]]}
            for r in tables["models"]]


def headline(rows: list):
    """Return purity-ratio's column of the overview (Model_ACC beside)."""
    tables = section(rows)
    if not tables or not tables["models"]:
        return None
    return {"label": "purity-ratio", "format": "num", "rows": tables["models"],
            "rule": tables["rule"], "pairs": tables.get("pairs") or [],
            "note": "p_purity combined (eq. 10), the mean over repeats of the reference model "
                    "with Student's t 95% interval: how clusterable the feature space is "
                    "relative to the model's accuracy Model_ACC, shown beside it; a model "
                    "whose Model_ACC is not shown above chance gets no rank. Ranks: "
                    + tables["rule"] + "."}


#: The purity-ratio metric's section of each data set's leaderboard (MetricSpec.leaderboard):
#: the zoo's validation row is a data-set-level pseudo-model, without a model page.
SECTION = LeaderboardSection(build=section, template="purity_ratio.html", templates=TEMPLATES,
                             title="Feature-space clusterability", headline=headline,
                             ranks=ranks, columns=(("model_acc", "Model_ACC", "pct"),),
                             legend=LEGEND, pseudo_models=(ZOO_MODEL,))
