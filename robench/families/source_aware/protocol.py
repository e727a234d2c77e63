"""Source-aware protocol (Kilinc & Uysal): inclusive, exclusive and random partitions, rho.

Per class the data are clustered into k sources; per repeat: exclusive (one source per class
held out, in rotation within each cycle of k repeats), inclusive (``test_size`` of every
source is test) and random (stratified, the same fraction). Validation is carved from the
training partition, never the test one. Random trials carry ``clusterer = ""`` and are shared
by every clusterer.
"""

from __future__ import annotations

import numpy as np

from robench.stats.seeds import derived_seed
from robench.run.trials import Combo, fit_and_score, make_spec
from robench.data.sources import find_sources, sources_key
from robench.data.splitters import (KIND_CODES, balanced_cycle, partition_rng, test_mask,
                                    validation_split)

NAME = "source-aware"
#: 2: the exclusive partition's held-out sources in rotation (the balanced design).
VERSION = "2"
KINDS = ("inclusive", "exclusive", "random")
#: The protocol version each kind's trials are keyed by: only the exclusive partition
#: changed in version 2, so inclusive and random trials keep their keys (nothing reruns).
KIND_VERSIONS = {"inclusive": "1", "exclusive": VERSION, "random": "1"}
#: Older versions whose trials this one still runs unchanged (``robench verify`` re-runs them).
TRIAL_VERSIONS = tuple(sorted(set(KIND_VERSIONS.values()) - {VERSION}))
DESCRIPTION = ("Per class k sources by clustering; R repeats each of source-inclusive, "
               "source-exclusive and stratified random train/test partitions.")
#: The exclusive partition's held-out design (``params.held_out`` of its trials).
HELD_OUT = "balanced"


def trial_spec(combo: Combo, cfg, registry, kind: str, repeat: int) -> dict:
    """Return the spec of one trial; random-split trials carry no clusterer (shared by all)."""
    source_aware = kind != "random"
    params = {"k": cfg.k if source_aware else None, "test_size": cfg.test_size,
              "val_fraction": cfg.val_fraction, "train": cfg.train,
              **({"held_out": HELD_OUT} if kind == "exclusive" else {})}
    return make_spec(NAME, KIND_VERSIONS[kind], combo, cfg, registry, kind=kind, repeat=repeat,
                     params=params, with_clusterer=source_aware)


def sources_per_class(cfg) -> int:
    """Return how many sources ``prepare`` splits each class into: the run's k."""
    return cfg.k


def plan(combo: Combo, cfg, registry) -> list:
    """Return the trial specs of one (dataset, model, clusterer): R repeats of each kind."""
    if combo.clusterer is None:
        raise ValueError("the source-aware protocol needs a clusterer (metric uses_clusterer)")
    return [trial_spec(combo, cfg, registry, kind, r) for kind in KINDS for r in range(cfg.repeats)]


def preconditions(combo: Combo, cfg, registry):
    """Return why the source-aware partitions cannot be made (a class with < 2 sources), or None."""
    dataset = registry.load_dataset(combo.dataset.name)
    counts = combo.clusterer.expected_clusters(dataset, cfg.k)
    names = dataset.class_names or [str(c) for c in range(len(counts))]
    few = [f"class '{names[c]}' has {n}" for c, n in enumerate(counts) if n < 2]
    if few:
        return (f"source-aware partitions of data set '{combo.dataset.name}' by clusterer "
                f"'{combo.clusterer.name}': {', '.join(few)} source(s); the exclusive "
                "partition needs at least 2 per class")
    return None


def prepare(combo: Combo, cfg, registry, dataset) -> dict:
    """Find (or load from cache) the sources of the combination's data set; return a row."""
    version = registry.component_version("clusterers", combo.clusterer.name)
    src = find_sources(dataset, combo.clusterer, version, cfg.k, cfg.seed)
    return {"key": sources_key(dataset.fingerprint(), combo.clusterer.name, version, cfg.k,
                               cfg.seed),
            "dataset": combo.dataset.name, "clusterer": combo.clusterer.name, "k": int(cfg.k),
            "seed": int(cfg.seed), "fingerprint": dataset.fingerprint(),
            "silhouette": src.silhouette,
            "details": {"k_per_class": src.k_per_class.tolist(),
                        "silhouette_per_class": [None if not np.isfinite(s) else float(s)
                                                 for s in src.silhouette_per_class],
                        "cache_hit": src.cache_hit},
            "seconds": src.seconds}


def partition(spec: dict, dataset, env_registry) -> tuple:
    """Return (train, val, test) indices of a trial spec (pure function of the spec)."""
    kind, r, seed, params = spec["kind"], spec["repeat"], spec["seed"], spec["params"]
    groups = None if kind == "random" else _groups(spec, dataset, env_registry)
    mask = test_mask(kind, dataset.y, groups, seed=seed, repeat=r, test_size=params["test_size"],
                     held_out=params.get("held_out", "random"))
    train_all = np.flatnonzero(~mask)
    fit_idx, val_idx = validation_split(train_all, dataset.y, params["val_fraction"],
                                        partition_rng(seed, r, kind, 1))
    return fit_idx, val_idx, np.flatnonzero(mask)


def run(spec: dict, env) -> dict:
    """Run one trial: partition, train with validation early stopping, score on test."""
    dataset = env.dataset(spec["dataset"])
    train_idx, val_idx, test_idx = partition(spec, dataset, env.registry)
    model_spec = env.registry.get("models", spec["model"])
    seed = derived_seed(spec["seed"], spec["repeat"], KIND_CODES[spec["kind"]])
    out = fit_and_score(model_spec, dataset, train_idx, val_idx, test_idx,
                        seed=seed, train_budget=spec["params"]["train"])
    # the test set's class counts: the chance accuracy a model must be shown above (rho's
    # ranks); recorded, not part of the trial's definition, so its key is unchanged
    counts = np.bincount(np.asarray(dataset.y)[test_idx], minlength=dataset.n_classes)
    out["extra"] = {"test_class_counts": counts.tolist()}
    if spec["params"].get("held_out") == "balanced":
        # the cycle of the balanced design (lcm of the classes' source counts): the paired
        # test uses the repeats of complete cycles (robench.stats.paired)
        out["extra"]["cycle"] = balanced_cycle(dataset.y, _groups(spec, dataset, env.registry))
    return out


def _groups(spec: dict, dataset, env_registry):
    """Return the source of every sample of a source-aware trial spec (cached sources)."""
    clus = env_registry.get("clusterers", spec["clusterer"])
    return find_sources(dataset, clus, spec["versions"]["clusterer"], spec["params"]["k"],
                        spec["seed"]).groups


def ratio_of_means(acc_x, acc_i) -> float:
    """Return rho = E[AccX] / E[AccI] (paper eq. 3: 1 - (E[AccI] - E[AccX]) / E[AccI])."""
    acc_x, acc_i = np.asarray(acc_x, float), np.asarray(acc_i, float)
    mean_i = acc_i.mean()
    return float(acc_x.mean() / mean_i) if mean_i > 0 else float("nan")


def class_rho(per_class_x: list, per_class_i: list) -> list:
    """Return per class (E[AccX_c], E[AccI_c], rho_c) from per-trial per-class accuracies (a
    class missing from a trial's test set, None, is left out of its mean)."""
    def col_means(rows):
        arr = np.array([[np.nan if v is None else v for v in row] for row in rows], float)
        with np.errstate(invalid="ignore"):
            return np.nanmean(arr, axis=0) if arr.size else np.array([])

    def num(v):
        return float(v) if np.isfinite(v) else None

    return [{"acc_exclusive": num(x), "acc_inclusive": num(i),
             "rho": float(x / i) if np.isfinite(x) and np.isfinite(i) and i > 0 else None}
            for x, i in zip(col_means(per_class_x), col_means(per_class_i))]
