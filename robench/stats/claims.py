"""Paper claims decided by stored scores: holds, does not hold, or undecided, with the evidence.

A metric declares the claims it can test (``MetricSpec.claims``); this module holds the claim
record and the shared decision rules, and names no family. A claim the data cannot decide is
undecided with the reason, never holding; a decided verdict counts as evidence only when its
:class:`Control` (the property absent, at the row's size) gives a different verdict in
:data:`POWER` of its draws (:func:`controlled`). Parts are decided by :func:`decide_parts`
(intersection-union / Bonferroni); :func:`summary` adds the pre-data bound on expected false
decisions. docs/claims.md has the rules and why.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

import numpy as np
from robench.stats.intervals import smallest_fitting, t_quantile
from robench.stats.paired import balanced_test, shows_above

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
#: An ordering claim whose every part is shown within its stated margin: a third outcome.
EQUIVALENT = "equivalent"
#: The figure follows from the definitions, so it is no evidence for or against the claim.
BY_CONSTRUCTION = "by construction: not evidence"
#: The figure checks a formula's algebra (its control, a simulation where the formula's
#: assumption is planted, decides it the same way): a check of the code, not of the data.
ALGEBRA = "algebra check: not evidence"
#: A simpler quantity (the row's named confounder, such as model accuracy) gives the same
#: verdict by the same rule: the figure does not show the claimed property.
CONFOUNDED = "confounded: not evidence"
VERDICTS = (HOLDS, FAILS, EQUIVALENT, UNDECIDED, BY_CONSTRUCTION, ALGEBRA, CONFOUNDED)
#: The verdicts that decide something (and so can be matched by a control).
DECIDED = (HOLDS, FAILS, EQUIVALENT)
#: A row's error bound: each direction of a decision one-sided at ``SIDE`` (a 95% interval).
ALPHA, SIDE = 0.05, 0.025
#: A decided row is evidence only when its control gives a different verdict in at least
#: this share of its draws at the row's size; and "what would decide it" figures are the
#: repeats (models, folds) at which a test would decide with this probability.
POWER = 0.8
#: Draws of a simulated control at the row's size (its rate of a different verdict: k of
#: this many; 16 of 20 is :data:`POWER`).
CONTROL_DRAWS = 20
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
    """One claim of a paper and what robench's scores say about it (a row of docs/claims.md)."""

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
        """Return what the row counts as: evidence, by construction, confounded or algebra."""
        return {BY_CONSTRUCTION: "by construction", ALGEBRA: "algebra",
                CONFOUNDED: "confounded"}.get(self.verdict, "evidence")

    def as_dict(self) -> dict:
        """Return the fields as a dict."""
        return asdict(self)


@dataclass(frozen=True)
class Control:
    """The same computation where the claimed property is absent, and its draws' verdicts."""

    what: str
    verdict: Optional[str]
    figure: str
    algebra: bool = False
    verdicts: tuple = ()
    size: str = ""
    confounder: bool = False

    def draws(self) -> list:
        """Return the verdict of every draw (one for a deterministic control)."""
        return list(self.verdicts) or ([self.verdict] if self.verdict is not None else [])

    def differ(self, verdict: str) -> tuple:
        """Return (k, m): the draws whose verdict differs from ``verdict``, of m."""
        d = self.draws()
        return sum(v != verdict for v in d), len(d)

    def text(self) -> str:
        """Return the control as shown in the table's control column."""
        if self.verdict is None:
            return f"none applies: {self.figure}"
        at = f" at {self.size}" if self.size else ""
        return f"{self.what}{at}: {self.verdict} ({self.figure})"


def modal(verdicts: list) -> tuple:
    """Return (the most common verdict, "k of n") of a control's replicates (ties: undecided)."""
    if not verdicts:
        return UNDECIDED, "no replicate"
    (top, k), *rest = Counter(verdicts).most_common() + [(None, 0)]
    if rest and rest[0][1] == k:
        top = UNDECIDED
    return top, f"{top} in {k} of {len(verdicts)}"


def matched(what: str, verdicts: list, unit: str, figure: str = "", size: str = "",
            **kw) -> Control:
    """Return a :class:`Control` from its draws' verdicts (modal, "k of n"), run at ``size``."""
    v, text = modal(verdicts)
    return Control(what, v, f"{text} {unit}" + (f"; {figure}" if figure else ""),
                   verdicts=tuple(verdicts), size=size, **kw)


def controlled(claim: Claim, control: Control) -> Claim:
    """Return the claim judged against its control (docs/claims.md, "The controls")."""
    out = replace(claim, control=control.text())
    if claim.verdict not in DECIDED or control.verdict is None:
        return out
    k, m = control.differ(claim.verdict)
    rate = f"a different verdict in {k} of {m} draws"
    if m and k / m >= POWER:
        return replace(out, control=f"{control.text()}; {rate} (>= {POWER:.0%}): evidence",
                       evidence={**claim.evidence, "control differs": [k, m]})
    kind = (CONFOUNDED if control.confounder else ALGEBRA if control.algebra
            else BY_CONSTRUCTION)
    return replace(out, verdict=kind, control=f"{control.text()}; {rate} (< {POWER:.0%})",
                   evidence={**claim.evidence, "rule verdict": claim.verdict,
                             "control differs": [k, m]},
                   why=f"the rule says {claim.verdict}, and the control where the property is "
                       f"absent ({control.what}) says so too in {m - k} of {m} draws, a "
                       f"different verdict in only {k} of {m} (under {POWER:.0%}): {claim.why}",
                   would_decide="")


def controlled_all(claim: Claim, controls: list) -> Claim:
    """Return the claim judged against several controls in turn, until one makes it not evidence."""
    out, texts = claim, []
    for control in controls:
        out = controlled(out, control)
        texts.append(out.control)
        if out.kind != "evidence":
            break
    return replace(out, control="; then ".join(texts))


def decide_parts(parts: list, alpha: float = SIDE) -> str:
    """Return the verdict of a claim of parts, each ``part(level) -> verdict`` (docs/claims.md)."""
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


def n_for_power(distance: float, sd: float, n: int = 2, side: float = SIDE,
                power: float = POWER, limit: int = 100_000) -> Optional[int]:
    """Return the smallest m >= n at which a one-sided t test at ``side`` rejects with ``power``.

    Approximation ``(t_{1-side} + t_{power}) sd / sqrt(m) <= |distance|``, df = m - 1; None
    beyond ``limit``. (Half-width = distance is only 62-65% power; 80% needs ~1.4-2x that n.)
    """
    from scipy import stats

    distance = abs(float(distance)) if distance is not None else 0.0
    if not (distance > 0 and sd is not None and math.isfinite(sd) and sd > 0
            and math.isfinite(distance)):
        return None

    def fits(m):
        q = float(stats.t.ppf(1 - side, m - 1) + stats.t.ppf(power, m - 1))
        return q * sd / math.sqrt(m) <= distance

    return smallest_fitting(fits, max(int(n or 2), 2), limit)


def repeats_needed(n: int, half_width: float, distance: float,
                   side: float = SIDE) -> Optional[int]:
    """Return the repeats at which a bound ``distance`` away is cleared with :data:`POWER`."""
    if not (n and n >= 2 and half_width and half_width > 0 and distance and abs(distance) > 0
            and math.isfinite(half_width) and math.isfinite(distance)):
        return None
    sd = half_width * math.sqrt(n) / float(t_quantile(1 - 2 * side, n - 1))
    return n_for_power(distance, sd, int(n) + 1, side)


def tost_need(res: dict) -> Optional[int]:
    """Return the repeats at which an undecided equivalence result would be decided (or None)."""
    if res.get("low") is None or res.get("estimate") is None or res.get("sd") is None:
        return None
    n = res["n"] if isinstance(res["n"], int) else min(res["n"])
    return n_for_power(abs(res["estimate"]) - res["margin"], res["sd"], int(n) + 1,
                       res.get("alpha", 0.05))


def would(need: Optional[int], unit: str = "repeats", why: str = "") -> str:
    """Return "what would decide it" with a number, or that the budget cannot."""
    standard = {"models": STANDARD_MODELS, "folds": STANDARD_FOLDS}.get(unit, STANDARD_REPEATS)
    head = {"models": MORE_MODELS, "folds": MORE_REPEATS + " (of the K-fold CV: more folds)"
            }.get(unit, MORE_REPEATS)
    zoo = unit in ("models", "folds")
    budget = BUDGET_FACTOR * standard if zoo else PAPER_REPEATS
    over = (f"over {BUDGET_FACTOR}x the standard profile's {standard}" if zoo
            else f"over the paper profile's {PAPER_REPEATS}")
    if need is None:
        why = why or "no interval, or an estimate on its bound, at this size"
        return f"{head}: no planning figure ({why}); at least {standard} to plan from"
    if need > budget:
        return f"{NOT_DECIDABLE} (about {need} {unit} for {POWER:.0%} power, {over})"
    return (f"{head} (about {need} {unit} for {POWER:.0%} power at the observed estimate "
            "and spread)")


def counts(claims: list) -> dict:
    """Return the table's counts by kind and verdict, and the pre-data bound (every row's level)."""
    ev = [c for c in claims if c.kind == "evidence"]
    by = Counter(c.verdict for c in ev)
    kinds = Counter(c.kind for c in claims)
    return {"rows": len(claims), "evidence": len(ev),
            **{v: by[v] for v in (HOLDS, FAILS, EQUIVALENT, UNDECIDED)},
            "decided": sum(by[v] for v in DECIDED),
            "by construction": kinds["by construction"], "confounded": kinds["confounded"],
            "algebra": kinds["algebra"], "bound": sum(c.level for c in claims)}


def summary(claims: list) -> str:
    """Return the table's header line: counts by kind and the pre-data bound on false decisions."""
    n = counts(claims)
    parts = ", ".join(f"{n[v]} {v}" for v in (HOLDS, FAILS, EQUIVALENT, UNDECIDED) if n[v])
    return (f"{n['rows']} claims: {n['evidence']} evidence ({parts or 'none'}); "
            f"{n['by construction']} by construction; {n['confounded']} confounded; "
            f"{n['algebra']} algebra checks. Expected false decisions among the "
            f"{n['decided']} decided evidence rows: at most {n['bound']:.2f}, a pre-data "
            f"bound: the sum of the levels of all {n['rows']} rows, each of which could have "
            "been a decided evidence row before the data were seen (valid whatever their "
            "dependence).")


def headline(claims: list) -> str:
    """Return the counts in one sentence (the README's line), from :func:`counts`."""
    n = counts(claims)
    return (f"of {n['rows']} claims {n['evidence']} {_are(n['evidence'])} evidence "
            f"({n[HOLDS]} hold, {n[FAILS]} do not hold, {n[EQUIVALENT]} equivalent, "
            f"{n[UNDECIDED]} undecided; at most {n['bound']:.2f} expected false decisions, a "
            "pre-data bound), "
            f"{n['by construction']} come out the same without the property (by "
            f"construction), {n['confounded']} {_are(n['confounded'])} explained by a simpler "
            f"quantity (confounded) and {n['algebra']} "
            + ("is an algebra check" if n["algebra"] == 1 else "are algebra checks"))


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def _num(v) -> Optional[float]:
    if v is None or isinstance(v, bool):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def compare(a: dict, b: dict) -> tuple:
    """Return (verdict, why) for "a is greater than b" from two rows' intervals."""
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
    """Return the repeats at which two rows' t intervals would stop overlapping, or None."""
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

    return smallest_fitting(fits, n0, limit)


def combine(verdicts: list) -> str:
    """Return the verdict of a claim made of parts: holds if all hold, fails if any fails."""
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if any(v == FAILS for v in verdicts):
        return FAILS
    return UNDECIDED


def within(row: dict, low: float, high: float) -> tuple:
    """Return (verdict, why) for "the value lies in [low, high]" from a row with an interval."""
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
    metrics = sorted(registry.all("metrics"), key=lambda m: (m.display_order, m.name))
    return [claim for m in metrics if m.claims is not None
            for claim in m.claims([r for r in rows if r.get("metric") == m.name])]


class OrderingPart:
    """One paired part "a above b" of an ordering claim, decided at any one-sided level."""

    def __init__(self, xa, ia, xb, ib, *, cycle=None, margin: Optional[float] = None):
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
        """Return the repeats at which the observed difference would decide the pair (planning)."""
        s = self.stats()
        if not (s["n"] >= 2 and math.isfinite(s["se"]) and s["se"] > 0):
            return None
        sd = s["se"] * math.sqrt(s["n"])
        order = n_for_power(s["d"], sd, int(s["n"]) + 1)
        if self.margin and abs(s["d"]) < self.margin:
            eq = n_for_power(self.margin - abs(s["d"]), sd, int(s["n"]) + 1)
            order = min(v for v in (order, eq) if v) if (order or eq) else None
        return order


def parts_need(parts: list, alpha: float = SIDE) -> Optional[int]:
    """Return the largest planning figure of the parts still undecided (None where one has none)."""
    needs = [p.need() for p in parts if p(alpha) == UNDECIDED]
    if not needs or any(n is None for n in needs):
        return None
    return max(needs)
