"""The overlap rule robench ranked by before the paired test (benchmarks/baselines.py), which
benchmarks/bench.py still prints as the baseline."""

from __future__ import annotations

import pytest

from tests.helpers import load_benchmark

tie_ranks = load_benchmark("baselines").tie_ranks


def test_tie_ranks_share_the_leaders_rank_when_intervals_overlap():
    values = [0.90, 0.85, 0.70, 0.69]
    lows = [0.85, 0.80, 0.65, 0.60]
    highs = [0.95, 0.90, 0.75, 0.78]
    # B overlaps A (leader, rank 1); C does not overlap A: leads at rank 3; D overlaps C
    assert tie_ranks(values, lows, highs) == [1, 1, 3, 3]
    # the ranks follow the input order, whatever it is
    perm = [2, 0, 3, 1]
    assert tie_ranks([values[k] for k in perm], [lows[k] for k in perm],
                        [highs[k] for k in perm]) == [3, 1, 3, 1]


def test_tie_ranks_compare_with_the_leader_not_the_previous_model():
    # A [.88, .92], B [.84, .89] overlaps A; C [.80, .85] overlaps B but not A: no chaining
    assert tie_ranks([0.90, 0.86, 0.82], [0.88, 0.84, 0.80], [0.92, 0.89, 0.85]) == [1, 1, 3]
    # touching bounds overlap (closed intervals)
    assert tie_ranks([0.9, 0.8], [0.85, 0.75], [0.95, 0.85]) == [1, 1]


def test_tie_ranks_direction_missing_bounds_and_missing_values():
    # lower is better: .1 leads; no overlap -> 1, 2
    assert tie_ranks([0.2, 0.1], [0.15, 0.05], [0.25, 0.12],
                        higher_is_better=False) == [2, 1]
    # a model without an interval is the point [value, value]: inside A's interval it ties
    assert tie_ranks([0.9, 0.88, 0.7], [0.85, None, None], [0.95, None, None]) == [1, 1, 3]
    # no value, no rank; without any interval the ranks are plain competition ranks
    assert tie_ranks([0.5, None, 0.7, 0.7], [None] * 4, [None] * 4) == [3, None, 1, 1]
    with pytest.raises(ValueError, match="same length"):
        tie_ranks([0.5], [], [])


