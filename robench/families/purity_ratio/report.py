"""Text report of the purity-ratio metric (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.families.purity_ratio.leaderboard import correlations, section, target_groups
from robench.families.purity_ratio.metric import INDICATORS, METRIC, ZOO_MODEL
from robench.metric_kit import score_index
from robench.present.formatting import fixed as _f, rule_lines, why_not

#: What the paper reports for eq. 10's indicator, per validation table in the order of
#: ``target_groups`` (Ho et al.: Table 4-5 on ImageNet-C; section 4.5, Figure 7 for the attacks).
PAPER_FIGURES = {"corruption robustness": "paper, eq. 10 on ImageNet-C: R^2 0.87, tau 0.73",
                 "adversarial robustness": "paper, eq. 10: R^2 0.66 DeepFool, 0.44 FGSM and PGD"}


def report_lines(rows: list) -> list:
    """Return the purity-ratio model and validation tables of score rows (dicts) as text."""
    lines = []
    for dataset, models in sorted(score_index(rows, METRIC).items()):
        zoo = models.pop(ZOO_MODEL, {})
        lines += _model_lines(dataset, models) + _validation_lines(zoo)
    return lines


def _model_lines(dataset: str, models: dict) -> list:
    """Return one data set's table of models ({model: {score: row}}), its rule and notes."""
    table = section([r for m in models.values() for r in m.values()]) or {}
    lines = [f"\n{dataset} - purity-ratio (feature-space clusterability, eq. 5-10): "
             "p_purity combined, mean over R repeats [95% t interval]",
             f"  {'rank':>9} {'model':<16} {'combined [95% CI]':>24} {'R':>3} "
             f"{'Model_ACC':>9} {'p_pur km':>8} {'p_pur mc':>8} {'p_acc km':>8} "
             f"{'delta':>10} {'ACC*all/ACC':>11}"]
    lines += [_model_line(row, models.get(row["model"]) or {}) for row in table.get("models") or []]
    if table.get("rule"):
        lines += rule_lines(table["rule"])
    return lines + [f"  {note['model']}: {note['text']}" for note in table.get("notes") or []]


def _model_line(row: dict, sc: dict) -> str:
    """Return one model's line: rank, purity-ratio with its interval, the indicators."""
    head = sc.get(METRIC) or {}
    rank = row.get("rank_interval") or "-"
    if row.get("rank") is not None:
        rank += f" #{row['rank']}"
    if head.get("value") is None:
        return f"  {rank:>9} {row['model']:<16} {why_not(head.get('details') or {}) or 'no value'}"
    cell = f"{_f(head.get('value'), width=5).strip()} {row.get('interval') or ''}"
    acc = (sc.get("model_acc") or {}).get("value")
    return "  " + " ".join(
        [f"{rank:>9}", f"{row['model']:<16}", f"{cell:>24}", f"{str(head.get('n') or '-'):>3}",
         _f(acc, True, 9)]
        + [_f((sc.get(k) or {}).get("value"), width=w) for k, w in MODEL_COLUMNS])


#: The indicator columns of a model's line after Model_ACC: (score, width).
MODEL_COLUMNS = (("p_purity_kmeans", 8), ("p_purity_multicut", 8), ("p_acc_kmeans", 8),
                 ("delta", 10), ("corruption_robustness", 11))


def _validation_lines(zoo: dict) -> list:
    """Return the zoo's validation tables and verdict, or why there is no validation."""
    val = zoo.get("validation") or {}
    vdet = val.get("details") or {}
    if val and val.get("value") is None and vdet.get("not_applicable"):
        return [f"  validation: {why_not(vdet)}"]
    pairs = correlations(zoo, kinds=("r", "tau"))
    if not pairs:
        return []
    n = max((v.get("n") or 0) for d in pairs.values() for v in d.values())
    lines = [line for title, cols in zip(PAPER_FIGURES, target_groups(pairs)) if cols
             for line in _correlation_table(pairs, title, cols, n)]
    verdict = (zoo.get("validation_holds") or {}).get("details") or {}
    if verdict.get("reason"):
        word = {True: "holds", False: "does not hold"}.get(verdict.get("holds"), "undecided")
        lines.append(f"  validation {word}: {verdict['reason']}")
    return lines


def _correlation_table(pairs: dict, title: str, cols: list, n: int) -> list:
    """Return one validation table: an indicator per line, r/tau per target."""
    lines = [f"  validation vs {title} across {n} zoo models: signed r / Kendall "
             f"tau ({PAPER_FIGURES[title]})",
             "  " + f"{'indicator':<18}" + "".join(f"{c:>15}" for c in cols)]
    for ind in (i for i in INDICATORS if i in pairs):
        cells = [pairs[ind].get(c) or {} for c in cols]
        lines.append("  " + f"{ind:<18}" + "".join(
            f"{_f(v.get('r'), width=5).strip()}/{_f(v.get('tau'), width=5).strip()}".rjust(15)
            for v in cells))
    return lines
