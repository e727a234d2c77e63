"""``prepare``: the one place that turns what a user asked for into a run configuration and plan.

``robench run`` (the command only parses its options, calls :func:`prepare` and prints) and
``robench.evaluate`` (which first registers in-memory data and models) both call it, so both
apply the same checks in the same order and the same defaults:

1. the knobs (``--set`` values, already parsed into ``{section: {knob: value}}``) against the
   profile, before anything is read or written;
2. the cache folder;
3. the names (a data or model reference is read and checked here), by the one selection policy
   (:func:`robench.run.selection.select`);
4. the executor (default: a process pool where there is more than one core and more than one
   job, else in-process) and its options;
5. the run configuration, resolved against the registry, and its plan.

Nothing here opens the results database: a run that cannot be made exits before the file is
touched.
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
    """Return the configuration and plan of a run; raise a one-line error where it cannot be made.

    Parameters
    ----------
    registry : robench.plugins.Registry
        Where every name is looked up.
    profile : str
        ``quick``, ``standard`` or ``paper``.
    datasets, models, clusterers, metrics : iterable of str
        The names (or references) the user gave; an empty kind gets the profile's defaults.
    repeats, k, seed : int, optional
        Repeats per partition kind, sources per class (None: the profile's), master seed.
    settings : dict, optional
        Knob values ``{section: {knob: value}}``, already parsed and type-checked.
    executor, jobs : optional
        The executor's name (None: :func:`default_executor`) and its number of workers (None:
        one per core, at most 8).
    device : str
        ``auto``, ``cpu``, ``cuda``, ``cuda:N``; a device that is not here fails now.
    scheduler : str, optional
        The Dask scheduler's address (``--executor dask`` only).
    trial_timeout : float, optional
        Seconds a trial may take before it is stopped and recorded as failed.

    Raises
    ------
    robench.errors.KnobError, DeviceError, ConfigurationError, UnknownComponentError, ...
        One-line errors the CLI shows with exit status 2.
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
