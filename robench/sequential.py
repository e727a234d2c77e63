"""A group-sequential stopping rule for rho tables: planned looks, a corrected level, decisions.

An interval looked at again and again as repeats accumulate is not a fixed-sample interval:
stopping as soon as it "decides" picks the looks where it happens to be wrong. With K planned
looks (3, 6, 12, ... repeats, doubling up to the maximum), robench computes every interval at
level ``1 - alpha / K`` (Bonferroni over the looks). By the union bound, the probability that
an interval misses its true value at *any* look is at most ``K * alpha / K = alpha``, so the
interval reported at whatever look the rule stops at covers with probability >= 1 - alpha,
for every stopping rule (this one, or a user stopping early by hand). Group-sequential
alpha-spending boundaries (O'Brien-Fleming, Pocock) are tighter, but they assume a normal
statistic with known information fractions; Fieller's ratio interval with 3 repeats and
Welch degrees of freedom is not that, and the union bound holds without any such assumption.
The price is a wider interval at each look (t quantile at 0.9917 instead of 0.975 for K = 6).

:func:`simulate` pins the error rate (tests/test_sequential.py; docs/profile.md):
the uncorrected rule's miss rate is far above alpha, the corrected rule's at or below it.
Everything here is a pure function of numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

#: Repeats at the first look (the quick profile's repeats).
FIRST_LOOK = 3
#: Family-wise error rate of the intervals over all looks.
ALPHA = 0.05
#: Default precision: stop a pair when both rho intervals' half-widths are below this.
PRECISION = 0.01

SEPARATED, PRECISE, UNDECIDED = "separated", "precise", "undecided"


def looks(max_repeats: int, first: int = FIRST_LOOK) -> list:
    """Return the planned looks: ``first``, doubling, ending exactly at ``max_repeats``.

    A doubling that would pass the maximum is replaced by the maximum; a look closer to the
    maximum than half its own size is merged into it (3, 6, 12, 24, 48, 100 for 100, not
    ..., 48, 96, 100), so no look adds only a handful of repeats.

    >>> looks(100)
    [3, 6, 12, 24, 48, 100]
    >>> looks(8), looks(3), looks(2)
    ([3, 8], [3], [2])
    """
    max_repeats, first = int(max_repeats), int(first)
    if max_repeats < 1 or first < 1:
        raise ValueError(f"looks need max_repeats >= 1 and first >= 1, got {max_repeats}, {first}")
    if max_repeats <= first:
        return [max_repeats]
    out = [first]
    while out[-1] < max_repeats:
        nxt = 2 * out[-1]
        if nxt >= max_repeats or max_repeats - nxt < nxt / 2:
            nxt = max_repeats
        out.append(nxt)
    return out


def corrected_level(n_looks: int, alpha: float = ALPHA) -> float:
    """Return the per-look confidence level ``1 - alpha / n_looks`` (Bonferroni over looks)."""
    if n_looks < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n_looks >= 1 and 0 < alpha < 1, got {n_looks}, {alpha}")
    return 1.0 - alpha / n_looks


@dataclass(frozen=True)
class Entry:
    """One model's row of a table at a look: its estimate and interval (None: undefined)."""

    model: str
    estimate: Optional[float]
    low: Optional[float]
    high: Optional[float]

    @property
    def half_width(self) -> Optional[float]:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2


def pair_status(a: Entry, b: Entry, precision: float) -> str:
    """Return how a pair of adjacent models stands: separated, precise or undecided.

    Separated: the two intervals do not overlap (the order is decided). Precise: both
    half-widths are below ``precision`` (the intervals overlap, but more repeats would only
    say the two are within about ``precision`` of each other). An undefined interval is
    undecided.
    """
    if None in (a.low, a.high, b.low, b.high):
        return UNDECIDED
    if a.low > b.high or b.low > a.high:
        return SEPARATED
    if a.half_width < precision and b.half_width < precision:
        return PRECISE
    return UNDECIDED


def decide(entries: Sequence[Entry], precision: float = PRECISION,
           higher_is_better: bool = True) -> dict:
    """Return the table's decision: ``decided``, the ordered models and every adjacent pair.

    Models are ordered by estimate (best first; undefined estimates last). The table is
    decided when every adjacent pair is separated or precise; a table of one model when its
    half-width is below ``precision``.
    """
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(entries, key=lambda e: (e.estimate is None,
                                           sign * (e.estimate if e.estimate is not None else 0),
                                           e.model))
    pairs = [{"pair": [a.model, b.model], "status": pair_status(a, b, precision)}
             for a, b in zip(order, order[1:])]
    if len(order) == 1:
        hw = order[0].half_width
        decided = hw is not None and hw < precision
    else:
        decided = all(p["status"] != UNDECIDED for p in pairs)
    return {"decided": bool(decided), "order": [e.model for e in order], "pairs": pairs}


def stop_reason(decision: dict, n: int, max_repeats: int) -> Optional[str]:
    """Return why a table stops at this look (None: it goes on)."""
    if decision["decided"]:
        statuses = {p["status"] for p in decision["pairs"]}
        if not decision["pairs"] or statuses == {PRECISE}:
            return "every interval narrower than the precision"
        if statuses == {SEPARATED}:
            return "every adjacent pair separated"
        return "every adjacent pair separated or both narrower than the precision"
    if n >= max_repeats:
        return "maximum repeats reached, undecided"
    return None


# --- simulation of the error rate -----------------------------------------------------------


def _fieller_at_looks(x: np.ndarray, i: np.ndarray, plan: Sequence[int], level: float):
    """Return (low, high) arrays of shape (runs, looks): Fieller's interval at every look."""
    from robench.intervals import fieller_bounds

    lows, highs = [], []
    for n in plan:
        xs, is_ = x[:, :n], i[:, :n]
        low, high, _ = fieller_bounds(xs.mean(1), xs.var(1, ddof=1), n,
                                      is_.mean(1), is_.var(1, ddof=1), n, level)
        lows.append(low)
        highs.append(high)
    return np.stack(lows, 1), np.stack(highs, 1)


def simulate(draw_x, draw_i, rho_true: float, *, max_repeats: int = 100, n_runs: int = 40_000,
             alpha: float = ALPHA, corrected: bool = True, precision: Optional[float] = None,
             seed: int = 0) -> dict:
    """Return the simulated miss rate of the rho interval reported by a sequential rule.

    ``draw_x(rng, shape)`` and ``draw_i(rng, shape)`` draw exclusive and inclusive
    accuracies whose true ratio of means is ``rho_true``. Each of ``n_runs`` runs looks at
    :func:`looks` (``max_repeats``), with intervals at :func:`corrected_level` (or at
    ``1 - alpha`` if not ``corrected``) and stops:

    * ``precision=None``: at the first look whose interval misses ``rho_true``, the worst
      stopping rule there is (any data-dependent rule misses at most this often), or at the
      last look;
    * else: at the first look whose half-width is below ``precision``, or the last look.

    Returns ``miss_rate`` (the stopped interval excludes the truth or is undefined; Monte Carlo
    standard error ``mc_se``), ``mean_repeats``, ``level``, ``looks``.
    """
    rng = np.random.default_rng(seed)
    plan = looks(max_repeats)
    level = corrected_level(len(plan), alpha) if corrected else 1.0 - alpha
    x = np.asarray(draw_x(rng, (n_runs, plan[-1])), float)
    i = np.asarray(draw_i(rng, (n_runs, plan[-1])), float)
    low, high = _fieller_at_looks(x, i, plan, level)
    miss = ~((low <= rho_true) & (rho_true <= high))  # NaN bounds (undefined) count as a miss
    if precision is None:
        stop = np.where(miss.any(1), miss.argmax(1), len(plan) - 1)
    else:
        narrow = np.nan_to_num((high - low) / 2, nan=np.inf) < precision
        narrow[:, -1] = True
        stop = narrow.argmax(1)
    missed = miss[np.arange(n_runs), stop]
    rate = float(missed.mean())
    return {"miss_rate": rate, "mc_se": float(np.sqrt(rate * (1 - rate) / n_runs)),
            "mean_repeats": float(np.asarray(plan)[stop].mean()), "level": level,
            "looks": plan, "n_runs": n_runs}
