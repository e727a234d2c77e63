"""The census-free variance of benchmarks/balanced_variance.py: the estimate issue 49's
argument in docs/intervals.md rests on (what a per-class decomposition would recover)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import load_benchmark

census_free_variance = load_benchmark("balanced_variance").census_free_variance


def balanced_run(rng, classes=6, k=5, cycles=3, common=0.5, census=2.0):
    """One simulated pair: per-class differences = census[class, held-out source] + noise
    whose share ``common`` is shared by every class of a repeat (one model trains on all)."""
    n = k * cycles
    held = {r: [0] * classes for r in range(n)}
    for c in range(cycles):
        for j in range(classes):
            for pos, s in enumerate(rng.permutation(k)):
                held[c * k + pos][j] = int(s)
    effect = census * rng.normal(size=(classes, k))
    shared = rng.normal(size=n)
    diff = {r: [float(effect[j, held[r][j]] + np.sqrt(common) * shared[r]
                      + np.sqrt(1 - common) * rng.normal()) for j in range(classes)]
            for r in range(n)}
    return diff, held


@pytest.mark.parametrize("common", [0.0, 0.5, 0.9])
def test_the_census_free_variance_is_unbiased_whatever_the_classes_share(common):
    # the class mean's residual variance is common + (1 - common) / classes, by construction;
    # the census (sd 2 per class, 4x the noise) must not reach the estimate
    rng = np.random.default_rng(7)
    classes = 6
    est = [census_free_variance(*balanced_run(rng, classes, common=common), cycle=5)[3]
           for _ in range(400)]
    true = common + (1 - common) / classes
    assert np.mean(est) == pytest.approx(true, rel=0.1)


def test_the_full_variance_keeps_the_census_and_the_mean_is_the_class_mean():
    rng = np.random.default_rng(3)
    diff, held = balanced_run(rng, census=2.0, common=0.5)
    n, mean, full, free = census_free_variance(diff, held, cycle=5)
    assert n == 15
    assert mean == pytest.approx(np.mean([np.mean(v) for v in diff.values()]))
    assert full > 2 * free  # a census of 4x the noise per class stays in the sample variance


def test_an_unfinished_cycle_and_a_missing_class_value_are_left_out():
    rng = np.random.default_rng(5)
    diff, held = balanced_run(rng)
    diff[15], held[15] = [0.0] * 6, [0] * 6  # one repeat of a fourth cycle
    assert census_free_variance(diff, held, cycle=5)[0] == 15
    diff[2][1] = None
    assert census_free_variance(diff, held, cycle=5)[0] == 14
