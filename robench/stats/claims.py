"""Paper claims decided by stored scores: holds, does not hold, or undecided, with the evidence.

A metric declares the claims of its paper it can test (``MetricSpec.claims``: a function of
the stored score rows returning :class:`Claim` s). This module holds the claim record and the
decision rules they share; it names no family. The rules are deliberately strict: a claim
that an ordering or a level holds must be *decided* by the intervals, and a claim the data
cannot decide at its size is reported as undecided with the reason, never as holding. A claim
whose figure follows from how robench (or the paper) defines the measured quantity gets the
verdict :data:`BY_CONSTRUCTION`: its figure is shown, but it is not counted as evidence either
way (the family's ``why`` says which construction decides it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
#: The figure follows from the definitions, so it is no evidence for or against the claim.
BY_CONSTRUCTION = "by construction: not evidence"
VERDICTS = (HOLDS, FAILS, UNDECIDED, BY_CONSTRUCTION)
#: What decides an undecided claim, by the rule that left it undecided: intervals over
#: repeats narrow with repeats, a correlation over a zoo with models, a property of the data
#: with a larger (or another) data set. ``Claim.would_decide`` starts with one of them.
MORE_REPEATS, MORE_MODELS, MORE_DATA = "more repeats", "more models", "more data"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and what robench's scores say about it.

    Attributes
    ----------
    paper : str
        The paper's short title.
    claim : str
        The claim in one line.
    paper_figure : str
        What the paper reports.
    dataset : str
        The data set robench tested it on.
    figure : str
        robench's figure, with its interval where one exists.
    verdict : str
        One of :data:`VERDICTS`.
    why : str
        One line: the evidence behind the verdict.
    evidence : dict
        The numbers the verdict was decided from.
    would_decide : str
        For an undecided claim, what would decide it, from the rule that left it undecided
        (:data:`MORE_REPEATS`, :data:`MORE_MODELS` or :data:`MORE_DATA`, with the number the
        observed estimates and spreads call for where the rule gives one); empty otherwise.
    """

    paper: str
    claim: str
    paper_figure: str
    dataset: str
    figure: str
    verdict: str
    why: str
    evidence: dict = field(default_factory=dict)
    would_decide: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def as_dict(self) -> dict:
        """Return the fields as a dict."""
        return asdict(self)


def _num(v) -> Optional[float]:
    if v is None or isinstance(v, bool):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def compare(a: dict, b: dict) -> tuple:
    """Return (verdict, why) for "a is greater than b" from two score rows with intervals.

    Holds when a's interval lies wholly above b's (``a.ci_low > b.ci_high``), does not hold
    when it lies wholly below, and is undecided when the intervals overlap or one is missing
    (then the point estimates are quoted but decide nothing). For independent samples only:
    where the two rows come from the same repeats' partitions, compare paired differences.
    An overlap's why says how many repeats the same means and spreads would need
    (:func:`repeats_to_separate`).
    """
    va, vb = _num(a.get("value")), _num(b.get("value"))
    if va is None or vb is None:
        return UNDECIDED, "a value is missing"
    la, ha = _num(a.get("ci_low")), _num(a.get("ci_high"))
    lb, hb = _num(b.get("ci_low")), _num(b.get("ci_high"))
    if None in (la, ha, lb, hb):
        return UNDECIDED, (f"{va:.3f} vs {vb:.3f}, but an interval is missing (too few "
                           "repeats or no spread): the order is not decided")
    if la > hb:
        return HOLDS, f"[{la:.3f}, {ha:.3f}] lies above [{lb:.3f}, {hb:.3f}]"
    if ha < lb:
        return FAILS, f"[{la:.3f}, {ha:.3f}] lies below [{lb:.3f}, {hb:.3f}]"
    need = repeats_to_separate(a, b)
    return UNDECIDED, (f"[{la:.3f}, {ha:.3f}] and [{lb:.3f}, {hb:.3f}] overlap: more repeats "
                       "would decide it" + (f" (about {need} at these means and spreads)"
                                            if need else ""))


def repeats_to_separate(a: dict, b: dict, limit: int = 100_000) -> Optional[int]:
    """Return the repeats at which two rows' t intervals would stop overlapping, or None.

    Each row's half-width at n repeats is ``t(n - 1) sd / sqrt(n)``; its sd is recovered from
    its interval and ``n`` (rows without ``n`` >= 2 give None). The smallest common n' whose
    two half-widths sum to less than the gap of the estimates, at the observed means and
    spreads (a planning figure: both move as repeats are added). None where the estimates are
    equal or it would take more than ``limit``.
    """
    from robench.stats.intervals import t_quantile

    def scale(row):
        n, lo, hi = row.get("n"), _num(row.get("ci_low")), _num(row.get("ci_high"))
        if not isinstance(n, int) or n < 2 or lo is None or hi is None:
            return None, None
        level = ((row.get("details") or {}).get("interval") or {}).get("level") or 0.95
        return (hi - lo) / 2 * math.sqrt(n) / float(t_quantile(level, n - 1)), level

    (sa, la), (sb, lb) = scale(a), scale(b)
    gap = abs(_num(a.get("value")) - _num(b.get("value")))
    if sa is None or sb is None or not gap > 0:
        return None
    n0 = max(a["n"], b["n"])

    def fits(m):
        return (float(t_quantile(la, m - 1)) * sa + float(t_quantile(lb, m - 1)) * sb) \
            / math.sqrt(m) < gap

    m = n0
    while not fits(m):
        m *= 2
        if m > limit:
            return None
    lo = max(n0, m // 2)
    while m - lo > 1:
        mid = (lo + m) // 2
        lo, m = (lo, mid) if fits(mid) else (mid, m)
    return m


def combine(verdicts: list) -> str:
    """Return the verdict of a claim made of parts: holds if all hold, fails if any fails."""
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if any(v == FAILS for v in verdicts):
        return FAILS
    return UNDECIDED


def within(row: dict, low: float, high: float) -> tuple:
    """Return (verdict, why) for "the value lies in [low, high]" from a row with an interval.

    Holds when the interval lies inside [low, high], does not hold when it lies wholly
    outside, undecided when it straddles a bound or is missing.
    """
    v = _num(row.get("value"))
    if v is None:
        return UNDECIDED, "the value is missing"
    lo, hi = _num(row.get("ci_low")), _num(row.get("ci_high"))
    if lo is None or hi is None:
        return UNDECIDED, f"{v:.3f} without an interval: not decided"
    if low <= lo and hi <= high:
        return HOLDS, f"[{lo:.3f}, {hi:.3f}] lies inside [{low:g}, {high:g}]"
    if hi < low or lo > high:
        return FAILS, f"[{lo:.3f}, {hi:.3f}] lies outside [{low:g}, {high:g}]"
    return UNDECIDED, f"[{lo:.3f}, {hi:.3f}] straddles [{low:g}, {high:g}]"


def fmt(row: Optional[dict], pct: bool = False) -> str:
    """Return "value [low, high]" of a score row (percent if ``pct``), "-" without a value."""
    if not row or _num(row.get("value")) is None:
        return "-"
    scale, unit = (100.0, "%") if pct else (1.0, "")
    out = f"{scale * row['value']:.{1 if pct else 3}f}{unit}"
    lo, hi = _num(row.get("ci_low")), _num(row.get("ci_high"))
    if lo is not None and hi is not None:
        out += f" [{scale * lo:.{1 if pct else 3}f}, {scale * hi:.{1 if pct else 3}f}]"
    return out


def evaluate(registry, rows: list) -> list:
    """Return every registered metric's claims decided on the score rows (dicts), in order."""
    out = []
    metrics = sorted(registry.all("metrics"), key=lambda m: (m.display_order, m.name))
    for metric in metrics:
        if metric.claims is None:
            continue
        mine = [r for r in rows if r.get("metric") == metric.name]
        out.extend(metric.claims(mine))
    return out
