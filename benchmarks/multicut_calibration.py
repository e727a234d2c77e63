"""Supervised multicut before and after calibrating the boundary: prints a markdown table.

For a few feature sets with known classes (test features <= 500 nodes, training features
1,000 rows, as the clusterability protocol uses them), runs
:func:`robench.learn.multicut.multicut_supervised` with bias 0 (the old default: kNN graph, raw
distances) and with ``bias="calibrated"``, on the kNN and on the complete graph, with raw
distances and with the ``knn-median`` distance unit, and reports
the number of clusters (and singletons), purity (paper eq. 5), adjusted Rand index with the
classes, and the chosen bias. Feature sets:

* digits-mlp: penultimate (ReLU) features of a scikit-learn MLP (64 hidden units) trained on
  70% of digits; test = a stratified 500 of the other 30%, train = a stratified 1,000;
* digits-pixels: the 64 raw pixels of digits (500 test, 1,000 train rows, disjoint);
* blobs-sepS: 10 Gaussian classes in 16 dimensions, unit spread, centres N(0, S^2): S = 3
  (separated), 1 (overlapping);
* gap-sepS: 6 Gaussian classes in 16 dimensions whose test features are more spread out
  (1.3 at S = 2, 1.2 at S = 1.5) than the training features (1), as a trained model's are.

Usage:
    python benchmarks/multicut_calibration.py          # about 1-2 minutes on one core
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.learn.multicut import multicut_supervised, stratified_subsample  # noqa: E402


def purity(labels, y) -> float:
    """Return purity (eq. 5): the share of points in their cluster's majority class."""
    table = np.zeros((labels.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(table, (labels, y), 1)
    return float(table.max(1).sum() / len(y))


def digits_mlp():
    """Return (Z_test, Z_train, y_test, y_train, test accuracy) of an MLP's hidden layer."""
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    X, y = load_digits(return_X_y=True)
    X = X / 16
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier((64,), max_iter=300, random_state=0).fit(Xtr, ytr)

    def feat(A):
        return np.maximum(A @ clf.coefs_[0] + clf.intercepts_[0], 0)

    te, tr = stratified_subsample(yte, 500, 0), stratified_subsample(ytr, 1000, 0)
    return feat(Xte[te]), feat(Xtr[tr]), yte[te], ytr[tr], float(clf.score(Xte, yte))


def digits_pixels():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(y))
    te, tr = perm[:500], perm[500:1500]
    return X[te] / 16, X[tr] / 16, y[te], y[tr], None


def blobs(sep: float, n_classes: int = 10, dim: int = 16, n_train: int = 100,
          n_test: int = 50, test_spread: float = 1.0, seed: int = 1):
    """Return Gaussian classes: centres N(0, sep^2), training spread 1, test ``test_spread``.

    ``test_spread`` > 1 mimics a trained model, whose test features are more spread out than
    the training features it was fitted on.
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, sep, (n_classes, dim))
    y_tr = np.repeat(np.arange(n_classes), n_train)
    y_te = np.repeat(np.arange(n_classes), n_test)
    Z_te = centres[y_te] + rng.normal(0, test_spread, (len(y_te), dim))
    Z_tr = centres[y_tr] + rng.normal(0, 1, (len(y_tr), dim))
    return Z_te, Z_tr, y_te, y_tr, None


#: (graph, distance scale, bias, calibration criterion); the first is the old default.
SETTINGS = (("knn", "none", 0.0, None),
            ("knn", "none", "calibrated", "effective_clusters"),
            ("complete", "none", 0.0, None),
            ("complete", "none", "calibrated", "effective_clusters"),
            ("complete", "knn-median", 0.0, None),
            ("complete", "knn-median", "calibrated", "effective_clusters"),
            ("complete", "knn-median", "calibrated", "ari"))


def table(feature_sets) -> list:
    """Return one row per (feature set, graph, bias setting)."""
    from sklearn.metrics import adjusted_rand_score

    rows = []
    for name, (Z_te, Z_tr, y_te, y_tr, acc) in feature_sets.items():
        for graph, scale, bias, criterion in SETTINGS:
            t0 = time.perf_counter()
            kw = {} if criterion is None else {"criterion": criterion}
            labels, info = multicut_supervised(Z_te, Z_tr, y_tr, bias=bias, graph=graph,
                                               scale=scale, **kw)
            rows.append({
                "features": name, "model_acc": acc, "graph": graph, "scale": scale,
                "bias_setting": "0" if criterion is None else f"calibrated ({criterion})",
                "bias": info["bias"], "n_clusters": info["n_clusters"],
                "n_singletons": info["n_singletons"], "purity": purity(labels, y_te),
                "ari": float(adjusted_rand_score(y_te, labels)),
                "seconds": time.perf_counter() - t0})
    return rows


def stamp() -> str:
    """Return what the table depends on: commit, library versions, Python, machine."""
    import platform

    import sklearn

    from robench.process.provenance import git_revision

    commit = (git_revision() or "unknown")[:7]
    return (f"commit {commit}, numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
            f"Python {platform.python_version()}, {platform.machine()} {platform.system()}")


def main() -> int:
    t0 = time.perf_counter()
    sets = {"digits-mlp": digits_mlp(), "digits-pixels": digits_pixels()}
    for sep in (3.0, 1.0):
        sets[f"blobs-sep{sep:g}"] = blobs(sep)
    for sep in (2.0, 1.5):
        sets[f"gap-sep{sep:g}"] = blobs(sep, n_classes=6, n_train=60, n_test=30,
                                        test_spread=1.3 if sep == 2.0 else 1.2)
    acc = sets["digits-mlp"][4]
    print(f"digits-mlp test accuracy: {acc:.3f}. digits and blobs: 10 classes, 500 test nodes, "
          "1,000 training rows; gap: 6 classes, 180 test nodes (spread 1.3 at sep 2, 1.2 at "
          "sep 1.5), 360 training rows (spread 1).")
    print()
    print("| features | graph | scale | bias | chosen bias | clusters | singletons | purity "
          "| ARI | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table(sets):
        print(f"| {r['features']} | {r['graph']} | {r['scale']} | {r['bias_setting']} | "
              f"{r['bias']:.2f} | "
              f"{r['n_clusters']} | {r['n_singletons']} | {r['purity']:.3f} | {r['ari']:.3f} | "
              f"{r['seconds']:.1f} |")
    print()
    print(f"({time.perf_counter() - t0:.1f} s; {stamp()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
