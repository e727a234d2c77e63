"""Find sources: cluster every class into k groups, cached on disk by content key."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np

from robench.data.cache import cached_arrays, content_key
from robench.errors import SourcesError  # noqa: F401 (public here too)


class Labels(np.ndarray):
    """Cluster labels carrying ``info``, a JSON-able dict of what the clusterer did (stored too)."""

    def __new__(cls, labels, info=None):
        obj = np.asarray(labels).view(cls)
        obj.info = dict(info or {})
        return obj

    def __array_finalize__(self, obj):
        self.info = getattr(obj, "info", None)


@dataclass
class Sources:
    """Global source id per sample (unique across classes) and how they were found."""

    groups: np.ndarray
    k_per_class: np.ndarray
    silhouette_per_class: np.ndarray  # NaN where a class has a single cluster
    class_sizes: np.ndarray
    seconds: float
    cache_hit: bool
    info: list = field(default_factory=list)  # per class: the clusterer's Labels.info, or None

    @property
    def silhouette(self) -> float:
        """Return the class-size-weighted mean of the per-class silhouette scores."""
        s = self.silhouette_per_class
        ok = np.isfinite(s)
        if not ok.any():
            return float("nan")
        return float(np.average(s[ok], weights=self.class_sizes[ok]))


def sources_key(fingerprint: str, clusterer: str, clusterer_version: str, k: int, seed: int) -> str:
    """Return the cache key of one clustering."""
    return content_key("sources", fingerprint, clusterer, clusterer_version, int(k), int(seed))


def check_class_sizes(y: np.ndarray, k: int, class_names=None) -> None:
    """Raise SourcesError naming every class too small to hold k sources of 2+ samples."""
    if k < 2:
        raise SourcesError(f"k={k}: source-aware partitions need at least 2 sources per class")
    counts = np.bincount(y)
    small = [(c, int(n)) for c, n in enumerate(counts) if n < 2 * k]
    if small:
        names = class_names or [str(c) for c in range(len(counts))]
        listed = ", ".join(f"class '{names[c]}' has {n}" for c, n in small)
        raise SourcesError(
            f"cannot split classes into k={k} sources of at least 2 samples: {listed} "
            f"sample(s); use a smaller --sources/-k (at most {int(counts.min()) // 2})"
        )


def find_sources(dataset, clusterer_spec, clusterer_version: str, k: int, seed: int) -> Sources:
    """Cluster each class of ``dataset`` on its raw inputs into k sources, with silhouettes."""
    y = dataset.y
    if not clusterer_spec.requires_true_sources:
        check_class_sizes(y, k, dataset.class_names)
    key = sources_key(dataset.fingerprint(), clusterer_spec.name, clusterer_version, k, seed)

    def compute():
        from sklearn.metrics import silhouette_score

        t0 = time.perf_counter()
        groups = np.empty(y.shape[0], dtype=np.int64)
        k_per_class = np.zeros(dataset.n_classes, dtype=np.int64)
        sil = np.full(dataset.n_classes, np.nan)
        offset, infos = 0, []
        for c in range(dataset.n_classes):
            idx = np.flatnonzero(y == c)
            true = dataset.sources[idx] if dataset.sources is not None else None
            Xc = dataset.rows(idx)  # float32 rows of this class only
            raw = clusterer_spec.fit_predict(Xc, k, seed=seed, true_sources=true)
            infos.append(getattr(raw, "info", None))
            labels = np.unique(np.asarray(raw), return_inverse=True)[1].ravel()
            m = int(labels.max()) + 1
            k_per_class[c] = m
            if 1 < m < idx.size:
                sil[c] = silhouette_score(Xc, labels, random_state=seed,
                                          sample_size=min(idx.size, 2000))
            groups[idx] = labels + offset
            offset += m
        return {"groups": groups, "k_per_class": k_per_class, "silhouette": sil,
                "seconds": np.array(time.perf_counter() - t0),
                "info": np.array(json.dumps(infos, default=str))}

    arrays, hit = cached_arrays("sources", key, compute)
    info = json.loads(str(arrays["info"])) if "info" in arrays else []
    return Sources(arrays["groups"], arrays["k_per_class"], arrays["silhouette"],
                   np.bincount(y), float(arrays["seconds"]), hit, info)
