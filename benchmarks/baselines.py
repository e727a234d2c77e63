"""Rules robench replaced, kept as the baselines its benchmarks compare against.

Not robench's rules any more: nothing in robench/ calls them. ``benchmarks/bench.py`` shows
what the old overlap rule ranked beside what the paired test decides.
"""

from __future__ import annotations

from typing import Sequence


def tie_ranks(values: Sequence, lows: Sequence, highs: Sequence, *,
              higher_is_better: bool = True) -> list:
    """Return competition ranks in which overlapping intervals share the leader's rank.

    Rule. Models are ordered by value, best first (ties in value keep their input order). The
    first model leads block 1 and gets rank 1. Each next model joins the current block, and
    takes the block leader's rank, if its interval overlaps the *leader's* interval
    (``low <= leader_high and high >= leader_low``, closed intervals); otherwise it leads a
    new block with rank 1 + the number of models before it (competition ranking: 1, 1, 3).
    Comparing with the leader, not with the previous model, keeps a block from chaining: A
    overlapping B and B overlapping C does not tie A with C unless A overlaps C.

    A model whose interval is missing (a None bound) counts as the point [value, value]; a
    model whose value is None gets rank None and is left out of the ordering.

    Parameters
    ----------
    values, lows, highs : sequences of float or None
        One entry per model, aligned.
    higher_is_better : bool
        Direction of the metric (MetricSpec.higher_is_better).

    Returns
    -------
    list of int or None
        Ranks aligned with the input; a shared rank marks a tie.
    """
    n = len(values)
    if not (len(lows) == len(highs) == n):
        raise ValueError("values, lows and highs must have the same length")
    ranks: list = [None] * n
    present = [j for j in range(n) if values[j] is not None]
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(present, key=lambda j: (sign * float(values[j]), j))

    def span(j):
        lo, hi = lows[j], highs[j]
        v = float(values[j])
        if lo is None or hi is None:
            return v, v
        return float(min(lo, hi)), float(max(lo, hi))

    leader = None
    for pos, j in enumerate(order):
        lo, hi = span(j)
        if leader is not None:
            llo, lhi = span(leader)
            if lo <= lhi and hi >= llo:
                ranks[j] = ranks[leader]
                continue
        leader = j
        ranks[j] = pos + 1
    return ranks
