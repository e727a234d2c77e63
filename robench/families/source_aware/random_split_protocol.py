"""The source-aware protocol's random-split trials alone, for metrics that need no clusterer.

The ``lost-test`` metric reads stratified random splits only. Those trials do not depend on a
clusterer, so the source-aware protocol already plans them with ``clusterer = ""``; this
module plans exactly the same specs (same dict, hence the same key) for a (dataset, model)
combination without a clusterer. They run as source-aware trials (``spec["protocol"]`` is
``"source-aware"``) and are shared with ``rho``: no extra training.
"""

from __future__ import annotations

from robench.families.source_aware import protocol as source_aware
from robench.run.trials import Combo

NAME = "random-split"
VERSION = source_aware.KIND_VERSIONS["random"]
KIND = "random"
DESCRIPTION = ("The source-aware protocol's stratified random splits alone (same trials, "
               "shared by key), for metrics that need no clusterer.")


def plan(combo: Combo, cfg, registry) -> list:
    """Return the R random-split specs of one (dataset, model), keyed as source-aware's."""
    return [source_aware.trial_spec(combo, cfg, registry, KIND, r) for r in range(cfg.repeats)]


#: The trials are source-aware trials; this alias lets a spec be run through this module too.
run = source_aware.run
