"""Shifted K-fold CV (VAE-VGMM paper): folds, partitions, Wasserstein distances, end to end."""

import numpy as np
import pytest

from tests.helpers import run_config, clusterings
from robench.families.shifted_cv import protocol as sc
from robench.run.runner import execute, plan_run
from tests.plugins import tiny


def _toy_groups(n_classes=3, n_subs=3, per_sub=7):
    """Return y and globally unique sub-domain ids: n_subs sub-domains of per_sub rows per class."""
    groups = np.repeat(np.arange(n_classes * n_subs), per_sub)
    rng = np.random.default_rng(0)
    perm = rng.permutation(groups.size)  # order of rows must not matter
    groups = groups[perm]
    return groups // n_subs, groups


def test_merge_folds_puts_every_class_in_every_fold_disjoint_and_covering():
    y, groups = _toy_groups()
    folds = sc.merge_folds(y, groups, 3, repeat=0, n_repeats=1, seed=0)
    assert folds.min() == 0 and folds.max() == 2  # every sample in exactly one fold
    for f in range(3):
        assert set(y[folds == f]) == {0, 1, 2}, "every class in every fold"
    for g in np.unique(groups):
        assert np.unique(folds[groups == g]).size == 1, "a sub-domain is never split"
    # repeat = 1: no shuffle, the k-th sub-domain of each class goes to fold k (Algorithm 1)
    for c in range(3):
        subs = np.unique(groups[y == c])
        assert [int(folds[groups == s][0]) for s in subs] == [0, 1, 2]


def test_repeats_reshuffle_the_assignment_but_keep_subdomains_intact():
    y, groups = _toy_groups(n_classes=4, n_subs=4)
    by_repeat = [sc.merge_folds(y, groups, 4, repeat=r, n_repeats=3, seed=5) for r in range(3)]
    for folds in by_repeat:
        for g in np.unique(groups):
            assert np.unique(folds[groups == g]).size == 1
        for f in range(4):
            assert set(y[folds == f]) == {0, 1, 2, 3}
        # the same sub-domains, only relabelled: each fold is a union of whole sub-domains
        assert sorted(np.bincount(folds)) == sorted(np.bincount(by_repeat[0]))
    assert any(not np.array_equal(by_repeat[0], other) for other in by_repeat[1:])
    again = sc.merge_folds(y, groups, 4, repeat=1, n_repeats=3, seed=5)
    assert np.array_equal(again, by_repeat[1]), "deterministic given seed and repeat"


def test_more_subdomains_than_folds_go_round_robin_and_fewer_is_an_error():
    y, groups = _toy_groups(n_classes=2, n_subs=4)
    folds = sc.merge_folds(y, groups, 3, repeat=0, n_repeats=1, seed=0)
    assert set(folds) == {0, 1, 2}
    for g in np.unique(groups):
        assert np.unique(folds[groups == g]).size == 1
    with pytest.raises(ValueError, match="sub-domain"):
        sc.merge_folds(y, groups, 5, repeat=0, n_repeats=1, seed=0)


def test_random_folds_are_stratified_and_fold_partition_is_disjoint_and_covering():
    y, _ = _toy_groups(per_sub=10)
    folds = sc.random_folds(y, 3, repeat=0, seed=0)
    assert folds.min() == 0 and folds.max() == 2
    for f in range(3):
        assert np.bincount(y[folds == f]).tolist() == [10, 10, 10]
    assert not np.array_equal(folds, sc.random_folds(y, 3, repeat=1, seed=0))
    train, val, test = sc.fold_partition(folds, y, 1, 0.2, np.random.default_rng(0))
    assert np.array_equal(np.sort(test), np.flatnonzero(folds == 1))
    assert not (set(train) & set(val)) and not (set(test) & (set(train) | set(val)))
    assert len(train) + len(val) + len(test) == len(y)
    assert np.bincount(y[val]).tolist() == [4, 4, 4]  # 20% of each class's 20 rows


def test_wasserstein_of_identical_clouds_is_zero_and_grows_with_a_planted_shift():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(150, 5))
    same, info = sc.wasserstein1(a, a.copy())
    assert info["converged"] and same == pytest.approx(0.0, abs=1e-6)
    b = rng.normal(size=(150, 5))
    values = []
    for shift in (0.0, 0.5, 1.0, 2.0):
        v, _ = sc.wasserstein1(a, b + shift / np.sqrt(5))
        values.append(v)
    assert values == sorted(values) and values[-1] > values[0] + 1.0
    # a pure translation by t moves W1 by exactly |t|
    t = np.array([3.0, 0, 0, 0, 0])
    assert sc.wasserstein1(a, a + t)[0] == pytest.approx(3.0, rel=1e-6)


def test_a_distance_is_reported_only_when_pot_converged():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(300, 4)), rng.normal(size=(300, 4)) + 1
    value, info = sc.wasserstein1(a, b, num_itermax=10, max_num_itermax=50)
    assert value is None and not info["converged"] and info["warning"]
    value, info = sc.wasserstein1(a, b, num_itermax=10)  # raised tenfold until it converges
    assert value is not None and info["converged"] and info["num_itermax"] > 10


def test_fold_distances_see_the_planted_shift_and_not_the_random_folds():
    rng = np.random.default_rng(2)
    y = np.repeat([0, 1], 120)
    latent = rng.normal(size=(240, 3))
    domains = np.tile(np.repeat([0, 1, 2], 40), 2)  # three sub-domains per class
    latent[:, 0] += 3.0 * domains  # planted shift between sub-domains
    groups = y * 3 + domains
    shifted = sc.merge_folds(y, groups, 3, repeat=0, n_repeats=1, seed=0)
    rand = sc.random_folds(y, 3, repeat=0, seed=0)
    d_shift = sc.fold_distances(latent, shifted, 3, max_points=60, rng=np.random.default_rng(0))
    d_rand = sc.fold_distances(latent, rand, 3, max_points=60, rng=np.random.default_rng(0))
    m = np.array(d_shift["matrix"], float)
    assert np.allclose(m, m.T) and np.allclose(np.diag(m), 0)
    assert d_shift["points_used"] == [60, 60, 60] and d_shift["fold_sizes"] == [80, 80, 80]
    ratio = sc.ratio_of_offdiagonal_means(d_shift["matrix"], d_rand["matrix"])
    assert ratio > 3
    assert sc.mean_offdiagonal([[0.0, None], [None, 0.0]]) is None


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"],
                metrics=["shifted-cv"], repeats=3, executor="local",
                shifted_cv={"folds": 3, "repeats": 2, "vae_epochs": 1, "max_points": 40,
                            "vae_max_train": None})
    base.update(kw)
    return run_config(**base)


def test_plan_shares_random_folds_across_clusterers_and_caps_repeats(tiny_registry):
    plan = plan_run(cfg(clusterers=["kmeans", "oracle"]), tiny_registry)
    kinds = [s["kind"] for s in plan.specs.values()]
    assert kinds.count("random") == 3 * 2, "random CV is clusterer-independent: planned once"
    assert kinds.count("shifted") == 2 * 3 * 2 and kinds.count("wasserstein") == 2
    assert all(s["clusterer"] == "" for s in plan.specs.values() if s["kind"] == "random")
    capped = plan_run(cfg(repeats=1), tiny_registry)
    assert {s["repeat"] for s in capped.specs.values()} == {0}


def test_end_to_end_tiny_run_stores_curves_scores_and_reruns_nothing(tiny_registry, store):
    report = execute(cfg(), tiny_registry, store)
    assert not report.failed, report.failed
    rows = store.trials()
    assert len(rows) == 3 * 2 * 2 + 1
    fold_rows = [r for r in rows if r["kind"] != "wasserstein"]
    for r in fold_rows:
        assert r["protocol"] == "shifted-cv" and r["n_test"] > 0 and r["n_val"] > 0
        assert r["n_train"] + r["n_val"] + r["n_test"] == 108
    scores = {(s["model"], s["score"]): s for s in store.scores(metric="shifted-cv")}
    for name in ("shifted-cv", "acc_random", "drop", "gap_shifted", "gap_random", "std_ratio"):
        assert ("centroid", name) in scores
    head = scores[("centroid", "shifted-cv")]
    assert head["n"] == 6 and 0 <= head["value"] <= 1 and head["definition"]
    assert len(head["details"]["per_fold"]["shifted"]["test"]) == 6
    w = scores[("", "wasserstein_ratio")]
    assert w["value"] is not None and w["value"] > 0
    mats = w["details"]["repeats"][0]
    assert len(mats["shifted"]["matrix"]) == 3 and len(mats["random"]["matrix"]) == 3
    clus = next(c for c in clusterings(store) if c["details"].get("protocol") == "shifted-cv")
    assert clus["k"] == 3 and sum(clus["details"]["fold_sizes"]) == 108

    tiny.SEEN["fit_calls"] = 0
    again = execute(cfg(), tiny_registry, store)
    assert again.n_ran == 0 and tiny.SEEN["fit_calls"] == 0

    from click.testing import CliRunner

    from robench.cli import cli

    out = CliRunner().invoke(cli, ["results", "--metric", "shifted-cv", "--db", str(store.path)])
    assert out.exit_code == 0, out.output
    assert "sub-domains by kmeans" in out.output and "centroid" in out.output
    assert "Wasserstein ratio" in out.output


def test_test_fold_never_reaches_fit_or_validation(tiny_registry, store):
    tiny.SEEN["fit"].clear()
    tiny.SEEN["val"].clear()
    execute(cfg(models=["spy"]), tiny_registry, store)
    from robench.run.trials import TrialEnv

    ds = TrialEnv(tiny_registry).dataset("tiny")
    as_set = lambda X: frozenset(r.tobytes() for r in X)
    by_fit = {}
    for row in store.trials():
        if row["kind"] == "wasserstein":
            continue
        train, val, test = sc.partition(row["spec"], ds, tiny_registry)
        by_fit[as_set(ds.X[train])] = (as_set(ds.X[val]), as_set(ds.X[test]))
    assert len(tiny.SEEN["fit"]) == len(by_fit) == 12
    for X_fit, X_val in zip(tiny.SEEN["fit"], tiny.SEEN["val"]):
        val_rows, test_rows = by_fit[as_set(X_fit)]
        assert as_set(X_val) == val_rows
        assert not test_rows & as_set(X_fit) and not test_rows & as_set(X_val)


def test_per_epoch_test_accuracy_is_observed_and_never_steers_training():
    """The test-curve callback changes neither the training path nor the selected epoch."""
    import functools

    from robench.learn.train import MLP, TorchClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 6)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=240) > 0).astype(np.int64)
    X_test = X[:60] + 1.5  # a shifted test set
    y_test = y[:60]
    kw = dict(seed=3, max_epochs=6, patience=2, batch_size=32, lr=1e-2)
    module = functools.partial(MLP, 6, 2, hidden=(16,))
    plain = TorchClassifier(module, **kw).fit(X[60:200], y[60:200], X[200:], y[200:])
    observed = TorchClassifier(module, epoch_callback=sc._test_curve(X_test, y_test), **kw)
    observed.fit(X[60:200], y[60:200], X[200:], y[200:])
    assert all("test_accuracy" in h for h in observed.history_)
    strip = [{k: v for k, v in h.items() if k != "test_accuracy"} for h in observed.history_]
    assert strip == plain.history_
    assert observed.best_epoch_ == plain.best_epoch_
    assert np.array_equal(observed.predict(X_test), plain.predict(X_test))
    # the restored epoch's recorded test accuracy is the reported one
    final = float(np.mean(observed.predict(X_test) == y_test))
    assert observed.history_[observed.best_epoch_ - 1]["test_accuracy"] == pytest.approx(final)
