"""Every hook a robench plugin can implement.

Collection hooks take a ``register`` callback and call it once per component, the way
``llm`` plugins do: ``register(DatasetSpec(...))``. The plugin that called ``register`` is
recorded as the component's owner, so ``robench plugins`` can say who registered what.
"""

from __future__ import annotations

from typing import Callable

import pluggy

hookspec = pluggy.HookspecMarker("robench")


@hookspec
def register_datasets(register: Callable) -> None:
    """Register data sets: call ``register(robench.specs.DatasetSpec(...))`` for each."""


@hookspec
def register_models(register: Callable) -> None:
    """Register classifiers: call ``register(robench.specs.ModelSpec(...))`` for each."""


@hookspec
def register_model_resolvers(register: Callable) -> None:
    """Register model reference schemes: call ``register(robench.specs.ModelResolverSpec(...))``."""


@hookspec
def register_clusterers(register: Callable) -> None:
    """Register clusterers: call ``register(robench.specs.ClustererSpec(...))`` for each."""


@hookspec
def register_metrics(register: Callable) -> None:
    """Register metrics: call ``register(robench.specs.MetricSpec(...))`` for each."""


@hookspec
def register_protocols(register: Callable) -> None:
    """Register protocols: call ``register(robench.specs.ProtocolSpec(...))`` for each."""


@hookspec
def register_executors(register: Callable) -> None:
    """Register trial executors: call ``register(robench.specs.ExecutorSpec(...))`` for each."""


@hookspec
def register_corruptions(register: Callable) -> None:
    """Register image corruptions: call ``register(robench.specs.CorruptionSpec(...))`` for each."""


@hookspec
def register_dataset_resolvers(register: Callable) -> None:
    """Register data set reference schemes: call ``register(robench.specs.ResolverSpec(...))``."""
