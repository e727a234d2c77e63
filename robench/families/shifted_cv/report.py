"""Text report of the shifted-cv metric (``robench run`` and ``robench results``)."""

from __future__ import annotations

from robench.metric_kit import score_index
from robench.present.formatting import percent


def _mean_std(mean, std):
    spread = "-" if std is None else f"{100 * std:.2f}"
    return "-" if mean is None else f"{100 * mean:.2f} ({spread})"


def _points(v):
    return percent(v, 2, sign=False, missing="-")


def report_lines(rows: list) -> list:
    """Return shifted vs random K-fold CV per (dataset, clusterer), and the Wasserstein ratio."""
    groups = score_index(rows, by=(("dataset", "clusterer"), "model"))
    lines = []
    for (dataset, clusterer), models in sorted(groups.items()):
        lines.append(f"\n{dataset} - shifted-cv, sub-domains by {clusterer}: test accuracy %, "
                     "mean (std) over folds; gap = validation - test")
        notes = {((sc.get("shifted-cv") or {}).get("details") or {}).get("fold_fallback")
                 for sc in models.values()} - {None}
        lines.extend(f"  {note}" for note in sorted(notes))
        lines.append(f"  {'model':<18} {'shifted':>14} {'random':>14} {'drop':>6} "
                     f"{'gap shifted':>11} {'gap random':>10} {'std ratio':>9}")
        lines += [_model_line(model, sc) for model, sc in sorted(models.items())
                  if model and "shifted-cv" in sc]
        w = (models.get("") or {}).get("wasserstein_ratio")
        if w is not None:
            lines.append(_wasserstein_line(w))
    return lines


def _model_line(model: str, sc: dict) -> str:
    """Return one model's line: shifted and random CV accuracy, drop, gaps, std ratio."""
    value = {k: (sc.get(k) or {}).get("value") for k in
             ("shifted-cv", "acc_random", "drop", "gap_shifted", "gap_random", "std_ratio")}
    std = {k: ((sc.get(k) or {}).get("details") or {}).get("std")
           for k in ("shifted-cv", "acc_random")}
    ratio = value["std_ratio"]
    return (f"  {model:<18} {_mean_std(value['shifted-cv'], std['shifted-cv']):>14} "
            f"{_mean_std(value['acc_random'], std['acc_random']):>14} "
            f"{_points(value['drop']):>6} {_points(value['gap_shifted']):>11} "
            f"{_points(value['gap_random']):>10} "
            f"{'-' if ratio is None else f'{ratio:.1f}':>9}")


def _wasserstein_line(w: dict) -> str:
    """Return the fold Wasserstein ratio's line (a data set's score, model '')."""
    d = w.get("details") or {}
    last = (d.get("repeats") or [{}])[-1]
    means = [(last.get(k) or {}).get("mean_offdiagonal") for k in ("shifted", "random")]
    shown = " / ".join("-" if m is None else f"{m:.3f}" for m in means)
    v = w.get("value")
    return (f"  Wasserstein ratio, shifted / random folds (mean off-diagonal W1 in "
            f"a common VAE latent space): {'-' if v is None else f'{v:.3f}'} "
            f"({shown})" + (f"  error: {d['error']}" if d.get("error") else ""))
