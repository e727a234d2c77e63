"""Partition invariants (disjoint, covering, seeded) on random inputs, and the sklearn contract."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

from robench.data import SourceExclusiveSplit, SourceInclusiveSplit
from robench.data.splitters import (
    partition_rng,
    test_mask as make_mask,
    validation_split,
)


def random_problem(seed):
    rng = np.random.default_rng(seed)
    n_classes = rng.integers(2, 6)
    k = rng.integers(2, 6)
    sizes = rng.integers(3, 40, n_classes * k)  # uneven sources
    groups = np.repeat(np.arange(n_classes * k), sizes)
    y = groups // k
    perm = rng.permutation(y.size)  # order must not matter
    return y[perm], groups[perm]


@pytest.mark.parametrize("seed", range(25))
def test_exclusive_holds_out_exactly_one_whole_source_per_class(seed):
    y, groups = random_problem(seed)
    test = make_mask("exclusive", y, groups, seed=seed, repeat=0)
    for c in np.unique(y):
        in_test = np.unique(groups[(y == c) & test])
        assert in_test.size == 1, "exactly one source of each class is in test"
        held = in_test[0]
        assert test[groups == held].all(), "all of the held-out source is in test"
        assert not (~test & (groups == held)).any(), "none of it is in train"
        assert np.unique(groups[(y == c) & ~test]).size == np.unique(groups[y == c]).size - 1


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("test_size", [0.2, 0.35])
def test_inclusive_takes_the_fraction_of_every_source(seed, test_size):
    y, groups = random_problem(seed)
    test = make_mask("inclusive", y, groups, seed=seed, repeat=1, test_size=test_size)
    for g in np.unique(groups):
        n = (groups == g).sum()
        assert (test & (groups == g)).sum() == int(round(test_size * n))


@pytest.mark.parametrize("kind", ["inclusive", "exclusive", "random"])
@pytest.mark.parametrize("seed", range(10))
def test_partitions_are_disjoint_cover_and_validation_comes_from_train(kind, seed):
    y, groups = random_problem(seed)
    test = make_mask(kind, y, groups, seed=seed, repeat=2)
    train_all = np.flatnonzero(~test)
    fit, val = validation_split(train_all, y, 0.1, partition_rng(seed, 2, kind, 1))
    test_idx = np.flatnonzero(test)
    parts = np.concatenate([fit, val, test_idx])
    assert np.array_equal(np.sort(parts), np.arange(y.size)), "disjoint and covering"
    assert not set(val) & set(test_idx) and not set(fit) & set(test_idx)
    assert set(val) <= set(train_all)


@pytest.mark.parametrize("kind", ["inclusive", "exclusive", "random"])
def test_same_seed_same_partition_other_seed_or_repeat_differs(kind):
    y, groups = random_problem(3)
    a = make_mask(kind, y, groups, seed=7, repeat=0)
    b = make_mask(kind, y, groups, seed=7, repeat=0)
    assert np.array_equal(a, b)
    others = [make_mask(kind, y, groups, seed=s, repeat=r) for s, r in [(8, 0), (7, 1), (9, 4)]]
    assert any(not np.array_equal(a, o) for o in others)


def test_random_split_is_stratified():
    y, groups = random_problem(5)
    test = make_mask("random", y, groups, seed=0, repeat=0)
    for c in np.unique(y):
        assert (test & (y == c)).sum() == int(round(0.2 * (y == c).sum()))


def test_exclusive_needs_two_sources_per_class():
    y = np.array([0, 0, 0, 1, 1, 1])
    groups = np.array([0, 0, 0, 1, 1, 2])
    with pytest.raises(ValueError, match="class 0 has 1 source"):
        make_mask("exclusive", y, groups, seed=0, repeat=0)


def test_splitters_work_with_cross_val_score_and_match_the_protocol():
    y, groups = random_problem(11)
    X = np.random.default_rng(0).normal(size=(y.size, 4)) + y[:, None]
    cv = SourceExclusiveSplit(n_repeats=4, random_state=3)
    scores = cross_val_score(LogisticRegression(max_iter=200), X, y, groups=groups, cv=cv)
    assert scores.shape == (4,) and np.all((scores >= 0) & (scores <= 1))
    for r, (train, test) in enumerate(cv.split(X, y, groups)):
        expected = make_mask("exclusive", y, groups, seed=3, repeat=r)
        assert np.array_equal(np.flatnonzero(expected), test)
        assert np.array_equal(np.flatnonzero(~expected), train)
    inc = SourceInclusiveSplit(n_repeats=2, test_size=0.25, random_state=1)
    assert inc.get_n_splits() == 2
    assert "test_size=0.25" in repr(inc)
    assert len(cross_val_score(LogisticRegression(max_iter=200), X, y, groups=groups, cv=inc)) == 2


def test_splitter_without_groups_is_a_clear_error():
    with pytest.raises(ValueError, match="groups"):
        list(SourceExclusiveSplit(2, random_state=0).split(np.zeros((4, 1)), [0, 0, 1, 1]))
