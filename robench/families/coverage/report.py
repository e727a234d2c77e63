"""Text report of the coverage metric (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.families.coverage.metric import METRIC, mix_order
from robench.metric_kit import score_index
from robench.present.formatting import as_dict, fixed as _f, why_not


def _ci(head: dict) -> str:
    lo, hi = head.get("ci_low"), head.get("ci_high")
    return "-" if lo is None or hi is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def report_lines(rows: list) -> list:
    """Return the coverage tables (summary, then mixes x sizes) of score rows (dicts) as text."""
    lines = []
    for dataset, models in sorted(score_index(rows, METRIC).items()):
        lines.append(f"\n{dataset} - coverage (Mani et al.); ranked by coverage-guided accuracy "
                     "(mean over mixes at the largest size, then over R reference models; "
                     "95% t CI over them); accuracies in %, every column a mean over the R "
                     "models")
        lines.append(f"  {'model':<18} {'layer':<11} {'cov-acc':>7} {'95% CI':>13} {'R':>2} "
                     f"{'ACC':>6} {'EP min':>6} {'EP max':>6} {'CP':>6} {'BC':>6} {'PBC':>6} "
                     f"{'pairs':>6} {'shift':>6} {'null':>6}")
        mixes = []  # each model's mix table, after every model's summary line
        for model, sc in sorted(models.items(), key=lambda kv: (
                -((kv[1].get(METRIC) or {}).get("value") or -1), kv[0])):
            mine, table = _model_lines(model, sc)
            lines += mine
            mixes += [] if table is None else _mix_lines(model, table)
        lines += mixes
    return lines


def _model_lines(model: str, sc: dict) -> tuple:
    """Return (lines, mix table or None) of one model ({score: row}): its summary line, its
    boundary seeds, its confidence and why there is no headline where none."""
    head = sc.get(METRIC) or {}
    det = as_dict(head.get("details"))
    if head.get("value") is None and (det.get("not_applicable") or det.get("error")):
        return [f"  {model:<18} {why_not(det)}"], None
    g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
    lines = [f"  {model:<18} {str(det.get('layer') or '-'):<11} "
             f"{_f(head.get('value'), True, 7)} {_ci(head):>13} {head.get('n') or '-':>2} "
             f"{_f(g('model_acc'), True, 6)} " + " ".join(_f(g(k), width=6) for k in (
                 "ep_min", "ep_max", "cp", "bc", "pbc", "pbc_pairs_covered", "covariate_shift",
                 "covariate_shift_null"))]
    knobs = det.get("knobs") or {}
    lines.append(f"  {'':<18} boundary seeds by the {knobs.get('boundary_rule', 'band')}"
                 f" rule; share of test points that are boundary: paper rule "
                 f"(true-class p <= {knobs.get('wc_l', 0.5)}) "
                 f"{_f(g('boundary_share_paper'), True, 5).strip()}%, band "
                 f"[{knobs.get('theta1')}, {knobs.get('theta2')}] "
                 f"{_f(g('boundary_share_band'), True, 5).strip()}%")
    temps = [t for t in det.get("temperatures") or [] if t is not None]
    if knobs.get("confidence") == "calibrated" and temps:
        n_val = (det.get("calibration") or {}).get("n_val")
        lines.append(f"  {'':<18} confidence calibrated: temperature "
                     f"{', '.join(f'{t:.3g}' for t in temps)} (per reference model; "
                     f"NLL on {n_val} validation points)")
    else:
        lines.append(f"  {'':<18} confidence: the raw softmax (the paper's)")
    if det.get("not_computable"):
        lines.append(f"  {'':<18} coverage-guided accuracy not computable: "
                     f"{det['not_computable']}")
    return lines, det.get("table") or {}


def _mix_lines(model: str, table: dict) -> list:
    """Return one model's accuracy table: sizes x centroid-boundary mixes (none if empty)."""
    sizes = sorted({int(s) for row in table.values() for s in row})
    if not sizes:
        return []
    mixes = mix_order(table)
    lines = [f"  {model}: accuracy (%) per generated set, mean over the R models; rows = size, "
             "columns = centroid-boundary mix",
             "    " + f"{'size':>6}" + "".join(f"{m:>9}" for m in mixes)]
    for size in sizes:
        cells = [table[m].get(str(size), table[m].get(size)) for m in mixes]
        lines.append("    " + f"{size:>6}" + "".join(_f(c, True, 9) for c in cells))
    return lines
