"""The source-aware protocol's random-split trials alone, for metrics that need no clusterer.

The ``lost-test`` metric reads stratified random splits only. Those trials do not depend on a
clusterer, so the source-aware protocol already plans them with ``clusterer = ""``; this
module plans exactly the same specs (same dict, hence the same key) for a (dataset, model)
combination without a clusterer. They run as source-aware trials (``spec["protocol"]`` is
``"source-aware"``) and are shared with ``rho``: no extra training.
"""

from __future__ import annotations

from robench.protocols import source_aware
from robench.protocols.base import Combo, trial_key

NAME = "random-split"
VERSION = source_aware.VERSION
KIND = "random"


def plan(combo: Combo, cfg, registry) -> list:
    """Return the R random-split specs of one (dataset, model), keyed as source-aware's."""
    versions = {
        "protocol": source_aware.VERSION,
        "dataset": registry.component_version("datasets", combo.dataset.name),
        "model": registry.component_version("models", combo.model.name),
    }
    specs = []
    for r in range(cfg.repeats):
        spec = {
            "protocol": source_aware.NAME,
            "dataset": combo.dataset.name,
            "model": combo.model.name,
            "clusterer": "",
            "kind": KIND,
            "repeat": r,
            "seed": cfg.seed,
            "params": {
                "k": None,
                "test_size": cfg.test_size,
                "val_fraction": cfg.val_fraction,
                "train": cfg.train,
            },
            "versions": versions,
        }
        spec["key"] = trial_key(spec)
        specs.append(spec)
    return specs


#: The trials are source-aware trials; this alias lets a spec be run through this module too.
run = source_aware.run
