"""Minimum-cost multicut clustering of feature vectors (bioimage-cpp solvers).

Graph: the symmetric k-nearest-neighbour graph of the points (an edge wherever one point is
among the other's ``knn`` nearest), distances d_ij = ‖f(x_i) − f(x_j)‖² (paper eq. 4).

Edge costs, *supervised* (the paper's setting, used by the purity-ratio metric): a logistic
regression p_join(d) = σ(a + b·d) is fitted on the edges of the same kNN graph built on
*training* features, with label 1 where both ends have the same class (join) and 0 otherwise
(cut), with balanced class weights (equal prior for join and cut: kNN edges are mostly
same-class, and an unweighted fit made almost every test edge attractive, which merged the
graph into one cluster); d is standardised first. The cost of a test edge is

    w_ij = logit(p_join(d_ij)) + bias = a + b·d_ij + bias,

so w > 0 (attractive) where a join is more likely than a cut and w < 0 (repulsive) otherwise,
and the multicut objective min Σ w_e·y_e (eq. 2, y_e = 1 for a cut edge) cuts exactly the
edges whose cutting lowers the energy. ``bias`` shifts the decision boundary: bias = 0 is the
fitted boundary p_join = 1/2 (the distance ``threshold`` reported in the info: where the
same-class and different-class distance distributions of kNN edges cross), bias > 0 joins
more (fewer, larger clusters), bias < 0 cuts more. Fitting on kNN edges of training features
uses the kind of pairs the test graph holds; if those edges carry a single label (perfectly
separated training features), random pairs are added until both occur.

Edge costs, *unsupervised* (the ``multicut`` clusterer, which gets no labels, e.g. to find
sources inside one class): w_ij = (t − d_ij)/s, s the median edge distance and t a quantile of
the edge distances chosen by bisection so that the number of clusters with at least 2 members
is as close as possible to the requested k; leftover singletons join the cluster of their
nearest neighbour. k is therefore a target, not a guarantee.

Solver: greedy additive edge contraction (GAEC), optionally followed by Kernighan-Lin
(``solver="gaec+kl"``); measured on a 70k-node graph KL was up to 16x slower and rarely better.
"""

from __future__ import annotations

import numpy as np

#: Neighbours per node of the kNN graph.
DEFAULT_KNN = 10
#: Nodes above which points are stratified-subsampled before building the graph.
DEFAULT_MAX_NODES = 2000
_P_CLIP = 1e-6


def knn_edges(Z: np.ndarray, knn: int = DEFAULT_KNN) -> tuple:
    """Return (uv uint64 (m, 2) with u < v, squared distances (m,)) of the symmetric kNN graph."""
    from sklearn.neighbors import NearestNeighbors

    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0]
    if n < 2:
        return np.zeros((0, 2), dtype=np.uint64), np.zeros(0)
    k = int(min(max(knn, 1), n - 1))
    nn = NearestNeighbors(n_neighbors=k + 1).fit(Z)
    _, idx = nn.kneighbors(Z)
    u = np.repeat(np.arange(n), k + 1)
    v = idx.ravel()
    keep = u != v
    u, v = u[keep], v[keep]
    uv = np.unique(np.stack([np.minimum(u, v), np.maximum(u, v)], 1), axis=0)
    d = ((Z[uv[:, 0]] - Z[uv[:, 1]]) ** 2).sum(1)
    return uv.astype(np.uint64), d


def solve(n_nodes: int, uv: np.ndarray, costs: np.ndarray, solver: str = "gaec") -> np.ndarray:
    """Return multicut node labels (renumbered 0..m-1) for edge costs (> 0 attracts)."""
    from bioimage_cpp.graph import UndirectedGraph
    from bioimage_cpp.graph import multicut as mc

    if n_nodes == 0:
        return np.zeros(0, dtype=np.int64)
    if len(uv) == 0:
        return np.arange(n_nodes, dtype=np.int64)
    graph = UndirectedGraph.from_edges(int(n_nodes), np.ascontiguousarray(uv, dtype=np.uint64))
    objective = mc.MulticutObjective(graph, np.ascontiguousarray(costs, dtype=np.float64))
    if solver == "gaec":
        labels = mc.GreedyAdditiveMulticut().optimize(objective)
    elif solver == "gaec+kl":
        labels = mc.ChainedMulticutSolvers(
            [mc.GreedyAdditiveMulticut(), mc.KernighanLinMulticut()]).optimize(objective)
    else:
        raise ValueError(f"unknown multicut solver {solver!r}; use 'gaec' or 'gaec+kl'")
    _, labels = np.unique(np.asarray(labels), return_inverse=True)
    return labels.ravel().astype(np.int64)


def stratified_subsample(y: np.ndarray, cap, seed: int) -> np.ndarray:
    """Return sorted indices of at most ``cap`` rows, every class in proportion (seeded)."""
    y = np.asarray(y)
    n = y.shape[0]
    if cap is None or n <= cap:
        return np.arange(n)
    from sklearn.model_selection import train_test_split

    idx, _ = train_test_split(np.arange(n), train_size=int(cap), stratify=y,
                              random_state=int(seed) % (2**32 - 1))
    return np.sort(idx)


class JoinModel:
    """Logistic regression p_join(d) on squared feature distances of kNN edges.

    Parameters
    ----------
    knn : int
        Neighbours per node of the graph whose edges train the model.
    bias : float
        Added to every cost logit(p_join); > 0 joins more, < 0 cuts more.
    seed : int
        Seeds the random pairs added when the kNN edges carry a single label.
    """

    def __init__(self, knn: int = DEFAULT_KNN, bias: float = 0.0, seed: int = 0):
        self.knn = knn
        self.bias = bias
        self.seed = seed

    def __repr__(self) -> str:
        return f"JoinModel(knn={self.knn}, bias={self.bias}, seed={self.seed})"

    def fit(self, Z: np.ndarray, y: np.ndarray) -> "JoinModel":
        """Fit p_join on the kNN edges of labelled features (same class = join)."""
        from sklearn.linear_model import LogisticRegression

        Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
        uv, d = knn_edges(Z, self.knn)
        same = (y[uv[:, 0].astype(np.int64)] == y[uv[:, 1].astype(np.int64)]).astype(int)
        if same.size == 0 or same.min() == same.max():
            rng = np.random.default_rng(self.seed)
            m = max(len(same), 100)
            a, b = rng.integers(0, len(y), m), rng.integers(0, len(y), m)
            ok = a != b
            d = np.concatenate([d, ((Z[a[ok]] - Z[b[ok]]) ** 2).sum(1)])
            same = np.concatenate([same, (y[a[ok]] == y[b[ok]]).astype(int)])
        if same.min() == same.max():
            raise ValueError("cannot fit p_join: all training pairs have the same label "
                             "(a single class?)")
        self.d_mean_, self.d_std_ = float(d.mean()), float(d.std() or 1.0)
        # Balanced weights: join and cut get equal prior weight. kNN edges are mostly
        # same-class (about 95% on MNIST features), so an unweighted fit put nearly every test
        # edge on the attractive side and GAEC merged the graph into one or two clusters.
        lr = LogisticRegression(C=1e4, max_iter=1000, class_weight="balanced")
        lr.fit(((d - self.d_mean_) / self.d_std_)[:, None], same)
        self.coef_, self.intercept_ = float(lr.coef_[0, 0]), float(lr.intercept_[0])
        self.n_pairs_ = int(same.size)
        self.join_fraction_ = float(same.mean())
        return self

    def p_join(self, d: np.ndarray) -> np.ndarray:
        """Return the fitted probability that two points at squared distance ``d`` share a class."""
        from scipy.special import expit

        z = self.intercept_ + self.coef_ * (np.asarray(d, dtype=np.float64) - self.d_mean_) / self.d_std_
        return expit(z)

    def costs(self, d: np.ndarray) -> np.ndarray:
        """Return edge costs logit(p_join(d)) + bias (> 0 attracts), p clipped to [1e-6, 1-1e-6]."""
        p = np.clip(self.p_join(d), _P_CLIP, 1 - _P_CLIP)
        return np.log(p / (1 - p)) + self.bias

    @property
    def threshold(self):
        """Return the squared distance at which the cost is zero (None if p_join is flat)."""
        if self.coef_ == 0:
            return None
        return float(self.d_mean_ + self.d_std_ * (-(self.intercept_ + self.bias) / self.coef_))


def multicut_supervised(Z_test, Z_train, y_train, *, knn: int = DEFAULT_KNN, bias: float = 0.0,
                        solver: str = "gaec", seed: int = 0) -> tuple:
    """Cluster ``Z_test`` by multicut with costs learned on labelled ``Z_train``.

    Returns (labels, info) where info holds the join model's fit and the graph's size.
    """
    model = JoinModel(knn=knn, bias=bias, seed=seed).fit(Z_train, y_train)
    uv, d = knn_edges(Z_test, knn)
    costs = model.costs(d)
    labels = solve(len(Z_test), uv, costs, solver)
    info = {
        "n_nodes": int(len(Z_test)), "n_edges": int(len(uv)), "knn": int(knn),
        "bias": float(bias), "solver": solver, "coef": model.coef_,
        "intercept": model.intercept_, "threshold": model.threshold,
        "train_pairs": model.n_pairs_, "train_join_fraction": model.join_fraction_,
        "attractive_fraction": float((costs > 0).mean()) if costs.size else None,
        "n_clusters": int(labels.max() + 1) if labels.size else 0,
    }
    return labels, info


def _clusters_at(n, uv, d, scale, t, solver):
    labels = solve(n, uv, (t - d) / scale, solver)
    sizes = np.bincount(labels)
    return labels, int((sizes >= 2).sum())


def multicut_fit_predict(Z, k: int, *, seed: int, true_sources=None, knn: int = DEFAULT_KNN,
                         solver: str = "gaec", max_iter: int = 30) -> np.ndarray:
    """Cluster rows of ``Z`` by multicut without labels, aiming at ``k`` clusters (see module).

    ``true_sources`` is ignored; ``seed`` is unused (GAEC is deterministic) but accepted.
    """
    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0]
    if n <= 1:
        return np.zeros(n, dtype=np.int64)
    uv, d = knn_edges(Z, knn)
    scale = float(np.median(d)) or 1.0
    lo, hi = 0.0, 1.0  # quantile levels of the edge distances
    best = None
    for _ in range(max_iter):
        q = (lo + hi) / 2
        labels, m = _clusters_at(n, uv, d, scale, float(np.quantile(d, q)), solver)
        if best is None or abs(m - k) < abs(best[1] - k):
            best = (labels, m)
        if m == k:
            break
        if m > k:
            lo = q  # too many clusters: attract more
        else:
            hi = q
    labels = best[0]
    sizes = np.bincount(labels)
    small = sizes[labels] < 2
    if small.any() and (~small).any():
        from sklearn.neighbors import NearestNeighbors

        big = np.flatnonzero(~small)
        nn = NearestNeighbors(n_neighbors=1).fit(Z[big])
        _, j = nn.kneighbors(Z[small])
        labels = labels.copy()
        labels[small] = labels[big[j[:, 0]]]
    _, labels = np.unique(labels, return_inverse=True)
    return labels.ravel().astype(np.int64)
