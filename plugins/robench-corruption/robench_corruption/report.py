"""Text report of the mce metric (``robench run`` and ``robench results --metric mce``)."""

from __future__ import annotations

from robench.present.formatting import fixed as _f
from robench.metric_kit import score_index

from robench_corruption.metric import METRIC


def report_lines(rows: list) -> list:
    """Return one table per data set: models sorted by mCE (lower is better; no test, so no
    rank)."""
    lines = []
    for dataset, models in sorted(score_index(rows, METRIC).items()):
        lines += _dataset_lines(dataset, models)
    return lines


def _why(head: dict):
    """Return why a score has no value (its not_applicable or error detail), or None."""
    details = head.get("details") or {}
    return details.get("not_applicable") or details.get("error")


def _dataset_lines(dataset: str, models: dict) -> list:
    """Return one data set's mCE table ({model: {score: row}})."""
    heads = [m.get(METRIC) or {} for m in models.values()]
    baseline = next(((h.get("details") or {}).get("baseline") for h in heads
                     if (h.get("details") or {}).get("baseline")), "?")
    lines = [f"\n{dataset} - mCE (Hendrycks & Dietterich), baseline '{baseline}' = 1; "
             "sorted by mCE, lower is better (one value per model: no interval, no "
             "test, no rank)"]
    if not any(h.get("value") is not None for h in heads):  # nothing measured: say so once
        why = next((_why(h) for h in heads if _why(h)), None) or "no value"
        return lines + [f"  no mCE for any of its {len(heads)} model(s): {why}"]
    lines.append(f"  {'model':<16} {'mCE':>7} {'rel mCE':>7} {'clean':>7} "
                 f"{'corr acc':>8} {'worst CE':>22}")
    ranked = sorted(models.items(), key=lambda kv: (
        (kv[1].get(METRIC) or {}).get("value") is None,
        (kv[1].get(METRIC) or {}).get("value") or 0.0, kv[0]))
    lines += [_model_line(model, sc) for model, sc in ranked]
    n = next((h.get("n") for h in heads if h.get("n") is not None), None)
    if n is not None:
        lines.append(f"  n = {n} test images per corruption and severity")
    return lines


def _model_line(model: str, sc: dict) -> str:
    """Return one model's line: mCE, relative mCE, clean and corrupted accuracy, worst CE."""
    head = sc.get(METRIC) or {}
    details = head.get("details") or {}
    if head.get("value") is None:
        return f"  {model:<16} {_why(head) or 'no value'}"
    g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
    ce = {k: v for k, v in (details.get("ce") or {}).items() if v is not None}
    worst = max(ce, key=ce.get) if ce else None
    worst_txt = f"{worst} {ce[worst]:.2f}" if worst else "-"
    return (f"  {model:<16} {_f(head['value'], width=7)} "
            f"{_f(g('relative_mce'), width=7)} {_f(g('clean_accuracy'), True, 7)} "
            f"{_f(g('corruption_accuracy'), True, 8)} {worst_txt:>22}")
