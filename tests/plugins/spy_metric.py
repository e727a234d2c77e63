"""A metric that counts its aggregate calls (and otherwise computes rho), for rerun tests."""

from __future__ import annotations

from robench import hookimpl
from robench.families.source_aware.rho import aggregate as aggregate_rho
from robench.specs import MetricSpec

#: Groups the spy metric's aggregate was called for, as (dataset, model, clusterer) tuples.
CALLS: list = []


def aggregate_spy(group: dict, trials: list) -> list:
    from dataclasses import replace

    CALLS.append((group["dataset"], group["model"], group["clusterer"]))
    return [replace(s, metric="spy-rho") for s in aggregate_rho(group, trials)]


@hookimpl
def register_metrics(register):
    register(MetricSpec(
        name="spy-rho", description="rho, counting its aggregate calls.",
        protocol="source-aware", aggregate=aggregate_spy, definition="rho, spied on.",
        version="1",
    ))
