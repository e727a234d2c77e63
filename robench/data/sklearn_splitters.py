"""Source-aware partitions as scikit-learn cross-validators (imported by robench.data lazily)."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import BaseCrossValidator

from robench.data.splitters import test_mask


class _SourceSplit(BaseCrossValidator):
    """Shared machinery of the repeated source-aware splitters."""

    _kind = ""
    __metadata_request__split = {"groups": True}

    def get_n_splits(self, X=None, y=None, groups=None):
        """Return the number of repeats."""
        return self.n_repeats

    def _seed(self):
        if self.random_state is None:
            return int(np.random.SeedSequence().entropy % (2**32))
        if isinstance(self.random_state, (int, np.integer)):
            return int(self.random_state)
        raise ValueError("random_state must be an int or None")

    def split(self, X, y, groups=None):
        """Yield (train, test) index arrays, one pair per repeat."""
        if y is None:
            raise ValueError(f"{type(self).__name__} needs y: sources are clustered per class")
        y = np.asarray(y)
        seed = self._seed()
        for r in range(self.n_repeats):
            mask = test_mask(self._kind, y, groups, seed=seed, repeat=r,
                             test_size=getattr(self, "test_size", 0.2))
            yield np.flatnonzero(~mask), np.flatnonzero(mask)


class SourceExclusiveSplit(_SourceSplit):
    """Repeated source-exclusive split: per class, one whole source is the test set.

    Parameters
    ----------
    n_repeats : int, default=10
        Number of (train, test) pairs; each draws the held-out source of every class anew.
    random_state : int or None, default=None
        Seed; the same seed gives the same partitions as robench's source-aware protocol.
    """

    _kind = "exclusive"

    def __init__(self, n_repeats=10, random_state=None):
        self.n_repeats, self.random_state = n_repeats, random_state


class SourceInclusiveSplit(_SourceSplit):
    """Repeated source-inclusive split: ``test_size`` of every source of every class is test.

    Parameters
    ----------
    n_repeats : int, default=10
        Number of (train, test) pairs.
    test_size : float, default=0.2
        Fraction of every source placed in the test set.
    random_state : int or None, default=None
        Seed; the same seed gives the same partitions as robench's source-aware protocol.
    """

    _kind = "inclusive"

    def __init__(self, n_repeats=10, test_size=0.2, random_state=None):
        self.n_repeats, self.test_size, self.random_state = n_repeats, test_size, random_state
