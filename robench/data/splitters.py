"""Source-aware partitions as pure functions and as scikit-learn cross-validators.

A *source* is scikit-learn's ``groups``: ``cross_val_score(est, X, y, groups=sources,
cv=SourceExclusiveSplit(...))`` evaluates on held-out sources. Every partition is drawn by
index from its own generator, seeded by (seed, repeat, kind), so it never depends on the
order of the data, on the model, or on what else ran before it.

The cross-validator classes live in :mod:`robench.data.sklearn_splitters` and are importable from
:mod:`robench.data`, loaded on first use, so the protocols, which need only the functions, do
not pay for importing scikit-learn (seconds) on every ``robench run``.
"""

from __future__ import annotations

import numpy as np

KIND_CODES = {"inclusive": 1, "exclusive": 2, "random": 3}


def partition_rng(seed: int, repeat: int, kind: str, *extra: int) -> np.random.Generator:
    """Return the generator of one partition: independent streams per (seed, repeat, kind)."""
    return np.random.default_rng([int(seed), int(repeat), KIND_CODES[kind], *map(int, extra)])


def _check(y, groups):
    y = np.asarray(y)
    if groups is None:
        raise ValueError("source-aware splits need the source id of every sample as `groups`")
    groups = np.asarray(groups)
    if groups.shape != y.shape:
        raise ValueError(f"groups has shape {groups.shape}, y has shape {y.shape}")
    return y, groups


def exclusive_test_mask(y, groups, rng: np.random.Generator) -> np.ndarray:
    """Return a test mask holding, for every class, all samples of one source drawn at random.

    No sample of a held-out source is in training; every class keeps its other sources for
    training, so every class needs at least two sources.
    """
    y, groups = _check(y, groups)
    mask = np.zeros(y.shape[0], dtype=bool)
    for c in np.unique(y):
        in_class = y == c
        sources = np.unique(groups[in_class])
        if sources.size < 2:
            raise ValueError(
                f"class {c} has {sources.size} source(s); the exclusive split needs at least 2"
            )
        held_out = rng.choice(sources)
        mask |= in_class & (groups == held_out)
    return mask


def _fraction_mask(strata, test_size: float, rng: np.random.Generator) -> np.ndarray:
    """Return a mask taking round(test_size * n) samples at random from every stratum."""
    strata = np.asarray(strata)
    mask = np.zeros(strata.shape[0], dtype=bool)
    for s in np.unique(strata):
        idx = np.flatnonzero(strata == s)
        n_test = int(round(test_size * idx.size))
        if n_test:
            mask[rng.choice(idx, size=n_test, replace=False)] = True
    return mask


def inclusive_test_mask(y, groups, test_size: float, rng: np.random.Generator) -> np.ndarray:
    """Return a test mask taking ``test_size`` of every source of every class at random."""
    y, groups = _check(y, groups)
    # A source id may in principle be shared by two classes; stratify by (class, source).
    _, strata = np.unique(np.stack([y, groups]), axis=1, return_inverse=True)
    return _fraction_mask(strata.ravel(), test_size, rng)


def random_test_mask(y, test_size: float, rng: np.random.Generator) -> np.ndarray:
    """Return a source-unaware stratified test mask of ``test_size`` of every class."""
    return _fraction_mask(y, test_size, rng)


def test_mask(kind: str, y, groups, *, seed: int, repeat: int, test_size: float = 0.2) -> np.ndarray:
    """Return the test mask of partition ``kind`` for one repeat (pure, deterministic)."""
    rng = partition_rng(seed, repeat, kind)
    if kind == "exclusive":
        return exclusive_test_mask(y, groups, rng)
    if kind == "inclusive":
        return inclusive_test_mask(y, groups, test_size, rng)
    if kind == "random":
        return random_test_mask(y, test_size, rng)
    raise ValueError(f"unknown partition kind {kind!r}; known: {', '.join(KIND_CODES)}")


def validation_split(train_idx, y, fraction: float, rng: np.random.Generator):
    """Split training indices into (fit, validation), stratified by class.

    Validation is carved from the training partition only: early stopping and model selection
    never see the test partition (robench invariant 1).
    """
    train_idx = np.asarray(train_idx)
    val_local = _fraction_mask(np.asarray(y)[train_idx], fraction, rng)
    return train_idx[~val_local], train_idx[val_local]
