"""Statistics: intervals, paired and sequential comparisons, claims and their rules, seeds,
bit vectors."""
