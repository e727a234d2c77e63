"""The coverage paper's claims, decided on stored coverage scores (robench.stats.claims)."""

from __future__ import annotations

from robench.stats.claims import HOLDS, UNDECIDED, Claim, compare, fmt, within
from robench.stats.intervals import mean_interval

PAPER = "Coverage testing in feature space (Mani et al.)"
#: "Near chance": within this many points of 1 / number of classes.
CHANCE_MARGIN = 0.10


def _with_interval(row: dict) -> dict:
    """Return the row with a Student-t interval over its per-repeat values (reference models)."""
    per = (row.get("details") or {}).get("per_repeat") or []
    iv = mean_interval(per, bounds=(0.0, 1.0))
    return {**row, "ci_low": iv.low, "ci_high": iv.high}


def coverage_claims(rows: list) -> list:
    """Return per (data set, model): Table 2's trend and its all-boundary level near chance."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["model"]), {})[r["score"]] = r
    claims = []
    for (dataset, model), sc in sorted(groups.items()):
        head = sc.get("coverage") or {}
        det = head.get("details") or {}
        size = det.get("size")
        cent, bnd = sc.get(f"acc@100-0@{size}"), sc.get(f"acc@0-100@{size}")
        if not (cent and bnd):
            continue
        cent, bnd = _with_interval(cent), _with_interval(bnd)
        rule = (det.get("knobs") or {}).get("boundary_rule", "band")
        verdict, why = compare(cent, bnd)
        claims.append(Claim(
            PAPER, f"all-centroid sets are classified better than all-boundary ones ({model})",
            "Table 2: accuracy falls as the boundary share grows", dataset,
            f"100:0 {fmt(cent, True)} vs 0:100 {fmt(bnd, True)} ({rule} rule)", verdict, why))
        n_classes = len((det.get("quality") or {}).get("ep") or []) or None
        if n_classes:
            chance = 1.0 / n_classes
            verdict, why = within(bnd, 0.0, chance + CHANCE_MARGIN)
            claims.append(Claim(
                PAPER, f"the all-boundary set is classified near chance ({model})",
                "Table 2: all-boundary accuracy near chance", dataset,
                f"0:100 {fmt(bnd, True)}, chance {100 * chance:.0f}% ({rule} rule)",
                verdict if verdict != HOLDS or rule == "paper" else UNDECIDED,
                why + ("" if rule == "paper" else "; the band rule is not the paper's")))
    return claims


def accuracy_vs_robustness_claims(rows: list) -> list:
    """Return per data set: the least accurate model's coverage-guided accuracy vs the most's.

    The paper's observation: LeNet, the least accurate of its models on MNIST and FMNIST, is
    classified better than VGG-19 on every generated set ("less accurate, more robust").
    robench compares the least and the most accurate model of each data set (test accuracy,
    mean over the reference models) by their coverage-guided accuracy's intervals.
    """
    by_dataset: dict = {}
    for r in rows:
        by_dataset.setdefault(r["dataset"], {}).setdefault(r["model"], {})[r["score"]] = r
    claims = []
    for dataset, models in sorted(by_dataset.items()):
        scored = {m: sc for m, sc in models.items()
                  if (sc.get("model_acc") or {}).get("value") is not None
                  and (sc.get("coverage") or {}).get("value") is not None}
        if len(scored) < 2:
            continue
        order = sorted(scored, key=lambda m: scored[m]["model_acc"]["value"])
        low, high = order[0], order[-1]
        verdict, why = compare(scored[low]["coverage"], scored[high]["coverage"])
        acc = {m: 100 * scored[m]["model_acc"]["value"] for m in (low, high)}
        claims.append(Claim(
            PAPER, f"a less accurate model is more robust on generated sets ({low} vs {high})",
            "LeNet (least accurate) above VGG-19 on every generated MNIST/FMNIST set "
            "(Table 2)", dataset,
            f"{low} (test {acc[low]:.1f}%) {fmt(scored[low]['coverage'], True)} vs {high} "
            f"(test {acc[high]:.1f}%) {fmt(scored[high]['coverage'], True)}",
            verdict, why + "; test accuracies are means over the reference models",
            {"least_accurate": low, "most_accurate": high}))
    return claims


def all_coverage_claims(rows: list) -> list:
    """Return Table 2's trend and level per model, then the accuracy-vs-robustness claim."""
    return coverage_claims(rows) + accuracy_vs_robustness_claims(rows)
