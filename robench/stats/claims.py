"""Paper claims decided by stored scores: holds, does not hold, or undecided, with the evidence.

A metric declares the claims of its paper it can test (``MetricSpec.claims``: a function of
the stored score rows returning :class:`Claim` s). This module holds the claim record and the
decision rules they share; it names no family. The rules are deliberately strict: a claim
that an ordering or a level holds must be *decided* by the intervals, and a claim the data
cannot decide at its size is reported as undecided with the reason, never as holding. A claim
whose figure follows from how robench (or the paper) defines the measured quantity gets the
verdict :data:`BY_CONSTRUCTION`: its figure is shown, but it is not counted as evidence either
way (the family's ``why`` says which construction decides it).

Every claim carries a **control** (:class:`Control`): the same computation where the claimed
property is absent (data without sub-domains, a model without the feature, a shuffled
assignment, a null simulation). :func:`controlled` applies the rule that makes a verdict
evidence: a decided verdict counts only when the control's verdict differs; otherwise the
row is :data:`BY_CONSTRUCTION` (or :data:`ALGEBRA` for a check of a formula), with the
control's figure beside it.

A claim made of parts (one per model, one per step of an order) is decided by
:func:`decide_parts`: *holds* is an intersection-union test (every part at the row's level,
no correction: the claim is false only if some part is, and that part alone errs at most at
the level), *does not hold* is a union over the parts (Bonferroni over them, which for "any
part fails" is Holm's first step), and *equivalent* (every part within its stated margin)
is the third outcome of ordering claims. The table is counted by :func:`summary`: evidence,
by-construction and algebra rows apart, and the expected number of false decisions among
the evidence rows (each row errs at most at its level; by linearity of expectation the sum
of the levels bounds the expected count under any dependence between rows).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional
from robench.stats.equivalence import repeats_to_decide
from robench.stats.intervals import t_quantile
from robench.stats.paired import balanced_test, shows_above

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
#: An ordering claim whose every part is shown within its stated margin: a third outcome.
EQUIVALENT = "equivalent"
#: The figure follows from the definitions, so it is no evidence for or against the claim.
BY_CONSTRUCTION = "by construction: not evidence"
#: The figure checks a formula's algebra (its control, a simulation where the formula's
#: assumption is planted, decides it the same way): a check of the code, not of the data.
ALGEBRA = "algebra check: not evidence"
VERDICTS = (HOLDS, FAILS, EQUIVALENT, UNDECIDED, BY_CONSTRUCTION, ALGEBRA)
#: The verdicts that decide something (and so can be matched by a control).
DECIDED = (HOLDS, FAILS, EQUIVALENT)
#: A row's error bound: each direction of a decision one-sided at ``SIDE`` (a 95% interval).
ALPHA, SIDE = 0.05, 0.025
#: Repeats of the standard and the paper profile (``robench.run.config.REPEATS``, which this
#: ground-floor module cannot import; tests/stats/test_family_claims.py pins that they agree).
#: A row needing more repeats than the paper profile runs is "not decidable within the
#: paper's budget"; one needing more than ``BUDGET_FACTOR`` times the standard profile's
#: models or folds likewise (the paper's zoo and folds are about that).
STANDARD_REPEATS, PAPER_REPEATS, BUDGET_FACTOR = 15, 100, 10
#: The standard profile's zoo of models (purity-ratio), the unit of its correlations.
STANDARD_MODELS = 8
#: The standard profile's shifted-CV folds (2 repeats of 5 folds), the unit of its rows.
STANDARD_FOLDS = 10
NOT_DECIDABLE = "not decidable within the paper's budget"
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
    control: str = ""
    level: float = ALPHA

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def kind(self) -> str:
        """Return "evidence", "by construction" or "algebra" (what the row counts as)."""
        return {BY_CONSTRUCTION: "by construction", ALGEBRA: "algebra"}.get(self.verdict,
                                                                             "evidence")

    def as_dict(self) -> dict:
        """Return the fields as a dict."""
        return asdict(self)


@dataclass(frozen=True)
class Control:
    """The same computation where the claimed property is absent, and its verdict.

    Attributes
    ----------
    what : str
        The control in a few words ("k-means on i.i.d. Gaussian classes", "shuffled models").
    verdict : str or None
        The claim's rule applied to the control (the most common verdict over its
        replicates); None where no control applies (``figure`` then says why).
    figure : str
        The control's figure ("holds in 5 of 5 null data sets: ratio 1.17").
    algebra : bool
        The control plants the formula's own assumption: a match is an algebra check.
    """

    what: str
    verdict: Optional[str]
    figure: str
    algebra: bool = False

    def text(self) -> str:
        """Return the control as shown in the table's control column."""
        if self.verdict is None:
            return f"none applies: {self.figure}"
        return f"{self.what}: {self.verdict} ({self.figure})"


def modal(verdicts: list) -> tuple:
    """Return (the most common verdict, "k of n") of a control's replicates (ties: undecided)."""
    from collections import Counter

    if not verdicts:
        return UNDECIDED, "no replicate"
    (top, k), *rest = Counter(verdicts).most_common() + [(None, 0)]
    if rest and rest[0][1] == k:
        top = UNDECIDED
    return top, f"{top} in {k} of {len(verdicts)}"


def controlled(claim: Claim, control: Control) -> Claim:
    """Return the claim judged against its control.

    A decided verdict (holds, does not hold, equivalent) counts as evidence only when the
    control decides differently; where the control gives the same verdict the row becomes
    :data:`BY_CONSTRUCTION` (:data:`ALGEBRA` for a formula's check), the verdict the rule
    gave is kept in ``evidence["rule verdict"]`` and the why says so. An undecided row stays
    undecided. The control is shown either way.
    """
    from dataclasses import replace

    out = replace(claim, control=control.text())
    if claim.verdict in DECIDED and control.verdict == claim.verdict:
        kind = ALGEBRA if control.algebra else BY_CONSTRUCTION
        return replace(out, verdict=kind, evidence={**claim.evidence,
                                                    "rule verdict": claim.verdict},
                       why=f"the rule says {claim.verdict}, and so does the control where the "
                           f"property is absent ({control.what}): {claim.why}",
                       would_decide="")
    return out


def decide_parts(parts: list, alpha: float = SIDE) -> str:
    """Return the verdict of a claim made of parts, each ``part(level) -> verdict``.

    Holds when every part holds at ``alpha`` (an intersection-union test: no correction);
    does not hold when some part does not hold at ``alpha / m`` (Bonferroni over the m
    parts: the familywise rate of "some part is reversed" stays at alpha); equivalent when
    every part is equivalent at ``alpha``; undecided otherwise.
    """
    if not parts:
        return UNDECIDED
    m = len(parts)
    strict = [p(alpha / m) for p in parts]
    if any(v == FAILS for v in strict):
        return FAILS
    loose = [p(alpha) for p in parts]
    if all(v == HOLDS for v in loose):
        return HOLDS
    if all(v == EQUIVALENT for v in loose):
        return EQUIVALENT
    return UNDECIDED


def repeats_needed(n: int, half_width: float, distance: float) -> Optional[int]:
    """Return the repeats at which an interval of ``half_width`` at ``n`` would clear a bound
    ``distance`` away (half-widths shrink like 1/sqrt(n)); None where it never would."""
    if not (n and half_width and half_width > 0 and distance and abs(distance) > 0):
        return None
    if not (math.isfinite(half_width) and math.isfinite(distance)):
        return None
    return max(int(n) + 1, math.ceil(n * (half_width / abs(distance)) ** 2))


def would(need: Optional[int], unit: str = "repeats", why: str = "") -> str:
    """Return "what would decide it" with a number, or that the budget cannot.

    ``unit``: "repeats" (budget: the paper profile's :data:`PAPER_REPEATS`), "models"
    (:data:`BUDGET_FACTOR` x :data:`STANDARD_MODELS`) or "folds" (x :data:`STANDARD_FOLDS`).
    ``need`` None: the rule gives no planning figure (no interval at this size, or an estimate
    on its bound); ``why`` says which.
    """
    standard = {"models": STANDARD_MODELS, "folds": STANDARD_FOLDS}.get(unit, STANDARD_REPEATS)
    head = {"models": MORE_MODELS, "folds": MORE_REPEATS + " (of the K-fold CV: more folds)"
            }.get(unit, MORE_REPEATS)
    if unit in ("models", "folds"):
        budget = BUDGET_FACTOR * standard
        over = f"over {BUDGET_FACTOR}x the standard profile's {standard}"
    else:
        budget, over = PAPER_REPEATS, f"over the paper profile's {PAPER_REPEATS}"
    if need is None:
        why = why or "no interval, or an estimate on its bound, at this size"
        return f"{head}: no planning figure ({why}); at least {standard} to plan from"
    if need > budget:
        return f"{NOT_DECIDABLE} (about {need} {unit}, {over})"
    return f"{head} (about {need} {unit} at the observed estimate and spread)"


def summary(claims: list) -> str:
    """Return the table's header line: evidence, by-construction and algebra rows apart, and
    the expected number of false decisions among the decided evidence rows."""
    from collections import Counter

    ev = [c for c in claims if c.kind == "evidence"]
    counts = Counter(c.verdict for c in ev)
    parts = ", ".join(f"{counts[v]} {v}" for v in (HOLDS, FAILS, EQUIVALENT, UNDECIDED)
                      if counts[v])
    bound = sum(c.level for c in ev)
    decided = sum(counts[v] for v in DECIDED)
    n_con = sum(c.kind == "by construction" for c in claims)
    n_alg = sum(c.kind == "algebra" for c in claims)
    return (f"{len(claims)} claims: {len(ev)} evidence ({parts or 'none'}); {n_con} by "
            f"construction; {n_alg} algebra checks. Expected false decisions among the "
            f"{decided} decided evidence rows: at most {bound:.2f} (the sum of the "
            f"{len(ev)} evidence rows' levels, valid whatever their dependence).")


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


class OrderingPart:
    """One paired part "a above b" of an ordering claim, decided at any level.

    ``xa, ia, xb, ib``: per repeat index the numerator and denominator of each side's ratio
    of means (a mean: denominator 1), NaN where missing; both sides share the repeat's
    partitions (or reference model), so :func:`robench.stats.paired.shows_above` decides:
    Student's t over complete cycles with the balanced design's ``cycle``, the betting test
    otherwise; ``cycle=1``: i.i.d. units (reference models trained with independent seeds
    on repeat r's split, no held-out sources), Student's t over all of them. Called with a
    one-sided level: :data:`HOLDS` when a is shown above b,
    :data:`FAILS` when b is shown above a, :data:`EQUIVALENT` when ``margin`` is given and
    both ``a - b > -margin`` and ``b - a > -margin`` are shown, else :data:`UNDECIDED`.
    """

    def __init__(self, xa, ia, xb, ib, *, cycle=None, margin: Optional[float] = None):
        import numpy as np

        self.v = [np.asarray(v, float) for v in (xa, ia, xb, ib)]
        self.cycle, self.margin = cycle, margin

    def _above(self, xa, ia, xb, ib, delta, level) -> bool:
        if self.cycle == 1:  # i.i.d. units (reference models): Student's t over them all
            return bool(balanced_test(xa, ia, xb, ib, delta, level, 1)["reject"])
        return bool(shows_above(xa, ia, xb, ib, delta=delta, alpha=level, cycle=self.cycle))

    def __call__(self, level: float) -> str:
        xa, ia, xb, ib = self.v
        if self._above(xa, ia, xb, ib, 0.0, level):
            return HOLDS
        if self._above(xb, ib, xa, ia, 0.0, level):
            return FAILS
        if self.margin and self._above(xa, ia, xb, ib, -self.margin, level) and \
                self._above(xb, ib, xa, ia, -self.margin, level):
            return EQUIVALENT
        return UNDECIDED

    def stats(self) -> dict:
        """Return the paired difference ``d``, its ``se`` and ``n`` (delta method)."""

        res = balanced_test(*self.v, 0.0, SIDE, int(self.cycle) if self.cycle else 1)
        return {k: float(res[k]) for k in ("d", "se", "n")}

    def need(self) -> Optional[int]:
        """Return the repeats at which the observed difference and spread would decide the
        order (or, with a margin, equivalence) at :data:`SIDE`: t planning figure."""

        s = self.stats()
        if not (s["n"] >= 2 and math.isfinite(s["se"]) and s["se"] > 0):
            return None
        sd = s["se"] * math.sqrt(s["n"])
        order = repeats_to_decide(s["d"], sd, int(s["n"]), 1 - SIDE)
        if self.margin and abs(s["d"]) < self.margin:
            eq = repeats_to_decide(self.margin - abs(s["d"]), sd, int(s["n"]), 1 - SIDE)
            order = min(v for v in (order, eq) if v) if (order or eq) else None
        return order


def parts_need(parts: list, alpha: float = SIDE) -> Optional[int]:
    """Return the largest planning figure of the parts still undecided at ``alpha`` (None
    where one of them has none: it sits on its bound)."""
    needs = [p.need() for p in parts if p(alpha) == UNDECIDED]
    if not needs or any(n is None for n in needs):
        return None
    return max(needs)
