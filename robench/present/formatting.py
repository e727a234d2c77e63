"""Small helpers families share to present score rows (CLI text and leaderboard context)."""

from __future__ import annotations

import textwrap

from robench.escaping import terminal
from robench.metric_kit import score_index
from robench.stats import is_finite  # noqa: F401  (defined in stats; re-exported here)
from robench.storage.cells import loads


def percent(value, digits: int = 2, *, width: int = 0, sign: bool = True,
            missing: str = "—") -> str:
    """Return a fraction as a percentage, right-aligned in ``width`` (``missing``: not finite)."""
    text = f"{value * 100:.{digits}f}" + ("%" if sign else "") if is_finite(value) else missing
    return text.rjust(width)


def fixed(value, pct: bool = False, width: int = 7) -> str:
    """Return ``value`` in ``width``: 3 decimals, or a 1-decimal percentage; '-' if not finite."""
    if pct:
        return percent(value, 1, width=width, sign=False, missing="-")
    return (f"{value:.3f}" if is_finite(value) else "-").rjust(width)


def scores_by_model(rows: list, metric: str) -> dict:
    """Return {model: {score: row}} of the score rows (dicts) of one metric."""
    return score_index(rows, metric, by=("model",))


def as_dict(value) -> dict:
    """Return a JSON column's value as a dict (text is parsed; anything else gives {})."""
    if isinstance(value, str):
        try:
            value = loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def why_not(details: dict) -> str:
    """Return why a score has no value: "not applicable: REASON" (said once), its error, or ""."""
    details = details if isinstance(details, dict) else {}
    reason = details.get("not_applicable")
    if reason:
        text = str(reason).strip()
        while text.lower().startswith("not applicable:"):
            text = text[len("not applicable:"):].strip()
        return f"not applicable: {text}"
    return str(details.get("error") or "")


def metric_spec(registry, name):
    """Return the registered metric ``name``, or None (a contributed file holds anything)."""
    try:
        return registry.get("metrics", name) if isinstance(name, str) else None
    except LookupError:
        return None


def cut(value, limit: int) -> str:
    """Return ``value`` as text of at most ``limit`` characters, a cut marked by an ellipsis."""
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def printable(value, lines: bool = False) -> str:
    """Return ``value`` as text that cannot drive a terminal (``lines``: keep tabs and LF)."""
    return terminal(value, lines=lines)


def interval_text(low, high, *, reason=None, floor=None, digits: int = 3) -> tuple:
    """Return (the interval as text, a note or None): never clipped (a bound below ``floor`` is
    noted); without bounds "unbounded" where the reason says so (Fieller's), else "none"."""
    if is_finite(low) and is_finite(high):
        text = f"[{low:.{digits}f}, {high:.{digits}f}]"
        if floor is not None and low < floor:
            return text, (f"lower bound {low:.{digits}f} is below {floor:g}, the least value "
                          f"possible: the repeats do not bound it away from {floor:g} "
                          "(shown as computed, not clipped)")
        return text, None
    why = reason or "no interval stored"
    return ("unbounded" if "unbounded" in why else "none"), why


#: Columns a table's ranking rule is wrapped to under the table: a terminal's 80.
RULE_WIDTH = 80


def rule_lines(rule: str, width: int = RULE_WIDTH) -> list:
    """Return a ranked table's rule as "ranks: ..." lines, wrapped to ``width``, indented."""
    return textwrap.wrap(f"ranks: {rule}", width, initial_indent="  ", subsequent_indent="  ",
                         break_on_hyphens=False)


def interval_label(rows: list) -> str:
    """Return the label of a table's intervals: "95% CI", or a raced table's stopping look's
    level ("96.9% CI": with alpha spent across looks, every look's intervals hold at 95%)."""
    levels = [float(a["level"]) for r in rows
              if isinstance(a := r.get("adaptive"), dict) and a.get("level")]
    if not levels:
        return "95% CI"
    return f"{100 * min(levels):.3g}% CI"
