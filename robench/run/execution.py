"""``execute``: run what :func:`robench.run.prepare.prepare` made, as a plain run or a race.

``robench run`` and ``robench.evaluate`` both call ``prepare`` then :func:`execute`, so the
choice between a plain run and a race (:func:`choose`) is made here and nowhere else;
docs/running.md, "The default run, and racing with a budget", has the main job
(:func:`main_job`) and both orders measured.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from robench.errors import ConfigError
from robench.run import adaptive
from robench.run import runner  # runner.execute: tests replace it there
from robench.run.config import BUDGET_REPEATS, DEFAULT_PROFILE

#: The two ways a run can end (``--until``).
UNTIL = ("fixed", "decided")

#: Seconds the main job may take (its plain run included; the race starts no trial after it):
#: 9 minutes, so that the trials in flight at the deadline, scoring and printing end within
#: the 10 the main job may take here (measured: 9.5 minutes gave 9 min 36 s wall).
MAIN_BUDGET = 540.0


def main_job(prepared, registry, *, until: Optional[str] = None,
             budget: Optional[float] = None, repeats: Optional[int] = None,
             precision: Optional[float] = None) -> bool:
    """Return True where ``robench run --all`` is the main job: none of until, budget, repeats,
    precision given, the default profile, a metric that races."""
    cfg = prepared.config
    return (until is None and budget is None and repeats is None and precision is None
            and cfg.profile == DEFAULT_PROFILE
            and bool(adaptive.paired_metrics(cfg.metrics, registry)))


def choose(until: Optional[str] = None, budget: Optional[float] = None,
           precision: Optional[float] = None) -> str:
    """Return ``"fixed"`` or ``"decided"``: ``until`` as given, else a race when a ``budget``
    is given; raise ConfigError (one line) for a value or combination that cannot run."""
    if until is not None and until not in UNTIL:
        raise ConfigError(f"until must be one of {', '.join(UNTIL)}, got {until!r}")
    if budget is not None and not (isinstance(budget, (int, float)) and 0 < budget < float("inf")):
        raise ConfigError(f"budget must be a number of seconds > 0, got {budget!r}")
    mode = until or ("decided" if budget is not None else "fixed")
    if precision is not None and mode != "decided":
        raise ConfigError("--precision goes with --until decided (or --budget)")
    return mode


def check(prepared, registry, *, until: Optional[str] = None, budget: Optional[float] = None,
          precision: Optional[float] = None) -> str:
    """Return the mode of this run (:func:`choose`) once ``prepared`` can run it."""
    mode = choose(until, budget, precision)
    if mode == "decided":
        adaptive.check_decided(prepared.config, precision, registry)
    return mode


def execute(prepared, registry, store, *, until: Optional[str] = None,
            budget: Optional[float] = None, precision: Optional[float] = None,
            max_repeats: Optional[int] = None, command: str = "robench run",
            on_event: Optional[Callable] = None, rescore: bool = False,
            main: bool = False) -> "runner.RunReport":
    """Run ``prepared`` (a :class:`robench.run.prepare.Prepared`) into ``store``; return the
    :class:`robench.run.runner.RunReport`.

    ``until``, ``budget`` (seconds), ``precision`` and ``max_repeats`` are ``--until``,
    ``--budget``, ``--precision`` and ``--repeats`` as given; ``main``: the main job.
    """
    if main:
        budget, max_repeats, precision = MAIN_BUDGET, BUDGET_REPEATS, None
    if main or check(prepared, registry, until=until, budget=budget,
                     precision=precision) == "decided":
        top = max_repeats or (BUDGET_REPEATS if budget is not None else None)
        return adaptive.run_until_decided(prepared.config, registry, store, command=command,
                                          on_event=on_event, rescore=rescore, budget=budget,
                                          max_repeats=top, precision=precision,
                                          plain_first=main, plan=prepared.plan)
    deadline = None if budget is None else time.monotonic() + budget
    return runner.execute(prepared.config, registry, store, command=command, on_event=on_event,
                          rescore=rescore, plan=prepared.plan, deadline=deadline)

