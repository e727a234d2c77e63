"""Text report of the purity-ratio metric (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.families.purity_ratio.leaderboard import section
from robench.families.purity_ratio.metric import INDICATORS, METRIC, ZOO_MODEL, target_order
from robench.metric_kit import score_index
from robench.present.formatting import fixed as _f
from robench.present.formatting import rule_lines, why_not

#: What the paper reports for eq. 10's indicator, per validation table (Ho et al.: Table 4-5
#: on ImageNet-C; section 4.5, Figure 7 for the attacks).
PAPER_FIGURES = {"corruption robustness": "paper, eq. 10 on ImageNet-C: R^2 0.87, tau 0.73",
                 "adversarial robustness": "paper, eq. 10: R^2 0.66 DeepFool, 0.44 FGSM and PGD"}


def report_lines(rows: list) -> list:
    """Return the purity-ratio model and validation tables of score rows (dicts) as text."""
    lines = []
    for dataset, models in sorted(score_index(rows, METRIC).items()):
        zoo = models.pop(ZOO_MODEL, {})
        table = section([r for m in models.values() for r in m.values()]) or {}
        lines.append(f"\n{dataset} - purity-ratio (feature-space clusterability, eq. 5-10): "
                     "p_purity combined, mean over R repeats [95% t interval]")
        lines.append(f"  {'rank':>9} {'model':<16} {'combined [95% CI]':>24} {'R':>3} "
                     f"{'Model_ACC':>9} {'p_pur km':>8} {'p_pur mc':>8} {'p_acc km':>8} "
                     f"{'delta':>10} {'ACC*all/ACC':>11}")
        for row in table.get("models") or []:
            sc = models.get(row["model"]) or {}
            head = sc.get(METRIC) or {}
            rank = row.get("rank_interval") or "-"
            if row.get("rank") is not None:
                rank += f" #{row['rank']}"
            if head.get("value") is None:
                lines.append(f"  {rank:>9} {row['model']:<16} "
                             f"{why_not(head.get('details') or {}) or 'no value'}")
                continue
            g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
            cell = f"{_f(head.get('value'), width=5).strip()} {row.get('interval') or ''}"
            lines.append(f"  {rank:>9} {row['model']:<16} {cell:>24} "
                         f"{str(head.get('n') or '-'):>3} {_f(g('model_acc'), True, 9)} "
                         f"{_f(g('p_purity_kmeans'), width=8)} "
                         f"{_f(g('p_purity_multicut'), width=8)} {_f(g('p_acc_kmeans'), width=8)} "
                         f"{_f(g('delta'), width=10)} {_f(g('corruption_robustness'), width=11)}")
        if table.get("rule"):
            lines += rule_lines(table["rule"])
        for note in table.get("notes") or []:
            lines.append(f"  {note['model']}: {note['text']}")
        val = zoo.get("validation") or {}
        vdet = val.get("details") or {}
        if val and val.get("value") is None and vdet.get("not_applicable"):
            lines.append(f"  validation: {why_not(vdet)}")
            continue
        pairs = {}
        for name, r in zoo.items():
            kind, _, rest = name.partition("|")
            if kind in ("r", "tau"):
                ind, _, target = rest.partition("|")
                pairs.setdefault(ind, {}).setdefault(target, {})[kind] = r.get("value")
                pairs[ind][target]["n"] = r.get("n")
        if not pairs:
            continue
        targets_all = sorted({t for d in pairs.values() for t in d}, key=target_order)
        corr = [t for t in targets_all if t.startswith("corruption")]
        adv = [t for t in targets_all if not t.startswith("corruption")]
        n = max((v.get("n") or 0) for d in pairs.values() for v in d.values())
        for title, cols in (("corruption robustness", corr), ("adversarial robustness", adv)):
            if not cols:
                continue
            lines.append(f"  validation vs {title} across {n} zoo models: signed r / Kendall "
                         f"tau ({PAPER_FIGURES[title]})")
            lines.append("  " + f"{'indicator':<18}" + "".join(f"{c:>15}" for c in cols))
            for ind in INDICATORS:
                if ind not in pairs:
                    continue
                cells = []
                for c in cols:
                    v = pairs[ind].get(c) or {}
                    cells.append(f"{_f(v.get('r'), width=5).strip()}/"
                                 f"{_f(v.get('tau'), width=5).strip()}".rjust(15))
                lines.append("  " + f"{ind:<18}" + "".join(cells))
        verdict = (zoo.get("validation_holds") or {}).get("details") or {}
        if verdict.get("reason"):
            word = {True: "holds", False: "does not hold"}.get(verdict.get("holds"), "undecided")
            lines.append(f"  validation {word}: {verdict['reason']}")
    return lines
