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


def interval_text(low, high, *, reason=None, floor=None, digits: int = 3) -> tuple:
    """Return (the interval as text, a note or None) as the tables show it.

    Bounds are shown as computed, never clipped: a bound below ``floor`` (the least value
    the quantity can take, e.g. 0 for rho) stays as it is and the note says so. Without
    bounds the text says "unbounded" where the confidence set is (Fieller's, when the
    denominator is not significantly above 0) and "none" otherwise, and the note is the
    stored reason.
    """
    def ok(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if ok(low) and ok(high):
        text = f"[{low:.{digits}f}, {high:.{digits}f}]"
        if floor is not None and low < floor:
            return text, (f"lower bound {low:.{digits}f} is below {floor:g}, the least value "
                          f"possible: the repeats do not bound it away from {floor:g} "
                          "(shown as computed, not clipped)")
        return text, None
    why = reason or "no interval stored"
    return ("unbounded" if "unbounded" in why else "none"), why
