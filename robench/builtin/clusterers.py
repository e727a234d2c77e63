"""Built-in clusterers: k-means++ and the oracle that reads true source ids."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.specs import ClustererSpec


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
        version="1", requires_true_sources=True,
    ))
