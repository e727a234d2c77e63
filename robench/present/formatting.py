"""Small helpers families share to present score rows (CLI text and leaderboard context)."""

from __future__ import annotations

import json
import math


def fixed(value, pct: bool = False, width: int = 7) -> str:
    """Return ``value`` right-aligned in ``width``: 3 decimals, or a percentage with 1; '-' if
    missing or not finite."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "-".rjust(width)
    return (f"{100 * value:.1f}" if pct else f"{value:.3f}").rjust(width)


def scores_by_model(rows: list, metric: str) -> dict:
    """Return {model: {score: row}} of the score rows (dicts) of one metric."""
    models: dict = {}
    for r in rows:
        if r.get("metric") == metric:
            models.setdefault(r["model"], {})[r["score"]] = r
    return models


def as_dict(value) -> dict:
    """Return a JSON column's value as a dict (text is parsed; anything else gives {})."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}
