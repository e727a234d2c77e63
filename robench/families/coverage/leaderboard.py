"""Leaderboard section of the coverage metric: the ranked table, per-mix curves, decoded examples."""

from __future__ import annotations

from pathlib import Path

from robench.families.coverage.metric import METRIC, SUMMARY_SCORES, mix_order
from robench.formatting import as_dict, scores_by_model

TEMPLATES = str(Path(__file__).resolve().parent / "templates")


def leaderboard_tables(rows: list) -> dict:
    """Return the leaderboard context of one data set's coverage score rows (dicts)."""
    models = scores_by_model(rows, METRIC)
    if not models:
        return {}
    out = []
    for model, sc in models.items():
        head = sc.get(METRIC) or {}
        det = as_dict(head.get("details"))
        g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
        by_mix = det.get("by_mix") or {}
        dec = det.get("decoder") or {}
        out.append({
            "model": model, "value": head.get("value"), "higher_is_better": True,
            "ci_low": head.get("ci_low"), "ci_high": head.get("ci_high"),
            "repeats": det.get("repeats"), "per_repeat": det.get("per_repeat") or [],
            "note": (f"not applicable: {det['not_applicable']}" if det.get("not_applicable")
                     else det.get("error") or det.get("not_computable")),
            "layer": det.get("layer"), "feature_dim": det.get("feature_dim"),
            "mixes": mix_order(by_mix), "by_mix": by_mix, "size": det.get("size"),
            "curve": _curve(by_mix),
            "table": det.get("table") or {},
            "knobs": det.get("knobs") or {},
            "decoder": dec if dec.get("rows") or dec.get("not_applicable") else None,
            **{k: g(k) for k, _ in SUMMARY_SCORES},
        })
    return {"models": out}


def _curve(by_mix: dict, width: int = 120, height: int = 36) -> dict:
    """Return SVG polyline points of accuracy (0-100% bottom-top) against the centroid share."""
    pts = []
    for m in mix_order(by_mix):
        v = by_mix[m]
        if v is None:
            continue
        x = float(m.split("-")[0]) / 100.0
        pts.append(f"{2 + x * (width - 4):.1f},{2 + (1 - v) * (height - 4):.1f}")
    return {"points": " ".join(pts), "width": width, "height": height}


def section(rows: list):
    """Return the coverage section of one data set (ranked by coverage-guided accuracy)."""
    from robench.leaderboard import rank_rows

    tables = leaderboard_tables(rows)
    if not tables:
        return None
    models = rank_rows(sorted(tables["models"], key=lambda r: r["model"]))
    mixes = mix_order({m for r in models for m in r["mixes"]})
    sizes = sorted({int(s) for r in models for t in r["table"].values() for s in t})
    knobs = next((r["knobs"] for r in models if r["knobs"]), {})
    text = ", ".join(f"{k} = {v}" for k, v in knobs.items() if k in ("radius", "theta1",
                                                                       "theta2", "step"))
    size = next((r["size"] for r in models if r["size"]), None)
    return {"models": models, "mixes": mixes, "sizes": sizes, "size": size or "the largest set of",
            "knobs": f"Settings of these scores: {text}" if text else "Settings: see details"}
