"""Multicut clustering of features: planted clusters, cost signs, the unsupervised clusterer."""

import numpy as np
import pytest

from robench.learn.multicut import (JoinModel, knn_edges, multicut_fit_predict, multicut_supervised,
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

    import robench.run.runner
    from robench.cli import cli

    seen = {}

    class Stop(Exception):
        pass

    def fake_execute(cfg, *a, **k):
        seen.setdefault("clusterers", []).append(list(cfg.clusterers))
        raise Stop

    monkeypatch.setattr(robench.run.runner, "execute", fake_execute)
    db = str(tmp_path / "r.db")
    CliRunner().invoke(cli, ["run", "--all", "--db", db])
    CliRunner().invoke(cli, ["run", "--all", "-c", "multicut", "--db", db])
    assert "multicut" not in seen["clusterers"][0] and "kmeans" in seen["clusterers"][0]
    assert seen["clusterers"][1] == ["multicut"]


# --- a calibrated boundary: n_clusters comparable to the classes, purity not trivially 1 ------


def purity(labels, y):
    table = np.zeros((labels.max() + 1, y.max() + 1), dtype=int)
    np.add.at(table, (labels, y), 1)
    return table.max(1).sum() / len(y)


def gap_blobs(sep, test_spread, n_classes=6, dim=16, n_train=60, n_test=30, seed=1):
    """Gaussian classes whose test features are more spread out than the training ones (as a
    trained model's are); the generator of benchmarks/multicut_calibration.py's gap rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, sep, (n_classes, dim))
    y_tr, y_te = np.repeat(np.arange(n_classes), n_train), np.repeat(np.arange(n_classes), n_test)
    return (centres[y_te] + rng.normal(0, test_spread, (len(y_te), dim)), y_te,
            centres[y_tr] + rng.normal(0, 1.0, (len(y_tr), dim)), y_tr)


CALIBRATED = dict(bias="calibrated", graph="complete", scale="knn-median")


def test_bias_zero_is_degenerate_and_the_calibrated_boundary_is_not():
    Z_te, y_te, Z_tr, y_tr = gap_blobs(sep=2.0, test_spread=1.3)
    # the old default: 180 nodes fall apart into ~160 clusters of about one point, purity 1
    labels, info = multicut_supervised(Z_te, Z_tr, y_tr)
    assert info["n_clusters"] >= 5 * 6 and len(y_te) / info["n_clusters"] < 2
    assert purity(labels, y_te) > 0.98
    # calibrated on the training features: about one cluster per class, still pure
    labels, info = multicut_supervised(Z_te, Z_tr, y_tr, **CALIBRATED)
    assert 6 / 2 <= info["n_clusters"] <= 2 * 6, info["n_clusters"]
    assert info["n_clusters"] == labels.max() + 1 and info["n_singletons"] <= 3
    assert info["bias_mode"] == "calibrated" and info["bias"] == info["calibration"]["searched"][
        [b for b, _, _ in info["calibration"]["searched"]].index(info["bias"])][0]
    assert info["calibration"]["train_nodes"] == len(y_te)  # calibrated at the test graph's size
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y_te, labels) > 0.8


def test_calibrated_purity_follows_class_overlap_instead_of_being_about_1():
    Z_te, y_te, Z_tr, y_tr = gap_blobs(sep=1.5, test_spread=1.2)  # overlapping classes
    labels0, info0 = multicut_supervised(Z_te, Z_tr, y_tr)
    assert purity(labels0, y_te) > 0.98 and info0["n_clusters"] > 100  # trivially pure
    labels, info = multicut_supervised(Z_te, Z_tr, y_tr, **CALIBRATED)
    assert info["n_clusters"] <= 3 * 6
    assert 0.5 < purity(labels, y_te) < 0.85  # overlap shows; 6 separated classes give ~1
    Z_te, y_te, Z_tr, y_tr = gap_blobs(sep=4.0, test_spread=1.0)
    labels, info = multicut_supervised(Z_te, Z_tr, y_tr, **CALIBRATED)
    assert info["n_clusters"] == 6 and purity(labels, y_te) == 1.0


def test_calibration_on_real_digits_pixels():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(y))
    te, tr = perm[:300], perm[300:900]
    # measured: bias 0 gives 85 clusters (45 singletons), purity .89; calibrated 19 (5), .56
    labels0, info0 = multicut_supervised(X[te] / 16, X[tr] / 16, y[tr])
    assert info0["n_clusters"] > 60 and info0["n_singletons"] > 30
    labels, info = multicut_supervised(X[te] / 16, X[tr] / 16, y[tr], **CALIBRATED)
    assert 10 / 2 <= info["n_clusters"] <= 3 * 10, info["n_clusters"]
    assert purity(labels, y[te]) < purity(labels0, y[te]) - 0.2


def test_effective_clusters_by_hand():
    from robench.learn.multicut import effective_clusters

    assert effective_clusters(np.array([0, 0, 1, 1, 2, 2])) == pytest.approx(3.0)
    # one cluster of 8 and two singletons: p = (.8, .1, .1), H = -(.8 ln .8 + 2 * .1 ln .1)
    # = .178515 + .460517 = .639032, exp(H) = 1.8946: the singletons barely count
    assert effective_clusters(np.array([0] * 8 + [1, 2])) == pytest.approx(1.894646, abs=1e-6)
    assert effective_clusters(np.arange(5)) == pytest.approx(5.0)
    assert effective_clusters(np.array([], dtype=int)) == 0.0


def test_complete_edges_local_scale_and_scaled_join_model_by_hand():
    from robench.learn.multicut import complete_edges, local_scale

    Z = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    uv, d = complete_edges(Z)
    assert uv.tolist() == [[0, 1], [0, 2], [1, 2]] and d.tolist() == [9.0, 16.0, 25.0]
    # 1 neighbour each: edges 0-1 (9) and 0-2 (16) (2's nearest is 0): median 12.5
    assert local_scale(Z, knn=1) == pytest.approx(12.5)
    # a scaled model does not see a global change of scale of the features
    Z, y = blobs(30, n_classes=3, seed=6)
    a = JoinModel(graph="complete", scale="knn-median").fit(Z, y)
    b = JoinModel(graph="complete", scale="knn-median").fit(10 * Z, y)
    np.testing.assert_allclose(a.costs(a.edges(Z)[1]), b.costs(b.edges(10 * Z)[1]), atol=1e-6)
    assert "scale='knn-median'" in repr(a) and repr(JoinModel()) == (
        "JoinModel(knn=10, bias=0.0, seed=0)")  # the default's repr is unchanged


def test_calibrate_bias_takes_the_middle_of_a_plateau_and_reports_the_search():
    from robench.learn.multicut import calibrate_bias

    Z, y = blobs(20, n_classes=3, seed=7)  # separated: a wide range of biases is perfect
    model = JoinModel().fit(Z, y)
    grid = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 20.0]
    bias, report = calibrate_bias(model, Z, y, n_nodes=len(y), grid=grid, criterion="ari")
    perfect = [b for b, ari, _ in report["searched"] if ari == 1.0]
    assert perfect and bias == perfect[(len(perfect) - 1) // 2]
    assert [b for b, _, _ in report["searched"]] == sorted(grid)
    assert report["train_ari"] == 1.0 and report["train_n_clusters"] == 3
    assert model.bias == 0.0  # the search does not change the model


def test_calibration_options_are_checked():
    Z, y = blobs(10, n_classes=2, seed=8)
    with pytest.raises(ValueError, match="bias must be a number or 'calibrated'"):
        multicut_supervised(Z, Z, y, bias="auto")
    with pytest.raises(ValueError, match="unknown multicut graph"):
        multicut_supervised(Z, Z, y, graph="full")
    with pytest.raises(ValueError, match="unknown calibration criterion"):
        multicut_supervised(Z, Z, y, bias="calibrated", criterion="purity")
    with pytest.raises(ValueError, match="unknown distance scale"):
        multicut_supervised(Z, Z, y, scale="std")


def test_complete_edges_match_direct_distances_without_per_pair_feature_copies():
    """Every pair's squared distance, as a direct computation gives it; memory ~ n^2, not
    n^2 x dim (2,000 points of 1,000-d features once asked for two 15 GiB arrays)."""
    import tracemalloc

    from robench.learn.multicut import complete_edges

    rng = np.random.default_rng(3)
    Z = rng.normal(size=(120, 40))
    uv, d = complete_edges(Z)
    u, v = uv[:, 0].astype(int), uv[:, 1].astype(int)
    assert len(d) == 120 * 119 // 2 and (u < v).all()
    np.testing.assert_allclose(d, ((Z[u] - Z[v]) ** 2).sum(1), rtol=1e-9, atol=1e-9)
    Z = rng.normal(size=(400, 1000))
    tracemalloc.start()
    complete_edges(Z)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    pairs = 400 * 399 // 2
    assert peak < pairs * 1000 * 8 / 10, peak  # far below one (pairs, dim) float64 copy
