"""The source-aware protocol's random-split trials alone (the same specs and keys, so
``lost-test`` shares rho's trials), for metrics that need no clusterer."""

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
