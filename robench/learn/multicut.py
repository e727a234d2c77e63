"""Minimum-cost multicut clustering of feature vectors (bioimage-cpp solvers).

Graph: symmetric kNN or complete, squared distances (paper eq. 4), optionally in units of
the median kNN-edge distance (:func:`local_scale`). Costs, supervised (purity-ratio): a
balanced logistic regression p_join(d) on training pairs, ``logit(p_join) + bias`` with the
bias fixed or calibrated (:func:`calibrate_bias`); unsupervised (the ``multicut``
clusterer): ``(t - d)/s`` with t bisected so that about k clusters of >= 2 members form.
Solver: GAEC, optionally + Kernighan-Lin (up to 16x slower on a 70k-node graph, rarely
better). docs/clusterability.md has the design and the measured figures
(benchmarks/multicut_calibration.py).
"""

from __future__ import annotations

import numpy as np

#: Neighbours per node of the kNN graph.
DEFAULT_KNN = 10
_P_CLIP = 1e-6
GRAPHS = ("knn", "complete")
SCALES = ("none", "knn-median")
#: Bias grid of :func:`calibrate_bias`, in logit units (a cost is a log-odds, so the grid is
#: unit-free): a coarse pass over [-8, 8] in steps of 1, then steps of 0.25 within 1 of the
#: best coarse value. Beyond |bias| = 8 nearly every cost has one sign (costs are clipped at
#: logit(1e-6) = -13.8 and GAEC joins or cuts almost everything).
CALIBRATION_RANGE = (-8.0, 8.0)
CALIBRATION_STEPS = (1.0, 0.25)
#: Pairs above which the complete graph's join model is fitted on a seeded random subset.
MAX_FIT_PAIRS = 200_000
#: What :func:`calibrate_bias` maximises on the training graph.
CRITERIA = ("ari", "effective_clusters")


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


def complete_edges(Z: np.ndarray) -> tuple:
    """Return (uv uint64 (m, 2) with u < v, squared distances (m,)) of every pair of rows."""
    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0]
    if n < 2:
        return np.zeros((0, 2), dtype=np.uint64), np.zeros(0)
    u, v = np.triu_indices(n, k=1)
    sq = (Z ** 2).sum(1)
    # the dot products from the n x n Gram matrix: gathering Z[u] and Z[v] held two
    # (n(n-1)/2, dim) arrays, 15 GiB each for 2,000 points of 1,000-d features (the paper
    # profile's multicut of 3conv3fc features), where the Gram matrix is n^2 values
    d = np.maximum(sq[u] + sq[v] - 2.0 * (Z @ Z.T)[u, v], 0.0)
    return np.stack([u, v], 1).astype(np.uint64), d


def local_scale(Z: np.ndarray, knn: int = DEFAULT_KNN) -> float:
    """Return the median squared distance over the kNN edges of ``Z`` (1 if it is 0).

    A unit that follows the point set's spread and density, so a boundary in it transfers
    between graph sizes and between (tighter) training and test features.
    """
    _, d = knn_edges(Z, knn)
    m = float(np.median(d)) if len(d) else 0.0
    return m if m > 0 else 1.0


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
    """Logistic regression p_join(d) on squared feature distances of graph edges."""

    def __init__(self, knn: int = DEFAULT_KNN, bias: float = 0.0, seed: int = 0,
                 graph: str = "knn", scale: str = "none"):
        self.knn, self.bias, self.seed, self.graph, self.scale = knn, bias, seed, graph, scale

    def __repr__(self) -> str:
        extra = "" if self.graph == "knn" else f", graph={self.graph!r}"
        extra += "" if self.scale == "none" else f", scale={self.scale!r}"
        return f"JoinModel(knn={self.knn}, bias={self.bias}, seed={self.seed}{extra})"

    def edges(self, Z: np.ndarray) -> tuple:
        """Return (uv, distances) of ``Z``'s graph, in the units the model works in."""
        if self.scale not in SCALES:
            raise ValueError(f"unknown distance scale {self.scale!r}; use one of {SCALES}")
        if self.graph not in GRAPHS:
            raise ValueError(f"unknown multicut graph {self.graph!r}; use one of {GRAPHS}")
        uv, d = knn_edges(Z, self.knn) if self.graph == "knn" else complete_edges(Z)
        if self.scale == "knn-median" and len(d):
            d = d / local_scale(Z, self.knn)
        return uv, d

    def fit(self, Z: np.ndarray, y: np.ndarray) -> "JoinModel":
        """Fit p_join on the edges of labelled features' graph (same class = join)."""
        from sklearn.linear_model import LogisticRegression

        Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
        uv, d = self.edges(Z)
        unit = local_scale(Z, self.knn) if self.scale == "knn-median" else 1.0
        if len(d) > MAX_FIT_PAIRS:  # a 1-parameter fit needs no million pairs
            keep = np.sort(np.random.default_rng(self.seed).choice(len(d), MAX_FIT_PAIRS,
                                                                   replace=False))
            uv, d = uv[keep], d[keep]
        same = (y[uv[:, 0].astype(np.int64)] == y[uv[:, 1].astype(np.int64)]).astype(int)
        if same.size == 0 or same.min() == same.max():
            rng = np.random.default_rng(self.seed)
            m = max(len(same), 100)
            a, b = rng.integers(0, len(y), m), rng.integers(0, len(y), m)
            ok = a != b
            d = np.concatenate([d, ((Z[a[ok]] - Z[b[ok]]) ** 2).sum(1) / unit])
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
        self.n_pairs_, self.join_fraction_ = int(same.size), float(same.mean())
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


def effective_clusters(labels: np.ndarray) -> float:
    """Return exp(entropy of the cluster sizes): as many equal clusters would be as diverse.

    Unlike the raw count, it cannot be reached by splitting off outliers.
    """
    labels = np.asarray(labels)
    if labels.size == 0:
        return 0.0
    p = np.bincount(labels) / labels.size
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def calibrate_bias(model: JoinModel, Z_train: np.ndarray, y_train: np.ndarray, *,
                   n_nodes: int, knn: int = DEFAULT_KNN, solver: str = "gaec", seed: int = 0,
                   grid=None, criterion: str = "effective_clusters") -> tuple:
    """Return (bias, report): the bias whose multicut of training features best fits the classes."""
    from sklearn.metrics import adjusted_rand_score

    Z_train, y_train = np.asarray(Z_train, dtype=np.float64), np.asarray(y_train)
    sub = stratified_subsample(y_train, int(n_nodes), seed)
    Zs, ys = Z_train[sub], y_train[sub]
    uv, d = model.edges(Zs)
    base = model.costs(d) - model.bias
    n_classes = int(len(np.unique(ys)))
    if criterion not in CRITERIA:
        raise ValueError(f"unknown calibration criterion {criterion!r}; use one of {CRITERIA}")
    scores: dict = {}  # bias -> (ARI, clusters, objective)

    def score(b):
        b = round(float(b), 6)
        if b not in scores:
            labels = solve(len(Zs), uv, base + b, solver)
            ari = float(adjusted_rand_score(ys, labels))
            k = int(labels.max() + 1) if labels.size else 0
            # ari, or the closest effective number of clusters first, then the best ARI
            scores[b] = (ari, k, (ari,) if criterion == "ari" else
                         (-round(abs(effective_clusters(labels) - n_classes), 6), ari))
        return scores[b][2]

    if grid is not None:
        for b in grid:
            score(b)
    else:
        lo, hi = CALIBRATION_RANGE
        coarse, fine = CALIBRATION_STEPS
        for b in np.arange(lo, hi + coarse / 2, coarse):
            score(b)
        best = max(scores, key=lambda b: (scores[b][2], -abs(b)))
        for b in np.arange(best - coarse, best + coarse + fine / 2, fine):
            score(b)
    biases = sorted(scores)
    top = max(scores[b][2] for b in biases)
    ties = [b for b in biases if scores[b][2] == top]
    chosen = ties[(len(ties) - 1) // 2]
    report = {"criterion": criterion, "train_nodes": int(len(Zs)),
              "train_classes": n_classes, "train_ari": scores[chosen][0],
              "train_n_clusters": scores[chosen][1],
              "searched": [[b, scores[b][0], scores[b][1]] for b in biases]}
    return float(chosen), report


def multicut_supervised(Z_test, Z_train, y_train, *, knn: int = DEFAULT_KNN, bias=0.0,
                        solver: str = "gaec", seed: int = 0, graph: str = "knn",
                        criterion: str = "effective_clusters", scale: str = "none") -> tuple:
    """Cluster ``Z_test`` by multicut with costs learned on labelled ``Z_train``."""
    if graph not in GRAPHS:
        raise ValueError(f"unknown multicut graph {graph!r}; use one of {GRAPHS}")
    calibrated = isinstance(bias, str)
    if calibrated and bias != "calibrated":
        raise ValueError(f"bias must be a number or 'calibrated', got {bias!r}")
    model = JoinModel(knn=knn, bias=0.0 if calibrated else float(bias), seed=seed,
                      graph=graph, scale=scale).fit(Z_train, y_train)
    calibration = None
    if calibrated:
        model.bias, calibration = calibrate_bias(model, Z_train, y_train, n_nodes=len(Z_test),
                                                 knn=knn, solver=solver, seed=seed,
                                                 criterion=criterion)
    uv, d = model.edges(Z_test)
    costs = model.costs(d)
    labels = solve(len(Z_test), uv, costs, solver)
    sizes = np.bincount(labels) if labels.size else np.zeros(0, dtype=np.int64)
    info = {
        "n_nodes": int(len(Z_test)), "n_edges": int(len(uv)), "knn": int(knn),
        "graph": graph, "scale": scale, "bias": float(model.bias),
        "bias_mode": "calibrated" if calibrated else "fixed", "solver": solver,
        "coef": model.coef_, "intercept": model.intercept_, "threshold": model.threshold,
        "train_pairs": model.n_pairs_, "train_join_fraction": model.join_fraction_,
        "attractive_fraction": float((costs > 0).mean()) if costs.size else None,
        "n_clusters": int(labels.max() + 1) if labels.size else 0,
        "n_singletons": int((sizes == 1).sum()),
    }
    if calibration is not None:
        info["calibration"] = calibration
    return labels, info


def multicut_fit_predict(Z, k: int, *, seed: int, true_sources=None, knn: int = DEFAULT_KNN,
                         solver: str = "gaec", max_iter: int = 30) -> np.ndarray:
    """Cluster rows of ``Z`` by multicut without labels, aiming at ``k`` clusters."""
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
        labels = solve(n, uv, (float(np.quantile(d, q)) - d) / scale, solver)
        m = int((np.bincount(labels) >= 2).sum())  # clusters of at least 2 members
        if best is None or abs(m - k) < abs(best[1] - k):
            best = (labels, m)
        if m == k:
            break
        lo, hi = (q, hi) if m > k else (lo, q)  # too many clusters: attract more
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
