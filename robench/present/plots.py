"""Draw the leaderboard's plots as static, deterministic SVG with matplotlib's SVG backend.

A plot is described by a plain dict, so families describe what to draw without importing
matplotlib (only the site builder draws). Every kind takes ``title``, ``alt`` (the text
alternative shown to screen readers and when images are off), ``xlabel``, ``ylabel`` and
``percent`` (a tuple of the axes, ``"x"`` and/or ``"y"``, whose values are fractions shown as
percentages):

- ``"scatter"``: ``points`` = [{label, x, y, x_low, x_high, y_low, y_high}]; the intervals
  are drawn as whiskers where given; at most ``max_labels`` points (default 12) are labelled.
- ``"intervals"``: ``rows`` = [{label, low, high, mark}] as horizontal bars on an axis zoomed
  to the data (``mark``: a tick on the bar, e.g. the random-split accuracy); top row first.
- ``"lines"``: ``series`` = [{label, x: [...], y: [...], y_low, y_high}]; optional
  ``xticks`` = [(position, label)], ``ylim``.

The same description always gives the same bytes: ``svg.hashsalt`` is fixed, the metadata
carries no date, text stays text (``svg.fonttype = none``, so no glyph paths are embedded).
"""

from __future__ import annotations

import io

from robench.present.formatting import is_finite, printable

SVG_RC = {"svg.hashsalt": "robench", "svg.fonttype": "none", "font.size": 9,
          "axes.spines.top": False, "axes.spines.right": False,
          # names come from databases anyone can contribute: '$\\foo{$' is a model name, not
          # mathtext to parse (which raised and stopped the whole leaderboard)
          "text.parse_math": False, "text.usetex": False}
#: Longest label drawn; a longer one (a name can be any text) is cut with an ellipsis.
MAX_LABEL = 80
PALETTE = ("#2f6fad", "#c1543d", "#3d8f5a", "#8a5ab5", "#b8860b", "#4a4a4a", "#d0679d",
           "#1f9fb4")


def label(value, limit: int = MAX_LABEL) -> str:
    """Return ``value`` as plot text: control characters escaped, at most ``limit`` long."""
    text = printable("" if value is None else value)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def render_svg(plot: dict) -> str:
    """Return the SVG text of one plot description (see the module docstring)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    kind = plot.get("kind")
    draw = {"scatter": _scatter, "intervals": _intervals, "lines": _lines}.get(kind)
    if draw is None:
        raise ValueError(f"unknown plot kind {kind!r}; known: scatter, intervals, lines")
    with matplotlib.rc_context(SVG_RC):
        height = plot.get("height") or 3.6
        if kind == "intervals":
            height = max(1.6, 0.9 + 0.26 * len(plot.get("rows") or ()))
        fig = Figure(figsize=(plot.get("width") or 6.4, height))
        FigureCanvasSVG(fig)
        ax = fig.add_subplot()
        draw(ax, plot)
        if plot.get("title"):
            ax.set_title(label(plot["title"], 4 * MAX_LABEL), loc="left", fontsize=10)
        ax.set_xlabel(label(plot.get("xlabel", ""), 4 * MAX_LABEL))
        ax.set_ylabel(label(plot.get("ylabel", ""), 4 * MAX_LABEL))
        for axis in plot.get("percent", ()):
            (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(
                PercentFormatter(xmax=1.0, decimals=None))
        ax.grid(True, color="#e3e7eb", linewidth=0.6)
        ax.set_axisbelow(True)
        # fixed margins instead of tight_layout, which measures every label and took half
        # of a plot's time; the left margin grows with the longest row label of a bar chart
        longest = max((len(label(r.get("label", ""))) for r in plot.get("rows") or ()),
                      default=0) if kind == "intervals" else 0
        width_in = fig.get_figwidth()
        left = min(0.5, max(0.12, (0.35 + 0.065 * longest) / width_in))
        bottom = min(0.4, 0.55 / fig.get_figheight())
        top = 1 - min(0.25, 0.35 / fig.get_figheight())
        fig.subplots_adjust(left=left, right=0.97, bottom=bottom, top=top)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": "robench"})
    return out.getvalue()


def _scatter(ax, plot: dict) -> None:
    points = [p for p in plot.get("points") or () if is_finite(p.get("x")) and is_finite(p.get("y"))]
    max_labels = plot.get("max_labels", 12)
    for i, p in enumerate(points):
        color = PALETTE[i % len(PALETTE)] if len(points) <= len(PALETTE) else PALETTE[0]
        xerr = yerr = None
        if is_finite(p.get("x_low")) and is_finite(p.get("x_high")):
            xerr = [[max(p["x"] - p["x_low"], 0.0)], [max(p["x_high"] - p["x"], 0.0)]]
        if is_finite(p.get("y_low")) and is_finite(p.get("y_high")):
            yerr = [[max(p["y"] - p["y_low"], 0.0)], [max(p["y_high"] - p["y"], 0.0)]]
        ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt="o", color=color,
                    markersize=4, elinewidth=1, capsize=2)
        if i < max_labels:
            ax.annotate(label(p.get("label", "")), (p["x"], p["y"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=8, color="#1d2329")
    if not points:
        ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)


def _zoom(values: list, pad_share: float = 0.08, floor: float = 0.002) -> tuple:
    low, high = min(values), max(values)
    pad = max((high - low) * pad_share, floor)
    return low - pad, high + pad


def _intervals(ax, plot: dict) -> None:
    rows = [r for r in plot.get("rows") or () if is_finite(r.get("low")) and is_finite(r.get("high"))]
    if not rows:
        ax.text(0.5, 0.5, "no intervals", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
        return
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        low, high = sorted((r["low"], r["high"]))
        ax.hlines(y, low, high, color=PALETTE[0], linewidth=5)
        if is_finite(r.get("mark")):
            ax.plot([r["mark"]], [y], marker="|", markersize=12, color=PALETTE[1],
                    markeredgewidth=2)
    ax.set_yticks(ys, [label(r.get("label", "")) for r in rows])
    values = [v for r in rows for v in (r["low"], r["high"], r.get("mark")) if is_finite(v)]
    ax.set_xlim(*_zoom(values))
    ax.set_ylim(-0.7, len(rows) - 0.3)


def _lines(ax, plot: dict) -> None:
    series = plot.get("series") or ()
    drawn = 0
    for i, s in enumerate(series):
        pairs = [(x, y) for x, y in zip(s.get("x") or (), s.get("y") or ())
                 if is_finite(x) and is_finite(y)]
        if not pairs:
            continue
        color = PALETTE[i % len(PALETTE)]
        ax.plot([x for x, _ in pairs], [y for _, y in pairs], marker="o", markersize=3,
                linewidth=1.4, color=color, label=label(s.get("label", "")))
        low, high = s.get("y_low"), s.get("y_high")
        if low and high:
            band = [(x, lo, hi) for x, lo, hi in zip(s["x"], low, high)
                    if is_finite(x) and is_finite(lo) and is_finite(hi)]
            if band:
                ax.fill_between([b[0] for b in band], [b[1] for b in band],
                                [b[2] for b in band], color=color, alpha=0.15, linewidth=0)
        drawn += 1
    if plot.get("xticks"):
        ax.set_xticks([t[0] for t in plot["xticks"]], [label(t[1]) for t in plot["xticks"]])
    if plot.get("ylim"):
        ax.set_ylim(*plot["ylim"])
    if drawn:
        ax.legend(fontsize=7, frameon=False, loc="best")
    else:
        ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
