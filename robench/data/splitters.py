"""Source-aware partitions as pure functions (sources are scikit-learn's ``groups``).

Every partition is drawn by index from its own generator seeded by (seed, repeat, kind), so
it never depends on data order, the model or what ran before. The cross-validators live in
:mod:`robench.data.sklearn_splitters` (scikit-learn takes seconds to import).
"""

from __future__ import annotations

import math

import numpy as np

KIND_CODES = {"inclusive": 1, "exclusive": 2, "random": 3}
#: Stream of the balanced design's per-(cycle, class) permutations.
_BALANCED_STREAM = 7
#: Held-out designs of the exclusive partition: a source per class drawn at random each
#: repeat (source-aware protocol 1), or in rotation (protocol 2).
HELD_OUT = ("random", "balanced")


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


def _held_out_mask(y, groups, pick) -> np.ndarray:
    """Return a test mask holding, for every class, all samples of its source ``pick(class
    index, its sources)`` (>= 2 each)."""
    y, groups = _check(y, groups)
    mask = np.zeros(y.shape[0], dtype=bool)
    for c_index, c in enumerate(np.unique(y)):
        in_class = y == c
        sources = np.unique(groups[in_class])
        if sources.size < 2:
            raise ValueError(
                f"class {c} has {sources.size} source(s); the exclusive split needs at least 2"
            )
        mask |= in_class & (groups == pick(c_index, sources))
    return mask


def exclusive_test_mask(y, groups, rng: np.random.Generator) -> np.ndarray:
    """Return a test mask holding, for every class, all samples of one random source (>= 2 each)."""
    return _held_out_mask(y, groups, lambda _, sources: rng.choice(sources))


def balanced_exclusive_test_mask(y, groups, *, seed: int, repeat: int) -> np.ndarray:
    """Return the balanced design's exclusive test mask: sources held out in rotation.

    Repeat r is position ``r % k`` of cycle ``r // k`` in a permutation of each class's sources
    drawn afresh per (seed, cycle, class) (docs/intervals.md says why).
    """
    def pick(c_index: int, sources: np.ndarray):
        cycle, position = divmod(int(repeat), sources.size)
        return sources[np.random.default_rng(
            [int(seed), cycle, KIND_CODES["exclusive"], _BALANCED_STREAM, c_index]
        ).permutation(sources.size)[position]]

    return _held_out_mask(y, groups, pick)


def balanced_cycle(y, groups) -> int:
    """Return the length of a complete cycle of the balanced design: the least common
    multiple of the classes' source counts (every class's sources each held out once)."""
    y, groups = _check(y, groups)
    ks = [np.unique(groups[y == c]).size for c in np.unique(y)]
    return int(math.lcm(*ks)) if ks else 0


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


def test_mask(kind: str, y, groups, *, seed: int, repeat: int, test_size: float = 0.2,
              held_out: str = "random") -> np.ndarray:
    """Return the test mask of partition ``kind`` for one repeat (``held_out``: the design)."""
    if kind == "exclusive" and held_out == "balanced":
        return balanced_exclusive_test_mask(y, groups, seed=seed, repeat=repeat)
    if held_out not in HELD_OUT:
        raise ValueError(f"unknown held-out design {held_out!r}; known: {', '.join(HELD_OUT)}")
    rng = partition_rng(seed, repeat, kind)
    if kind == "exclusive":
        return exclusive_test_mask(y, groups, rng)
    if kind == "inclusive":
        return inclusive_test_mask(y, groups, test_size, rng)
    if kind == "random":
        return random_test_mask(y, test_size, rng)
    raise ValueError(f"unknown partition kind {kind!r}; known: {', '.join(KIND_CODES)}")


def validation_split(train_idx, y, fraction: float, rng: np.random.Generator):
    """Split training indices into (fit, validation), stratified; never from the test partition."""
    train_idx = np.asarray(train_idx)
    val_local = _fraction_mask(np.asarray(y)[train_idx], fraction, rng)
    return train_idx[~val_local], train_idx[val_local]
