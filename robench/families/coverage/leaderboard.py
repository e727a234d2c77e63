"""Leaderboard section of the coverage metric: ranked table, per-mix curves, decoded examples."""

from __future__ import annotations

from pathlib import Path

from robench.families.coverage.metric import MARGIN, METRIC, SUMMARY_SCORES, mix_order
from robench.present.formatting import as_dict, scores_by_model, why_not
from robench.specs import LeaderboardSection
from robench.stats.ranks import equivalence_margin

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
#: What the overview's legend says about this family's headline column.
LEGEND = "coverage-guided accuracy = accuracy on generated centroid and boundary test sets"


def leaderboard_tables(rows: list) -> dict:
    """Return the leaderboard context of one data set's coverage score rows (dicts)."""
    from robench.present.leaderboard import adaptive_of

    models = scores_by_model(rows, METRIC)
    if not models:
        return {}
    out = []
    for model, sc in models.items():
        head = sc.get(METRIC) or {}
        det = as_dict(head.get("details"))
        by_mix = det.get("by_mix") or {}
        dec = det.get("decoder") or {}
        out.append({
            "model": model, "value": head.get("value"), "higher_is_better": True,
            "ci_low": head.get("ci_low"), "ci_high": head.get("ci_high"),
            "adaptive": adaptive_of(head), "repeats": det.get("repeats"),
            "per_repeat": det.get("per_repeat") or [], "samples": _samples(det),
            "note": why_not(det) or det.get("not_computable"),
            "layer": det.get("layer"), "feature_dim": det.get("feature_dim"),
            "mixes": mix_order(by_mix), "by_mix": by_mix, "size": det.get("size"),
            "curve": _curve(by_mix), "table": det.get("table") or {},
            "knobs": det.get("knobs") or {},
            "decoder": dec if dec.get("rows") or dec.get("not_applicable") else None,
            **{k: (sc.get(k) or {}).get("value") for k, _ in SUMMARY_SCORES},
        })
    return {"models": out}


def _curve(by_mix: dict, width: int = 120, height: int = 36) -> dict:
    """Return SVG polyline points of accuracy (0-100% bottom-top) against the centroid share."""
    pts = [f"{2 + _share(m) / 100.0 * (width - 4):.1f},{2 + (1 - by_mix[m]) * (height - 4):.1f}"
           for m in mix_order(by_mix) if by_mix[m] is not None]
    return {"points": " ".join(pts), "width": width, "height": height}


def _share(mix: str) -> float:
    return float(mix.split("-")[0])


def headline(rows: list):
    """Return coverage's column of the overview (paired ranks; test accuracy beside)."""
    tables = section(rows)
    if not tables:
        return None
    return {"label": "coverage acc.", "format": "pct", "rows": tables["models"],
            "rule": tables["rule"], "pairs": tables.get("pairs") or [],
            "note": "coverage-guided accuracy, the mean over five centroid:boundary mixes of "
                    "accuracy on generated test sets, with the model's test accuracy beside it. "
                    f"Ranks: {tables['rule']}."}


def plots(rows: list) -> list:
    """Return coverage's plots: accuracy per centroid share of all models, then per model one
    line per generated size."""
    tables = section(rows)
    if not tables:
        return []
    axes = {"xlabel": "mix (centroid share - boundary share, %)", "ylabel": "accuracy",
            "percent": ("y",), "ylim": (0, 1.02),
            "xticks": [(_share(m), m) for m in tables["mixes"]]}
    series = [{"label": r["model"], "x": [_share(m) for m in r["mixes"]],
               "y": [r["by_mix"].get(m) for m in r["mixes"]]} for r in tables["models"]]
    out = [{"kind": "lines", "title": "Coverage-guided accuracy per mix",
            "alt": (f"Line plot of accuracy (vertical, 0-100%) against the centroid:boundary "
                    f"mix (horizontal) for {len(series)} models; values in the coverage table."),
            "caption": "accuracy on generated test sets from all-boundary (left) to "
                       "all-centroid (right)", **axes, "series": series[:8]}]
    for r, own in zip(tables["models"], series):
        sizes = sorted({int(s) for t in r["table"].values() for s in t})
        per_size = [{"label": f"{size} points", "x": own["x"],
                     "y": [(r["table"].get(m) or {}).get(str(size)) for m in r["mixes"]]}
                    for size in sizes]
        out.append({"kind": "lines", "model": r["model"],
                    "title": f"{r['model']}: coverage accuracy per mix",
                    "alt": (f"Line plot of {r['model']}'s accuracy against the centroid:boundary "
                            "mix, one line per generated set size; values in the table below."),
                    "caption": "mean over the reference models, one line per generated size",
                    **axes, "series": per_size or [own]})
    return out


def _samples(det: dict):
    """Return {repeat: coverage-guided accuracy}: models pair by repeat (same split and seed)."""
    ids, per = det.get("repeat_ids"), det.get("per_repeat")
    if not (isinstance(ids, list) and isinstance(per, list) and len(ids) == len(per)):
        return None
    return {r: v for r, v in zip(ids, per) if v is not None}


def section(rows: list):
    """Return the coverage section of one data set, ranked by ``rank_table`` (within MARGIN)."""
    from robench.present.leaderboard import rank_table

    tables = leaderboard_tables(rows)
    if not tables:
        return None
    ranked = rank_table(tables["models"], margin=equivalence_margin(METRIC, MARGIN))
    models = ranked["rows"]
    mixes = mix_order({m for r in models for m in r["mixes"]})
    sizes = sorted({int(s) for r in models for t in r["table"].values() for s in t})
    knobs = next((r["knobs"] for r in models if r["knobs"]), {})
    text = ", ".join(f"{k} = {v}" for k, v in knobs.items() if k in (
        "confidence", "boundary_rule", "wc_l", "radius", "theta1", "theta2", "step"))
    size = next((r["size"] for r in models if r["size"]), None)
    return {"models": models, "mixes": mixes, "sizes": sizes, "size": size or "the largest set of",
            "rule": ranked["rule"], "pairs": ranked["pairs"],
            "knobs": f"Settings of these scores: {text}" if text else "Settings: see details"}


def ranks(rows: list) -> list:
    """Return the rank of every coverage score of one data set's rows (``robench results``
    adds it to its JSON)."""
    tables = section(rows)
    return [{"model": r["model"], "clusterer": "", "score": METRIC, "rank": r["rank"],
             "rank_best": r["rank_best"], "rank_worst": r["rank_worst"],
             "rank_interval": r["rank_interval"], "tied": r["tied"],
             "unranked": r["unranked"], "rule": tables["rule"],
             "pairs": [p for p in tables["pairs"] if r["model"] in p["pair"]]}
            for r in (tables or {}).get("models", [])]


#: The coverage metric's section of each data set's leaderboard (MetricSpec.leaderboard).
SECTION = LeaderboardSection(build=section, template="coverage.html", templates=TEMPLATES,
                             title="Coverage-guided accuracy", headline=headline,
                             columns=(("model_acc", "test acc.", "pct"),), legend=LEGEND,
                             plots=plots, ranks=ranks)
