"""Draw the leaderboard's plots as static, deterministic SVG with matplotlib's SVG backend.

A plot is described by a plain dict, so families describe what to draw without importing
matplotlib (only the site builder draws). Every kind takes ``title``, ``alt`` (the text
alternative shown to screen readers and when images are off), ``xlabel``, ``ylabel`` and
``percent`` (a tuple of the axes, ``"x"`` and/or ``"y"``, whose values are fractions shown as
percentages):

- ``"scatter"``: ``points`` = [{label, x, y, x_low, x_high, y_low, y_high}]; the intervals
  are drawn as whiskers where given; each point has its own colour and marker shape, named in
  a legend under the plot (no label is written beside a point, so none can hide another).
- ``"intervals"``: ``rows`` = [{label, low, high, mark}] as horizontal bars on an axis zoomed
  to the data (``mark``: a tick on the bar, e.g. the random-split accuracy); top row first.
- ``"lines"``: ``series`` = [{label, x: [...], y: [...], y_low, y_high}]; optional
  ``xticks`` = [(position, label)], ``ylim``; the legend goes under the plot.

``width`` and ``height`` (inches) change the axes' size. The same description always gives
the same bytes (docs/leaderboard.md, "Plots").
"""

from __future__ import annotations

import io
import textwrap

from robench.present.formatting import cut, is_finite, printable

SVG_RC = {"svg.hashsalt": "robench", "svg.fonttype": "none", "font.size": 9.5,
          "axes.spines.top": False, "axes.spines.right": False,
          # a name is text, never mathtext: '$\\foo{$' raised (docs/guarantees.md)
          "text.parse_math": False, "text.usetex": False}
#: Longest label drawn; a longer one (a name can be any text) is cut with an ellipsis.
MAX_LABEL = 80
PALETTE = ("#2f6fad", "#c1543d", "#3d8f5a", "#8a5ab5", "#b8860b", "#4a4a4a", "#d0679d", "#1f9fb4")
#: Marker shapes: with the palette, 80 points of a scatter plot look different (colour x shape).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
#: A plot is drawn this wide (inches; 72 pt each, 96 CSS px): at 4.2 in (403 px) shown on a
#: 390 px phone (~358 px of content) the smallest text, 9 pt = 12 px, is still ~10.7 px.
WIDTH = 4.2
AXES_HEIGHT = 2.4
LEGEND_ROW = 0.21  # inches per legend row at 9 pt
CHAR_IN = 0.082  # the width of an average character at 9.5-10.5 pt, inches
MAX_LEFT = 0.45  # a bar chart's row labels take at most this share of the width


def label(value, limit: int = MAX_LABEL) -> str:
    """Return ``value`` as plot text: control characters escaped, at most ``limit`` long."""
    return cut(printable("" if value is None else value), limit)


def style(i: int) -> dict:
    """Return the colour and marker of the ``i``-th series or point (distinct up to 80)."""
    return {"color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[(i // len(PALETTE)) % len(MARKERS)]}


def render_svg(plot: dict) -> str:
    """Return the SVG text of one plot description (see the module docstring)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    kind = plot.get("kind")
    draw = {"scatter": _scatter, "intervals": _intervals, "lines": _lines}.get(kind)
    if draw is None:
        raise ValueError(f"unknown plot kind {kind!r}; known: scatter, intervals, lines")
    with matplotlib.rc_context(SVG_RC):
        width = plot.get("width") or WIDTH
        axes_h = plot.get("height") or AXES_HEIGHT
        if kind == "intervals":
            axes_h = max(0.8, 0.3 + 0.26 * len(plot.get("rows") or ()))
        fig = Figure(figsize=(width, axes_h))
        FigureCanvasSVG(fig)
        ax = fig.add_subplot()
        legend = draw(ax, plot) or []
        _label_axes(ax, plot)
        # fixed margins in inches, not tight_layout (docs/leaderboard.md, "Plots")
        title = textwrap.wrap(label(plot.get("title") or "", 4 * MAX_LABEL),
                              int((width - 0.2) / CHAR_IN) - 1)
        left = _left_margin(ax, plot, width)
        top = 0.15 + 0.2 * len(title)
        below = 0.6 if plot.get("xlabel") else 0.35
        labels = [_fit(label(name), width - 0.5) for _, name in legend]
        ncol = 2 if labels and max(len(t) for t in labels) <= 20 else 1
        rows = -(-len(labels) // ncol) if labels else 0
        height = top + axes_h + below + (0.1 + rows * LEGEND_ROW if rows else 0)
        fig.set_size_inches(width, height)
        fig.subplots_adjust(left=left / width, right=1 - 0.15 / width,
                            bottom=(height - top - axes_h) / height, top=1 - top / height)
        if title:
            fig.text(0.1 / width, 1 - 0.08 / height, "\n".join(title), ha="left", va="top",
                     fontsize=10.5, linespacing=1.2)
        if labels:
            fig.legend([h for h, _ in legend], labels, loc="upper left", ncol=ncol,
                       bbox_to_anchor=(0.1 / width, (height - top - axes_h - below) / height),
                       frameon=False, fontsize=9, handlelength=1.6, columnspacing=1.2,
                       borderaxespad=0.0, labelspacing=0.35)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": "robench"})
    return out.getvalue()


def _label_axes(ax, plot: dict) -> None:
    """Give the axes their labels, tick locator, percent formatters and grid."""
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    ax.set_xlabel(label(plot.get("xlabel", ""), 4 * MAX_LABEL))
    ax.set_ylabel(label(plot.get("ylabel", ""), 4 * MAX_LABEL))
    if not plot.get("xticks"):
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    for axis in plot.get("percent", ()):
        (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(
            PercentFormatter(xmax=1.0, decimals=None))
    ax.grid(True, color="#e3e7eb", linewidth=0.6)
    ax.set_axisbelow(True)


def _left_margin(ax, plot: dict, width: float) -> float:
    """Return the left margin (inches): room for the y label and the longest tick label."""
    if plot.get("kind") == "intervals":
        ticks = [t.get_text() for t in ax.get_yticklabels()]
    else:  # the labels the formatter will write (a narrow range gives long ones)
        ticks = ax.yaxis.get_major_formatter().format_ticks(ax.get_yticks())
    longest = max((len(t) for t in ticks), default=0)
    return min(MAX_LEFT * width, max(0.75, (0.55 if plot.get("ylabel") else 0.3)
                                     + CHAR_IN * 0.9 * longest))


def _fit(label: str, inches: float) -> str:
    """Return ``label`` cut (with an ellipsis) to what fits in ``inches`` at 9.5 pt."""
    return cut(label, max(4, int(inches / CHAR_IN)))


def _scatter(ax, plot: dict) -> list:
    """Draw the points, each its own colour and shape, with whiskers; return the legend."""
    points = [p for p in plot.get("points") or ()
              if is_finite(p.get("x")) and is_finite(p.get("y"))]
    legend = []
    for i, p in enumerate(points):
        look = style(i)
        xerr, yerr = ([[max(p[a] - p[f"{a}_low"], 0.0)], [max(p[f"{a}_high"] - p[a], 0.0)]]
                      if is_finite(p.get(f"{a}_low")) and is_finite(p.get(f"{a}_high")) else None
                      for a in "xy")
        # open markers: a point under another still shows its outline
        handle = ax.errorbar([p["x"]], [p["y"]], xerr=xerr, yerr=yerr, fmt=look["marker"],
                             color=look["color"], markerfacecolor="none", markersize=6,
                             markeredgewidth=1.4, elinewidth=0.9, capsize=2, alpha=0.9)
        legend.append((handle, label(p.get("label", ""))))
    if not points:
        ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
    return legend


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
    room = MAX_LEFT * (plot.get("width") or WIDTH) - 0.35
    ax.set_yticks(ys, [_fit(label(r.get("label", "")), room) for r in rows])
    values = [v for r in rows for v in (r["low"], r["high"], r.get("mark")) if is_finite(v)]
    ax.set_xlim(*_zoom(values))
    ax.set_ylim(-0.7, len(rows) - 0.3)


def _band(ax, series: dict, color: str) -> None:
    """Shade a series' band (``y_low`` to ``y_high``) where all three values are finite."""
    low, high = series.get("y_low"), series.get("y_high")
    band = [(x, lo, hi) for x, lo, hi in zip(series["x"], low, high)
            if is_finite(x) and is_finite(lo) and is_finite(hi)] if low and high else []
    if band:
        ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                        color=color, alpha=0.15, linewidth=0)


def _lines(ax, plot: dict) -> list:
    """Draw each series with its colour and marker (and band); return the legend."""
    series = plot.get("series") or ()
    legend = []
    for i, s in enumerate(series):
        pairs = [(x, y) for x, y in zip(s.get("x") or (), s.get("y") or ())
                 if is_finite(x) and is_finite(y)]
        if not pairs:
            continue
        look = style(i)
        (handle,) = ax.plot([x for x, _ in pairs], [y for _, y in pairs], marker=look["marker"],
                            markersize=4, linewidth=1.4, color=look["color"])
        _band(ax, s, look["color"])
        legend.append((handle, label(s.get("label", ""))))
    if plot.get("xticks"):
        ax.set_xticks([t[0] for t in plot["xticks"]], [label(t[1]) for t in plot["xticks"]])
    if plot.get("ylim"):
        ax.set_ylim(*plot["ylim"])
    if not legend:
        ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
    return legend
