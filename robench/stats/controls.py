"""Null worlds for the claims' controls: the same computations on data without sub-domains.

i.i.d. Gaussian classes clustered per class by k-means (or, for the oracle, shuffled source
ids), classified by a nearest-class-mean stand-in; seeded numpy, well under a second per
null data set. docs/claims.md ("The controls") has why.
"""

from __future__ import annotations

import numpy as np

#: The null data set: 10 classes of 100 points in 8 dimensions (the audit's figures for the
#: Wasserstein ratio were 1.93 at d = 2 and 1.17 at d = 8), class means drawn N(0, SEP^2 I):
#: about 85% accuracy for a nearest-mean model.
CLASSES, PER_CLASS, DIM, SEP = 10, 100, 8, 1.0


def gaussian_classes(rng, n_classes: int = CLASSES, per_class: int = PER_CLASS,
                     dim: int = DIM, sep: float = SEP) -> tuple:
    """Return (X, y): one isotropic unit Gaussian per class, no sub-domains."""
    means = sep * rng.standard_normal((n_classes, dim))
    y = np.repeat(np.arange(n_classes), per_class)
    return means[y] + rng.standard_normal((len(y), dim)), y


def kmeans(X: np.ndarray, k: int, rng, iters: int = 30) -> np.ndarray:
    """Return Lloyd's k-means labels of X (k-means++ start): the clusterer of the control."""
    n = len(X)
    centres = [X[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min(((X[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), 1)
        centres.append(X[rng.choice(n, p=d2 / d2.sum()) if d2.sum() > 0 else rng.integers(n)])
    c = np.array(centres)
    labels = np.zeros(n, int)
    for _ in range(iters):
        labels = ((X[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        onehot = np.eye(k)[labels]
        count = onehot.sum(0)[:, None]
        new = np.where(count > 0, (onehot.T @ X) / np.maximum(count, 1), c)
        if np.allclose(new, c):
            break
        c = new
    return labels


def per_class_sources(X, y, k: int, rng, shuffled: bool = False) -> np.ndarray:
    """Return each point's source in its class: k-means per class, or (``shuffled``) random
    labels of the same sizes (the oracle's control: ids that carry nothing)."""
    src = np.zeros(len(y), int)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        lab = kmeans(X[idx], k, rng)
        src[idx] = rng.permutation(lab) if shuffled else lab
    return src


def nearest_mean_accuracy(X, y, train: np.ndarray, test: np.ndarray) -> float:
    """Return the test accuracy of the nearest-class-mean model fitted on ``train``."""
    classes, inv = np.unique(y[train], return_inverse=True)
    onehot = np.eye(len(classes))[inv]
    means = (onehot.T @ X[train]) / onehot.sum(0)[:, None]
    d2 = (X[test] ** 2).sum(1)[:, None] - 2 * X[test] @ means.T + (means ** 2).sum(1)[None]
    return float(np.mean(classes[d2.argmin(1)] == y[test]))


def _share_per_group(group: np.ndarray, share: float, rng) -> np.ndarray:
    """Return a mask with ``max(1, round(share * size))`` random members of every group."""
    keys = rng.random(len(group))
    order = np.lexsort((keys, group))
    g = group[order]
    start = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    sizes = np.diff(np.r_[start, len(g)])
    rank = np.arange(len(g)) - np.repeat(start, sizes)
    quota = np.maximum(1, np.round(share * sizes)).astype(int)
    mask = np.zeros(len(group), bool)
    mask[order] = rank < np.repeat(quota, sizes)
    return mask


def source_aware_null(seed: int, repeats: int = 10, k: int = 5, shuffled: bool = False,
                      test_share: float = 0.2) -> dict:
    """Return per-repeat accuracies of protocol 2's balanced design on a null data set."""
    rng = np.random.default_rng(seed)
    X, y = gaussian_classes(rng)
    src = per_class_sources(X, y, k, rng, shuffled)
    classes = np.unique(y)
    order = {c: np.concatenate([rng.permutation(k) for _ in range(-(-repeats // k))])
             for c in classes}
    out = {"acc_inclusive": [], "acc_exclusive": [], "acc_random": []}

    def accuracy(test):  # trained on the other points
        return nearest_mean_accuracy(X, y, np.flatnonzero(~test), np.flatnonzero(test))

    for r in range(repeats):
        held = src == np.array([order[c][r] for c in classes])[np.searchsorted(classes, y)]
        out["acc_exclusive"].append(accuracy(held))
        out["acc_inclusive"].append(accuracy(_share_per_group(y * k + src, test_share, rng)))
        out["acc_random"].append(accuracy(rng.random(len(y)) < test_share))
    return {key: np.array(v) for key, v in out.items()}


def w1(A: np.ndarray, B: np.ndarray, rng, size: int = 100) -> float:
    """Return the exact 1-Wasserstein distance between equal-sized samples of A and B
    (Euclidean ground cost; an assignment problem, as POT's emd on uniform weights)."""
    from scipy.optimize import linear_sum_assignment

    m = min(len(A), len(B), size)
    a, b = A[rng.choice(len(A), m, replace=False)], B[rng.choice(len(B), m, replace=False)]
    cost = np.sqrt(((a[:, None, :] - b[None]) ** 2).sum(-1))
    i, j = linear_sum_assignment(cost)
    return float(cost[i, j].mean())


def shifted_null(seed: int, k: int = 5, repeats: int = 2, shuffled: bool = False,
                 val_share: float = 0.2, distances: bool = True) -> dict:
    """Return shifted (source j of every class = fold j) and random K-fold results, per fold."""
    rng = np.random.default_rng(seed)
    out = {kind: {"val": [], "test": [], "matrices": []} for kind in ("shifted", "random")}
    for _ in range(repeats):
        X, y = gaussian_classes(rng)
        folds = {"shifted": per_class_sources(X, y, k, rng, shuffled),
                 "random": rng.permutation(np.arange(len(y)) % k)}
        for kind, f in folds.items():
            for j in range(k):
                test = np.flatnonzero(f == j)
                rest = rng.permutation(np.flatnonzero(f != j))
                n_val = int(val_share * len(rest))
                val, train = rest[:n_val], rest[n_val:]
                out[kind]["val"].append(nearest_mean_accuracy(X, y, train, val))
                out[kind]["test"].append(nearest_mean_accuracy(X, y, train, test))
            if not distances:
                continue
            m = np.zeros((k, k))
            for a in range(k):
                for b in range(a + 1, k):
                    m[a, b] = m[b, a] = w1(X[f == a], X[f == b], rng)
            out[kind]["matrices"].append(m.tolist())
    return out
