"""Statistics: intervals, paired and sequential comparisons, claims and their rules, seeds,
bit vectors."""

import math


def is_finite(value) -> bool:
    """Return True if ``value`` is a real, finite number (a bool is not a score)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
