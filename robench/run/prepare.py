"""``prepare``: the one place that turns what a user asked for into a run configuration and plan.

``robench run`` and ``robench.evaluate`` both call it, so both apply the same checks in the
same order and the same defaults. Nothing here opens the results database: a run that cannot
be made exits before it is touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from robench.data.cache import check_cache_dir
from robench.errors import ConfigurationError
from robench.learn.devices import resolve_device
from robench.run.config import RunConfig, default_jobs, resolve_knobs
from robench.run.runner import Plan, plan_run
from robench.run.selection import Selection, select


@dataclass
class Prepared:
    """A run ready to execute: its configuration, plan and what the selection left out."""

    config: RunConfig
    plan: Plan
    selection: Selection


def default_executor(jobs: int) -> str:
    """Return the executor a run uses when none is named: processes when they can help."""
    return "process" if (os.cpu_count() or 1) > 1 and jobs > 1 else "local"


def prepare(registry, *, profile: str = "quick", datasets=(), models=(), clusterers=(),
            metrics=(), repeats: Optional[int] = None, k: Optional[int] = None, seed: int = 0,
            settings: Optional[dict] = None, executor: Optional[str] = None,
            jobs: Optional[int] = None, device: str = "auto", scheduler: Optional[str] = None,
            trial_timeout: Optional[float] = None) -> Prepared:
    """Return the configuration and plan of a run; raise a one-line error (KnobError,
    DeviceError, ConfigurationError, ...: exit 2 in the CLI) where it cannot be made.

    An empty kind of names, and None, get the defaults; ``settings`` are parsed knob values.
    """
    settings = settings or {}
    device = resolve_device(device)
    resolve_knobs(registry, profile, settings)
    check_cache_dir()
    chosen = select(registry, profile, datasets=list(datasets), models=list(models),
                    clusterers=list(clusterers), metrics=list(metrics))
    jobs = jobs or default_jobs()
    executor = executor or default_executor(jobs)
    registry.get("executors", executor)
    if scheduler and executor != "dask":
        raise ConfigurationError("--scheduler goes with --executor dask (it is the address "
                                 "of a Dask scheduler)")
    config = RunConfig(
        datasets=chosen.datasets, models=chosen.models, clusterers=chosen.clusterers,
        metrics=chosen.metrics, profile=profile, repeats=repeats, k=k, seed=seed,
        executor=executor, jobs=jobs, device=device, settings=settings,
        executor_options={"scheduler": scheduler} if scheduler else {},
        trial_timeout=trial_timeout,
        explicit={kind: chosen.explicit[kind] for kind in ("datasets", "models", "clusterers")},
    ).resolve(registry)
    return Prepared(config, plan_run(config, registry), chosen)
