"""Built-in clusterers: k-means++, the oracle that reads true source ids, and a multicut."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.specs import ClustererSpec
from robench.learn.multicut import multicut_fit_predict


def kmeans_fit_predict(Z, k: int, *, seed: int, true_sources=None, n_init: int = 4) -> np.ndarray:
    """Cluster rows of Z into k groups with k-means++ (scikit-learn, ``n_init`` restarts)."""
    from sklearn.cluster import KMeans

    Z = np.asarray(Z, dtype=np.float32)
    return KMeans(n_clusters=k, init="k-means++", n_init=n_init, random_state=seed).fit_predict(Z)


def oracle_fit_predict(Z, k: int, *, seed: int, true_sources=None) -> np.ndarray:
    """Return the true source ids, renumbered 0..m-1; ``k`` is ignored (m is what the data has)."""
    if true_sources is None:
        raise ValueError("the oracle clusterer needs a data set with true source ids")
    _, labels = np.unique(np.asarray(true_sources), return_inverse=True)
    return labels.ravel()


def oracle_clusters_per_class(dataset, k: int) -> list:
    """Return how many true sources each class has: what the oracle returns, whatever k."""
    y = np.asarray(dataset.y)
    if dataset.sources is None:
        return [0] * int(dataset.n_classes)
    sources = np.asarray(dataset.sources)
    return [int(np.unique(sources[y == c]).size) for c in range(int(dataset.n_classes))]


@hookimpl
def register_clusterers(register):
    register(ClustererSpec(
        "kmeans", kmeans_fit_predict,
        "k-means with k-means++ seeding (scikit-learn, 4 restarts), run per class.",
        version="1",
    ))
    register(ClustererSpec(
        "oracle", oracle_fit_predict,
        "The data set's true source ids (only for data sets that have them; k is ignored).",
        version="1", requires_true_sources=True, clusters_per_class=oracle_clusters_per_class,
    ))
    register(ClustererSpec(
        "multicut", multicut_fit_predict,
        "Minimum-cost multicut (GAEC, bioimage-cpp) on the 10-NN graph, unsupervised costs "
        "tuned to give ~k clusters; opt-in for source finding (not in --all's quick profile).",
        version="1", in_default_run=False,
    ))
