"""Trials trained together: groups of one (protocol, data set, model) run as one unit.

:func:`execute_unit` runs each trial's code up to its first ``TorchClassifier.fit``, trains the
recorded fits together, then runs each trial in full with its ``fit`` answered by its trained
model; keys, specs and rows do not change. docs/performance.md, "Many models at once", has the
rest (``ROBENCH_BATCH``).
"""

from __future__ import annotations

import math
import os
import time
from contextlib import nullcontext
from typing import Callable, Optional

from robench.learn.devices import using_device
from robench.process.guard import TrialTimeout, time_limit

#: What ``RunConfig.batch`` (``ROBENCH_BATCH``) accepts.
POLICIES = ("auto", "on", "off")
#: Most trials in one unit: on a CPU a unit runs on one single-threaded worker, so units stay
#: small enough to spread over the workers; a GPU gains from wide stacks.
MAX_UNIT = {"cpu": 32, "cuda": 256}
#: Marks a unit (its trials are under this key) among the specs an executor gets.
UNIT = "batch"


def default_policy() -> str:
    """Return the policy from ``ROBENCH_BATCH`` (``auto`` when unset)."""
    return check_policy(os.environ.get("ROBENCH_BATCH", "auto"))


def check_policy(policy: str) -> str:
    """Return ``policy`` normalised, or raise ValueError naming the accepted ones."""
    text = str(policy).strip().lower()
    if text not in POLICIES:
        raise ValueError(f"batch policy '{policy}' is not one of {', '.join(POLICIES)} "
                         "(ROBENCH_BATCH)")
    return text


def group_units(specs: list, policy: str, jobs: int = 1) -> list:
    """Return ``specs`` with the trials of each (protocol, data set, model) put into units
    (``{"key": ..., "batch": [specs], "device": ...}``, where its first trial was): near-equal,
    at most :data:`MAX_UNIT` trials, at least ``jobs`` of them where there are enough."""
    policy = check_policy(policy)
    if policy == "off" or not specs:
        return list(specs)
    if policy == "auto" and not any(str(s.get("device") or "").startswith("cuda")
                                    for s in specs):
        return list(specs)  # auto batches on CUDA only
    groups: dict = {}
    for spec in specs:
        if not spec.get("model") or UNIT in spec:
            continue
        groups.setdefault((spec["protocol"], spec["dataset"], spec["model"],
                           spec.get("device") or "cpu"), []).append(spec)
    first_of = {}
    for (protocol, dataset, model, device), members in groups.items():
        on_gpu = device.startswith("cuda")
        if (policy == "auto" and not on_gpu) or len(members) < 2:
            continue
        first_of.update(_cut(members, MAX_UNIT["cuda" if on_gpu else "cpu"], jobs, policy))
    units = (first_of.get(spec["key"], spec) if "key" in spec else spec for spec in specs)
    return [unit for unit in units if unit is not None]


def _cut(members: list, limit: int, jobs: int, policy: str) -> dict:
    """Return where each member's trial goes: its key -> its unit, its own spec (a chunk of
    one), or None (a later member of a unit), for near-equal chunks of ``members``."""
    parts = max(math.ceil(len(members) / limit), min(max(1, int(jobs)), len(members) // 2))
    size = math.ceil(len(members) / parts)
    placed = {}
    for start in range(0, len(members), size):
        chunk = members[start:start + size]
        if len(chunk) == 1:
            placed[chunk[0]["key"]] = chunk[0]
            continue
        placed[chunk[0]["key"]] = {"key": f"{UNIT}-{chunk[0]['key']}", UNIT: chunk,
                                   "device": chunk[0].get("device"), "policy": policy}
        placed.update((spec["key"], None) for spec in chunk[1:])
    return placed


def unit_rows(item) -> list:
    """Return the rows an executor yielded for a trial (one row) or a unit (a list)."""
    return item if isinstance(item, list) else [item]


def execute_unit(unit: dict, env, timeout: Optional[float], execute_one: Callable,
                 policy: Optional[str] = None) -> list:
    """Run a unit's trials (batched where they can be) and return their rows, in order; every
    row comes from ``execute_one(spec, env, timeout)``, the executor's ``execute_trial``."""
    from robench.learn import batched

    policy = check_policy(policy or unit.get("policy") or default_policy())
    specs = unit[UNIT]
    deferred = {}  # position -> FitJob
    for pos, spec in enumerate(specs):
        jobs: list = []
        try:
            with time_limit(timeout), using_device(spec.get("device")), \
                    batched.deferring(jobs):
                env.registry.get("protocols", spec["protocol"]).run(spec, env)
        except batched.FitDeferred:
            deferred[pos] = jobs[0]
            continue
        except (batched.NotBatchable, TrialTimeout, Exception):  # noqa: BLE001
            pass  # runs alone below, where its failure (if any) is recorded
        if not deferred:
            # the first trial could not be deferred (another kind of model, or a protocol
            # that trains otherwise): its unit mates would not be either; run them all alone
            break
    trained, shares = {}, {}
    for members in _compatible(deferred):
        device = specs[members[0]].get("device")
        # batching is worth it under "on", and under "auto" on CUDA
        if len(members) < 2 or not (policy == "on" or str(device or "").startswith("cuda")):
            continue
        jobs = [deferred[pos] for pos in members]
        started = time.monotonic()
        try:
            with time_limit(timeout * len(jobs) if timeout else None), using_device(device):
                batched.fit_many(jobs)
        except (TrialTimeout, Exception):  # noqa: BLE001 - these trials run alone instead
            continue
        share = (time.monotonic() - started) / len(jobs)
        for pos in members:
            trained[pos], shares[pos] = deferred[pos], (share, len(jobs))
    rows = []
    for pos, spec in enumerate(specs):
        with batched.replaying(trained[pos]) if pos in trained else nullcontext():
            row = execute_one(spec, env, timeout)
        if pos in trained and row.get("status") == "ok":
            # the trial's share of the batched training, so stored durations stay comparable
            share, width = shares[pos]
            if isinstance(row.get("seconds"), (int, float)):
                row["seconds"] += share
            row["execution"] = {**(row.get("execution") or {}), "batched": width}
        rows.append(row)
    return rows


def _compatible(deferred: dict) -> list:
    """Return lists of positions whose fits share a training budget and input width
    (:func:`robench.learn.batched.fit_many` checks the architecture itself)."""
    groups: dict = {}
    for pos, job in deferred.items():
        clf = job.clf
        width = tuple(getattr(job.X, "shape", (0, 0)))[1:]
        groups.setdefault((clf.batch_size, clf.lr, clf.weight_decay, width), []).append(pos)
    return list(groups.values())
