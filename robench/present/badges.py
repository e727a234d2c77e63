"""SVG badges a contributor can put in a README: a model's rank, score and interval.

Text is measured with a fixed per-character width, so the same scores give the same bytes.
"""

from __future__ import annotations

import math
from typing import Optional

from robench.escaping import shorten, xml_attr, xml_text

#: Colours by standing: first (of two or more), top tenth, ranked, not ranked.
COLOURS = {"first": "#2e7d32", "top": "#558b2f", "ranked": "#1565c0", "none": "#757575"}
#: Average advance of an 11 px sans-serif character, in pixels (DejaVu Sans / Verdana ~6.5-7).
_CHAR = 7.0
_PAD = 6


def _width(text: str) -> int:
    return int(math.ceil(len(text) * _CHAR)) + 2 * _PAD


#: Characters of a stored name a badge shows (:func:`robench.escaping.shorten` beyond): its
#: width grows with its text.
BADGE_TEXT = 60


def badge_svg(label: str, message: str, colour: str) -> str:
    """Return a flat SVG badge: ``label`` on grey, ``message`` on ``colour``."""
    label, message = shorten(label, BADGE_TEXT), shorten(message, BADGE_TEXT)
    lw, mw = _width(label), _width(message)
    w = lw + mw
    label_x, message_x = lw / 2, lw + mw / 2
    title = f"{label}: {message}"
    label, message = xml_text(label), xml_text(message)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="20" role="img" '
        f'aria-label="{xml_attr(title)}"><title>{xml_text(title)}</title>'
        f'<rect width="{lw}" height="20" fill="#555"/>'
        f'<rect x="{lw}" width="{mw}" height="20" fill="{xml_attr(colour)}"/>'
        '<g fill="#fff" text-anchor="middle" font-family="DejaVu Sans,Verdana,Geneva,sans-serif" '
        'font-size="11">'
        f'<text x="{label_x:g}" y="14">{label}</text>'
        f'<text x="{message_x:g}" y="14">{message}</text></g></svg>\n')


def _fmt(value, pct: bool) -> str:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{100 * value:.1f}%" if pct else f"{value:.3f}"


def headline_message(row: dict, n_ranked: int, pct: bool = False) -> str:
    """Return a badge's message for one headline row: rank, score and interval."""
    rank, interval = row.get("rank"), row.get("rank_interval")
    if rank and n_ranked < 2:  # no competitor: a "rank 1 of 1" would read as a win
        text = "the only model ranked · " if interval else "the only model, untested · "
    elif rank and interval:  # the tested rank interval, not the estimate's position
        text = f"rank {interval} of {n_ranked} · "
    elif rank:  # a position by the estimate that no test backs (e.g. mCE): no rank shown
        text = f"#{rank} of {n_ranked} by estimate, untested · "
    else:
        text = "not ranked · "
    text += _fmt(row.get("value"), pct)
    if row.get("ci_low") is not None and row.get("ci_high") is not None:
        text += f" [{_fmt(row['ci_low'], pct)}, {_fmt(row['ci_high'], pct)}]"
    return text


def colour(rank: Optional[int], n_ranked: int, tied: bool = False) -> str:
    """Return a rank's badge colour (a shared first, or one with no competitor, is no win)."""
    if not rank:
        return COLOURS["none"]
    if n_ranked < 2:
        return COLOURS["ranked"]
    if rank == 1:
        return COLOURS["top" if tied else "first"]
    return COLOURS["top"] if rank <= max(1, n_ranked // 10) else COLOURS["ranked"]


def headline_badge(label: str, row: dict, n_ranked: int, pct: bool = False) -> str:
    """Return the SVG badge of one model's headline row on one data set."""
    # colour by the worst rank the model can hold: "first" only when rank 1 is decided; a
    # position no test backs gets the colour of no rank
    interval = row.get("rank_interval")
    rank = row.get("rank_worst") if interval else None
    tied = bool(row.get("tied")) or (bool(interval) and row.get("rank_best") != rank)
    return badge_svg(label, headline_message(row, n_ranked, pct), colour(rank, n_ranked, tied))
