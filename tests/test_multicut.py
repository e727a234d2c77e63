"""Multicut clustering of features: planted clusters, cost signs, the unsupervised clusterer."""

import numpy as np
import pytest

from robench.multicut import (JoinModel, knn_edges, multicut_fit_predict, multicut_supervised,
                              solve, stratified_subsample)


def blobs(n_per, n_classes=4, dim=8, spread=0.5, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 6, (n_classes, dim))
    y = np.repeat(np.arange(n_classes), n_per)
    return centers[y] + rng.normal(0, spread, (y.size, dim)), y


def test_solve_cuts_negative_edges_only():
    # a path 0-1-2-3 with a repulsive middle edge: two clusters {0,1} and {2,3}
    uv = np.array([[0, 1], [1, 2], [2, 3]], dtype=np.uint64)
    labels = solve(4, uv, np.array([2.0, -3.0, 2.0]))
    assert labels[0] == labels[1] != labels[2] == labels[3]
    assert solve(4, uv, np.array([2.0, 1.0, 2.0])).max() == 0  # all attractive: one cluster


def test_join_model_costs_have_the_documented_sign():
    Z, y = blobs(40)
    model = JoinModel(knn=10).fit(Z, y)
    uv, d = knn_edges(Z, 10)
    same = y[uv[:, 0].astype(int)] == y[uv[:, 1].astype(int)]
    costs = model.costs(d)
    # cost = logit(p_join): positive (attractive) for close, same-class pairs
    assert model.coef_ < 0
    assert (costs[same] > 0).mean() > 0.9
    assert model.costs(np.array([0.0]))[0] > 0 > model.costs(np.array([1e6]))[0]
    # the threshold is the distance with cost 0; bias > 0 moves it outwards (joins more)
    t = model.threshold
    assert abs(model.costs(np.array([t]))[0]) < 1e-6
    shifted = JoinModel(knn=10, bias=1.0).fit(Z, y)
    assert shifted.threshold > t
    np.testing.assert_allclose(shifted.costs(d), costs + 1.0)


def test_supervised_multicut_recovers_planted_clusters():
    Z_train, y_train = blobs(50, seed=1)
    rng = np.random.default_rng(2)
    Z_test, y_test = blobs(30, seed=1)
    Z_test = Z_test + rng.normal(0, 0.1, Z_test.shape)
    labels, info = multicut_supervised(Z_test, Z_train, y_train, knn=10)
    assert info["n_clusters"] == 4
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y_test, labels) == 1.0


def test_unsupervised_multicut_aims_at_k():
    Z, y = blobs(25, n_classes=3, seed=3)
    labels = multicut_fit_predict(Z, 3, seed=0)
    assert labels.max() + 1 == 3
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, labels) == 1.0
    assert (multicut_fit_predict(Z, 3, seed=0) == labels).all()  # deterministic


def test_multicut_is_a_registered_opt_in_clusterer(tiny_registry):
    spec = tiny_registry.get("clusterers", "multicut")
    assert spec.in_default_run is False
    Z, _ = blobs(20, n_classes=2, seed=4)
    labels = spec.fit_predict(Z, 2, seed=0)
    assert sorted(np.unique(labels)) == [0, 1]


def test_stratified_subsample_keeps_class_proportions():
    y = np.repeat([0, 1, 2], [100, 50, 50])
    idx = stratified_subsample(y, 40, seed=0)
    assert len(idx) == 40 and np.bincount(y[idx]).tolist() == [20, 10, 10]
    assert (stratified_subsample(y, None, 0) == np.arange(200)).all()


@pytest.mark.parametrize("solver", ["gaec", "gaec+kl"])
def test_solvers(solver):
    Z, y = blobs(15, n_classes=2, seed=5)
    labels, info = multicut_supervised(Z, Z, y, solver=solver)
    assert info["n_clusters"] == 2


def test_run_all_skips_opt_in_clusterers_in_the_quick_profile(monkeypatch, tmp_path):
    from click.testing import CliRunner

    import robench.runner
    from robench.cli import cli

    seen = {}

    class Stop(Exception):
        pass

    def fake_execute(cfg, *a, **k):
        seen.setdefault("clusterers", []).append(list(cfg.clusterers))
        raise Stop

    monkeypatch.setattr(robench.runner, "execute", fake_execute)
    db = str(tmp_path / "r.db")
    CliRunner().invoke(cli, ["run", "--all", "--db", db])
    CliRunner().invoke(cli, ["run", "--all", "-c", "multicut", "--db", db])
    assert "multicut" not in seen["clusterers"][0] and "kmeans" in seen["clusterers"][0]
    assert seen["clusterers"][1] == ["multicut"]
