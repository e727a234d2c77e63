"""Text reports of the source-aware family (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.families.source_aware.rho import METRIC as RHO
from robench.metric_kit import score_index
from robench.present.formatting import percent, rule_lines
from robench.families.source_aware.leaderboard import rho_tables, size_interval


def _pct(v):
    return percent(v, 2, width=6, sign=False, missing="   -  ")


def _ci_name(models: dict) -> str:
    """Return "95% CI", or the level of a table run with --until decided (its details say)."""
    for sc in models.values():
        details = (sc.get("rho") or {}).get("details") or {}
        if isinstance(details, dict) and details.get("adaptive"):
            level = (details.get("interval") or {}).get("level")
            if level:
                return f"{100 * level:.3g}% CI"
    return "95% CI"


def rho_lines(rows: list) -> list:
    """Return rho per data set and clusterer, models ranked best first, as text lines (the
    leaderboard's ranks and notes; "#" is the position by the estimate, "-" no rank)."""
    by_dataset: dict = {}
    for s in rows:
        if s["metric"] == RHO:
            by_dataset.setdefault(s["dataset"], []).append(s)
    lines = []
    for dataset, mine in sorted(by_dataset.items()):
        models = score_index(mine, by=("model",))
        ci_name = _ci_name(models)
        for table in rho_tables(mine):
            lines.append(f"\n{dataset} - sources by {table['clusterer']}: ranked by rho = "
                         "E[AccX]/E[AccI]")
            lines.append(f"  {'rank':>5} {'#':>2} {'model':<14} {'rho':>6} {ci_name:>16}   "
                         f"{'E[AccX]':>7} {'E[AccI]':>7} {'E[Acc]':>7} {'R':>4}")
            for r in table["rows"]:
                rank = r["rank_interval"] or "-"
                pos = "-" if r["rank"] is None else str(r["rank"])
                rho = "  -   " if r.get("value") is None else f"{r['value']:6.3f}"
                flag = "  at chance" if (r["unranked"] or "").startswith("at chance") else (
                    "  not ranked" if r["unranked"] else "")
                lines.append(f"  {rank:>5} {pos:>2} {r['model']:<14} {rho} {r['interval']:>16}   "
                             f"{_pct(r['acc_exclusive'])}  {_pct(r['acc_inclusive'])} "
                             f"{_pct(r['acc_random'])} {r.get('n') or 0:>4}{flag}")
            lines += [f"      {note['model']}: {note['text']}" for note in table["notes"]]
            lines += rule_lines(f"{table['rule']}; no rank where E[AccI] is not shown above "
                                "chance plus the margin.")
    return lines


def adequacy_lines(rows: list) -> list:
    """Return the adequacy sweep per (dataset, model, clusterer): sizes, interval, rho, classes
    (a note under the table says why an interval is empty or unbounded, or a bound below 0)."""
    groups = score_index(rows, by=(("dataset", "model", "clusterer"),))
    lines = []
    for (dataset, model, clusterer), sc in sorted(groups.items()):
        details = (sc.get("worst_class_rho") or {}).get("details") or {}
        lines.append(f"\n{dataset} / {model} - sources by {clusterer}: dataset adequacy "
                     "(training-size sweep, test partitions fixed)")
        lines.append(f"  {'size':>6} {'n':>6} {'E[AccX]':>7} {'E[AccI]':>7} {'rho':>6} "
                     f"{'95% CI':>16} {'R':>3}")
        notes = []
        for t in details.get("table", []):
            ci, note = size_interval(sc, t)
            if note:
                ci += "*"
                notes.append(f"  * size {t['size']}: {note}")
            rho = "  -   " if t.get("rho") is None else f"{t['rho']:6.3f}"
            n = "" if t.get("n_samples") is None else f"{t['n_samples']:.0f}"
            capped = f"  ({t['n_capped']} capped)" if t.get("n_capped") else ""
            lines.append(f"  {str(t['size']):>6} {n:>6} {_pct(t.get('acc_exclusive'))}  "
                         f"{_pct(t.get('acc_inclusive'))} {rho} {ci:>16} {t.get('n', 0):>3}"
                         + capped)
        lines.extend(notes)
        readings = (((sc.get(f"enough_{kind}") or {}).get("details") or {}).get("reading")
                    for kind in ("inclusive", "exclusive"))
        lines += [f"  enough: {reading}" for reading in readings if reading]
        ranking = [c for c in details.get("ranking", [])
                   if c.get("rho") and c["rho"][-1] is not None]
        if ranking:
            lines.append("  least robust classes (rho at the full size; readings of mean curves, "
                         "not tests):")
            lines += [f"    class {c['class']}: rho {c['rho'][-1]:.3f}  - {c['reading']}"
                      for c in ranking[:3]]
    return lines


def lost_test_lines(rows: list) -> list:
    """Return the lost-test estimates (rows) per model (columns) of each data set, in %."""
    lines = []
    for dataset, models in sorted(score_index(rows).items()):
        order = dict.fromkeys(n for sc in models.values() for n in sc)
        names = sorted(models)
        lines.append(f"\n{dataset} - lost-test: the test accuracy estimated as if the test set "
                     "were lost, and the errors, in %, mean over the random-split repeats")
        lines.append(f"  {'estimate':<28}" + "".join(f"{m[:12]:>13}" for m in names))
        for score in order:
            cells = (percent((models[m].get(score) or {}).get("value"), 2, sign=False,
                             missing="-") for m in names)
            lines.append(f"  {score:<28}" + "".join(f"{c:>13}" for c in cells))
    return lines
