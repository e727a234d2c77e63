"""Test components for applicability: a data set with a one-source class, a failing preparation.

``tiny-one-source`` is ``tiny`` (3 classes x 3 true sources) with class 2's sources merged into
one: source-aware partitions and shifted K-fold cannot use the oracle's sources there, the
lost-test random splits can. The ``failing-prep`` protocol (metric of the same name) prepares
by raising, on every combination: its trials fail, nobody else's may. The ``broken-check``
protocol's preconditions raise: it is skipped with that error, the run goes on.
"""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.specs import DatasetSpec, MetricSpec, ProtocolSpec, Score
from robench.run.trials import make_spec
from tests.plugins.tiny import make_tiny


def make_one_source() -> Dataset:
    """Return tiny with every sample of class 2 in one source."""
    d = make_tiny()
    sources = np.array(d.sources)
    sources[d.y == 2] = sources[d.y == 2].min()
    return Dataset("tiny-one-source", d.X, d.y, sources=sources)


def plan(combo, cfg, registry):
    return [make_spec("failing-prep", "1", combo, cfg, registry, kind="x", repeat=0,
                      params={}, with_clusterer=True)]


def prepare(combo, cfg, registry, dataset):
    raise RuntimeError("this preparation always fails")


def run(spec, env):
    return {"accuracy": 1.0}


@hookimpl
def register_datasets(register):
    register(DatasetSpec("tiny-one-source", make_one_source,
                         "tiny with class 2 in a single true source.", has_sources=True))


def broken_check(combo, cfg, registry):
    raise KeyError("a bug in the check")


@hookimpl
def register_protocols(register):
    register(ProtocolSpec("failing-prep", plan=plan, run=run, prepare=prepare,
                          description="Its preparation always raises."))
    register(ProtocolSpec("broken-check", plan=plan, run=run, preconditions=broken_check,
                          description="Its preconditions check raises."))


@hookimpl
def register_metrics(register):
    register(MetricSpec("failing-prep", "Counts its trials.", protocol="failing-prep",
                        aggregate=lambda group, trials: [Score(
                            **group, metric="failing-prep", score="failing-prep",
                            value=float(len(trials)))],
                        definition="The number of trials.", in_default_run=False))
    register(MetricSpec("broken-check", "Never planned.", protocol="broken-check",
                        aggregate=lambda group, trials: [],
                        definition="Nothing.", in_default_run=False))
