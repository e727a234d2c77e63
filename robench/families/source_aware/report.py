"""Text reports of the source-aware family (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.families.source_aware.rho import METRIC as RHO
from robench.present.formatting import percent
from robench.stats.intervals import tie_ranks


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


def _adaptive_ranks(models: dict) -> dict:
    """Return model -> rank from a --until decided table's pair decisions ({} if not adaptive)."""
    out = {}
    for model, sc in models.items():
        details = (sc.get("rho") or {}).get("details") or {}
        ad = details.get("adaptive") if isinstance(details, dict) else None
        if isinstance(ad, dict) and ad.get("rank") is not None:
            out[model] = ad["rank"]
    return out


def rho_lines(rows: list) -> list:
    """Return rho per data set and clusterer, models ranked best first, as text lines."""
    table: dict = {}
    for s in rows:
        if s["metric"] != RHO:
            continue
        table.setdefault((s["dataset"], s["clusterer"]), {}).setdefault(s["model"], {})[
            s["score"]] = s
    lines = []
    for (dataset, clusterer), models in sorted(table.items()):
        ci_name = _ci_name(models)
        adaptive = _adaptive_ranks(models)
        how = (f"adaptive repeats (--until decided): models share a rank unless the paired "
               f"interval of their rho difference orders them; {ci_name}s; R = repeats used"
               if adaptive else f"overlapping {ci_name}s share a rank")
        lines.append(f"\n{dataset} - sources by {clusterer}: ranked by rho = E[AccX]/E[AccI] "
                     f"({how})")
        lines.append(f"  {'#':>2} {'model':<14} {'rho':>6} {ci_name:>15}   "
                     f"{'E[AccX]':>7} {'E[AccI]':>7} {'E[Acc]':>7} {'R':>4}")
        complete = {m: sc for m, sc in models.items() if "rho" in sc}
        ranked = sorted(complete.items(), key=lambda kv: -(kv[1]["rho"].get("value") or -1))
        # models whose intervals overlap their rank's leader share its rank (robench.stats.intervals)
        ranks = tie_ranks([sc["rho"].get("value") for _, sc in ranked],
                          [sc["rho"].get("ci_low") for _, sc in ranked],
                          [sc["rho"].get("ci_high") for _, sc in ranked])
        if adaptive and all(m in adaptive for m, _ in ranked):
            ranks = [adaptive[m] for m, _ in ranked]
        for i, (model, sc) in zip(ranks, ranked):
            r = sc["rho"]
            value = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
            ci = "" if r.get("ci_low") is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
            rho = "  -   " if r.get("value") is None else f"{r['value']:6.3f}"
            rank = "-" if i is None else str(i)
            lines.append(f"  {rank:>2} {model:<14} {rho} {ci:>15}   {_pct(value('acc_exclusive'))}"
                         f"  {_pct(value('acc_inclusive'))} {_pct(value('acc_random'))}"
                         f" {r.get('n') or 0:>4}")
    return lines


def adequacy_lines(rows: list) -> list:
    """Return the adequacy sweep per (dataset, model, clusterer): sizes, interval, rho, classes."""
    groups: dict = {}
    for s in rows:
        groups.setdefault((s["dataset"], s["model"], s["clusterer"]), {})[s["score"]] = s
    lines = []
    for (dataset, model, clusterer), sc in sorted(groups.items()):
        summary = sc.get("worst_class_rho")
        details = (summary or {}).get("details") or {}
        lines.append(f"\n{dataset} / {model} - sources by {clusterer}: dataset adequacy "
                     "(training-size sweep, test partitions fixed)")
        lines.append(f"  {'size':>6} {'n':>6} {'E[AccX]':>7} {'E[AccI]':>7} {'rho':>6} "
                     f"{'95% CI':>15} {'R':>3}")
        for t in details.get("table", []):
            ci = "" if t.get("ci_low") is None else f"[{t['ci_low']:.3f}, {t['ci_high']:.3f}]"
            rho = "  -   " if t.get("rho") is None else f"{t['rho']:6.3f}"
            n = "" if t.get("n_samples") is None else f"{t['n_samples']:.0f}"
            capped = f"  ({t['n_capped']} capped)" if t.get("n_capped") else ""
            lines.append(f"  {str(t['size']):>6} {n:>6} {_pct(t.get('acc_exclusive'))}  "
                         f"{_pct(t.get('acc_inclusive'))} {rho} {ci:>15} {t.get('n', 0):>3}"
                         + capped)
        for kind in ("inclusive", "exclusive"):
            e = sc.get(f"enough_{kind}")
            if e and (e.get("details") or {}).get("reading"):
                lines.append(f"  enough: {e['details']['reading']}")
        ranking = [c for c in details.get("ranking", [])
                   if c.get("rho") and c["rho"][-1] is not None]
        if ranking:
            lines.append("  least robust classes (rho at the full size):")
            for c in ranking[:3]:
                lines.append(f"    class {c['class']}: rho {c['rho'][-1]:.3f}  - {c['reading']}")
    return lines


def lost_test_lines(rows: list) -> list:
    """Return the lost-test estimates (rows) per model (columns) of each data set, in %."""
    groups: dict = {}
    for s in rows:
        groups.setdefault(s["dataset"], {}).setdefault(s["model"], {})[s["score"]] = s
    lines = []
    for dataset, models in sorted(groups.items()):
        order = []
        for sc in models.values():
            order.extend(n for n in sc if n not in order)
        names = sorted(models)
        lines.append(f"\n{dataset} - lost-test: the test accuracy estimated as if the test set "
                     "were lost, and the errors, in %, mean over the random-split repeats")
        lines.append(f"  {'estimate':<28}" + "".join(f"{m[:12]:>13}" for m in names))
        for score in order:
            cells = []
            for m in names:
                v = (models[m].get(score) or {}).get("value")
                cells.append(percent(v, 2, sign=False, missing="-"))
            lines.append(f"  {score:<28}" + "".join(f"{c:>13}" for c in cells))
    return lines
