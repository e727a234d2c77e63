"""Combinations -> trials -> executor -> store -> scores."""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from robench.run.trials import Combo
from robench.errors import ConfigError  # noqa: F401 (public here too)
from robench.data.cache import cache_dir
from robench.data.sources import SourcesError, check_class_sizes
from robench.learn.devices import using_device
from robench.process.provenance import redact_secrets
from robench.run import configurations
from robench.run.batching import group_units, unit_rows
from robench.run.configurations import configuration_row
from robench.run.executors import failed_row
from robench.run.ranking import refresh_ranks
from robench.run.scoring import score_groups


@dataclass
class Group:
    """One metric evaluated on one combination: the trials its scores are computed from."""

    metric: object
    combo: Combo
    keys: list
    #: Set by robench.run.adaptive: ``options`` enter the inputs fingerprint, ``finish(scores)
    #: -> scores`` runs after the metric's aggregate. Both empty for a plain run.
    options: dict = field(default_factory=dict)
    finish: Optional[Callable] = None
    configuration: Optional[str] = None  # robench.run.configurations id its scores are stored under

    @property
    def key_dict(self) -> dict:
        clusterer = self.combo.clusterer.name if self.combo.clusterer else ""
        return {"dataset": self.combo.dataset.name, "model": self.combo.model.name,
                "clusterer": clusterer}


@dataclass
class Plan:
    """What a run will do: the trials (deduplicated by key), metric groups and skips."""

    specs: dict = field(default_factory=dict)  # key -> spec, in planning order
    groups: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # dicts: dataset, model, clusterer, metric, reason
    prepare: list = field(default_factory=list)  # (protocol, combo) needing driver-side work
    configurations: dict = field(default_factory=dict)  # id -> description (per metric)
    broken: dict = field(default_factory=dict)  # data set -> why it failed to load (skipped)


@dataclass
class RunReport:
    """What a run did."""

    run_id: int
    n_planned: int
    n_cached: int
    n_ran: int
    failed: list
    skipped: list
    scores: list
    seconds: float
    interrupted: bool = False
    n_aggregated: int = 0  # groups whose scores were computed in this run
    n_reused: int = 0  # groups whose inputs were unchanged: stored scores reported as they are
    adaptive: list = field(default_factory=list)  # --until decided: each raced table's decision
    budget_spent: bool = False  # --budget: the deadline came before every planned trial ran
    n_not_run: int = 0  # planned trials neither stored before nor run (the budget ended first)
    main_job: bool = False  # robench.run.execution.main_job: the quick run, then a race


def _combos(cfg, registry, metric, broken):
    datasets = [registry.get("datasets", n) for n in cfg.datasets]
    models = [registry.get("models", n) for n in cfg.models]
    clusterers = ([registry.get("clusterers", n) for n in cfg.clusterers]
                  if metric.uses_clusterer else [None])
    for d, m, c in itertools.product(datasets, models, clusterers):
        reason = (broken.get(d.name) or m.not_applicable_to(metric) or m.not_applicable(d)
                  or (metric.applies_to(d, m) if metric.applies_to else None)
                  or (c.not_applicable(d) if c else None))
        yield Combo(d, m, c), reason


def plan_run(cfg, registry) -> Plan:
    """Resolve names, drop inapplicable combinations (recorded with reasons) and plan trials.

    A combination that cannot apply is skipped when it came from ``--all`` or a default; a
    component the user named explicitly that cannot apply to any named data set is an error.
    """
    if not cfg.knobs:
        cfg.resolve(registry)
    applicable_seen = {kind: set() for kind in ("datasets", "models", "clusterers")}
    reasons = {}
    plan = Plan(broken=broken_datasets(cfg.datasets, registry))
    checked = {}  # (protocol, data set, model, clusterer) -> why it cannot run there, or None
    for metric_name in cfg.metrics:
        metric = registry.get("metrics", metric_name)
        protocol = registry.get("protocols", metric.protocol)
        description = configurations.describe(cfg, metric, registry)
        config_id = configurations.fingerprint(description)
        plan.configurations[config_id] = description
        for combo, reason in _combos(cfg, registry, metric, plan.broken):
            names = {"datasets": combo.dataset.name, "models": combo.model.name,
                     "clusterers": combo.clusterer.name if combo.clusterer else None}
            culprits = names
            if not reason:
                ident = (protocol.name, *list(names.values()))
                if ident not in checked:
                    checked[ident] = protocol_not_applicable(protocol, combo, cfg, registry)
                reason = checked[ident]
                # a matter of the data (and k): the data set is the culprit
                culprits = {"datasets": names["datasets"]}
            if reason:
                plan.skipped.append({"dataset": names["datasets"], "model": names["models"],
                                     "clusterer": names["clusterers"] or "",
                                     "metric": metric.name, "reason": reason})
                for kind, n in culprits.items():
                    reasons.setdefault((kind, n), reason)
                continue
            for kind, n in names.items():
                applicable_seen[kind].add(n)
            keys = [plan.specs.setdefault(spec["key"], spec)["key"]
                    for spec in protocol.plan(combo, cfg, registry)]
            plan.groups.append(Group(metric, combo, keys, configuration=config_id))
            if combo.clusterer is not None and protocol.prepare is not None:
                plan.prepare.append((protocol, combo))
    explicit = cfg.explicit or {}
    healthy = [n for n in cfg.datasets if n not in plan.broken]
    for kind in ("clusterers", "models", "datasets"):  # the most specific culprit first
        for n in explicit.get(kind, []):
            if kind == "datasets" and n in plan.broken and healthy:
                continue  # reported and skipped; the named data sets that load still run
            if n not in applicable_seen[kind] and (kind, n) in reasons:
                raise ConfigError(f"{kind[:-1]} '{n}' cannot run on what was asked for: "
                                  f"{reasons[(kind, n)]}. Drop it or pick a combination it "
                                  "applies to (`robench list`).")
    return plan


def helper_trials(plan: Plan, asked, done=()) -> list[dict]:
    """Return, per metric, the trials a plan adds of models nobody asked for (a model zoo)."""
    asked, done = set(asked), set(done)
    out: dict[str, dict] = {}
    for group in plan.groups:
        for key in group.keys:
            model = plan.specs[key].get("model")
            if not model or model in asked or model == group.combo.model.name:
                continue
            entry = out.setdefault(group.metric.name, {
                "metric": group.metric.name, "protocol": group.metric.protocol,
                "models": set(), "keys": set()})
            entry["models"].add(model)
            entry["keys"].add(key)
    return [{"metric": e["metric"], "protocol": e["protocol"], "models": sorted(e["models"]),
             "trials": len(e["keys"]), "todo": len(e["keys"] - done)}
            for _, e in sorted(out.items())]


def broken_datasets(names, registry) -> dict:
    """Return {name: reason} for the data sets among ``names`` that fail to load or validate."""
    broken = {}
    for name in names:
        try:
            registry.dataset_versions(name)  # loads and validates it unless a cheap hash will do
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a plugin's data set, whatever it raises
            text = str(exc).strip("'\"")
            broken[name] = (text if f"'{name}'" in text
                            else f"data set '{name}' failed to load: {type(exc).__name__}: {text}")
    return broken


def protocol_not_applicable(protocol, combo, cfg, registry):
    """Return why ``protocol`` cannot run on ``combo`` in this configuration, or None: a class
    without ``sources_per_class(cfg)`` sources of 2+ samples, or its ``preconditions``."""
    if (protocol.sources_per_class is not None and combo.clusterer is not None
            and not combo.clusterer.requires_true_sources):
        k, ds = int(protocol.sources_per_class(cfg)), registry.load_dataset(combo.dataset.name)
        try:
            check_class_sizes(ds.y, k, ds.class_names)
        except SourcesError as exc:
            return (f"{protocol.name} on data set '{combo.dataset.name}' (clusterer "
                    f"'{combo.clusterer.name}'): {exc}")
    if protocol.preconditions is not None:
        try:
            return protocol.preconditions(combo, cfg, registry) or None
        except Exception as exc:  # noqa: BLE001 - a plugin's check: skip, do not stop the run
            return (f"protocol '{protocol.name}' could not check whether it applies to data set "
                    f"'{combo.dataset.name}': {type(exc).__name__}: {exc}")
    return None


def execute(cfg, registry, store, *, command: str = "robench run",
            on_event: Optional[Callable] = None, rescore: bool = False,
            plan: Optional[Plan] = None, score: bool = True,
            deadline: Optional[float] = None, order: Optional[Callable] = None) -> RunReport:
    """Plan, run what is not stored yet, store every trial as it finishes, aggregate scores.

    Unchanged scores are reused (``rescore`` recomputes them); ``score=False`` only runs and
    stores the trials of ``plan``. ``deadline`` (:func:`time.monotonic`, ``--budget``): past it
    nothing starts and the run stops at the next trial stored. ``order(specs) -> specs``
    replaces the longest-first order.
    """
    t0 = time.perf_counter()
    emit = on_event or (lambda *a, **k: None)
    if killed := store.mark_killed_runs():
        emit("killed_runs", runs=killed)
    plan = plan_run(cfg, registry) if plan is None else plan
    keys = list(plan.specs)
    done_keys = store.ok_trial_keys(keys)
    # The device rides in each spec to the worker but is not part of the key: a trial stored
    # on one device is found stored on another (robench.learn.devices says why).
    todo = [dict(plan.specs[k], device=cfg.device) for k in keys if k not in done_keys]
    config = {**cfg.to_dict(), "cache_dir": str(cache_dir())}  # executor_options keeps its place
    config["executor_options"] = {k: redact_secrets(v)
                                  for k, v in (config.get("executor_options") or {}).items()}
    run_id = store.start_run(command=command, seed=cfg.seed, config=config,
                             plugin_versions=registry.plugin_versions(),
                             plugin_distributions=registry.plugin_distributions())
    try:
        _record_plan(plan, cfg.models, done_keys, store, run_id, emit)
        emit("planned", total=len(keys), cached=len(done_keys), todo=len(todo),
             skipped=plan.skipped)
        ran = _run_trials(plan, cfg, registry, store, run_id, todo, emit, deadline, order)
        scores, n_aggregated, n_reused = [], 0, 0
        if score and not ran.interrupted:
            versions = {g.metric.name: registry.component_version("metrics", g.metric.name)
                        for g in plan.groups}
            scores, n_aggregated, n_reused = score_groups(plan.groups, store, run_id,
                                                          versions=versions, rescore=rescore)
            refresh_ranks(store, registry)  # what the leaderboard view shows
        status = "interrupted" if ran.interrupted else ("failed" if ran.failed else "ok")
        store.finish_run(run_id, status, n_planned=len(keys), n_cached=len(done_keys),
                         n_ok=ran.n_ran - sum(f["key"] not in ran.blocked for f in ran.failed),
                         n_failed=len(ran.failed), n_skipped=len(plan.skipped))
    except BaseException:
        # whatever stopped it (a bug, an error the run could not contain), the run row must
        # not stay 'running'; the original error is the one to report
        with contextlib.suppress(Exception):
            store.finish_run(run_id, "failed")
        raise
    left = len(todo) - ran.n_ran - len(ran.blocked) if ran.spent else 0
    if ran.spent:
        emit("budget_spent", ran=ran.n_ran, left=left)
    return RunReport(run_id, len(keys), len(done_keys), ran.n_ran, ran.failed, plan.skipped,
                     scores, time.perf_counter() - t0, ran.interrupted, n_aggregated, n_reused,
                     budget_spent=ran.spent, n_not_run=left)


def _record_plan(plan: Plan, models: list, done_keys, store, run_id: int, emit) -> None:
    """Store the plan's configurations and skips; say what is broken and its helper trials."""
    for description in plan.configurations.values():
        store.save_configuration(configuration_row(description, run_id))
    for skip in plan.skipped:
        store.save_skip(run_id=run_id, **skip)
    for name, reason in plan.broken.items():
        emit("dataset_failed", dataset=name, reason=reason)
    if helpers := helper_trials(plan, models, done_keys):
        emit("helpers", helpers=helpers)


class _Trials:
    """What running a plan's trials gave (:func:`_run_trials`)."""

    def __init__(self):
        self.failed: list = []
        self.blocked: dict = {}  # key -> error for trials whose shared preparation failed
        self.clustering: dict = {}  # trial key -> key of the clustering its partitions come from
        self.n_ran, self.spent, self.interrupted = 0, False, False


def _run_trials(plan, cfg, registry, store, run_id, todo, emit, deadline, order) -> _Trials:
    """Prepare and run the trials ``todo``, storing each as it finishes; a Ctrl-C ends it."""
    ran = _Trials()
    try:
        if todo and deadline is not None and time.monotonic() >= deadline:
            ran.spent = True  # the budget is gone before this round: nothing starts
        elif todo:
            _prepare(plan, cfg, registry, store, run_id, todo, ran.blocked, emit, ran.clustering)
            for key, err in ran.blocked.items():
                row = dict(failed_row(plan.specs[key], err), run_id=run_id)
                store.save_trial(row)
                ran.failed.append(row)
                emit("trial", row=row)
            runnable = [s for s in todo if s["key"] not in ran.blocked]
            runnable = (order(runnable) if order is not None
                        else longest_first(runnable, registry, store))
            executor = registry.get("executors", cfg.executor).create(
                registry, jobs=cfg.jobs, **(cfg.executor_options or {}))
            executor.trial_timeout = cfg.trial_timeout or None
            if getattr(executor, "runs_units", False):
                runnable = group_units(runnable, cfg.batch, cfg.jobs)
            rows = executor.run(runnable)
            try:
                _store_rows(rows, ran, cfg, store, run_id, emit, deadline, len(todo))
            finally:
                if hasattr(rows, "close"):
                    rows.close()  # a budget's stop: trials in flight are not stored
                executor.close()
    except KeyboardInterrupt:
        ran.interrupted = True
    return ran


def _store_rows(rows, ran: _Trials, cfg, store, run_id, emit, deadline, n_todo: int) -> None:
    """Store each trial row as the executor yields it; stop at the deadline."""
    for row in (r for item in rows for r in unit_rows(item)):
        row["run_id"] = run_id
        if row.get("execution") is not None:  # how it ran (robench verify)
            row["execution"] = {**row["execution"], "executor": cfg.executor}
        if row.get("key") in ran.clustering:
            row["clustering"] = ran.clustering[row["key"]]
        # its own transaction: a crash loses only the trials in flight
        store.save_trial(row)
        ran.n_ran += 1
        if row["status"] != "ok":
            ran.failed.append(row)
        emit("trial", row=row)
        if deadline is not None and time.monotonic() >= deadline:
            ran.spent = n_todo > ran.n_ran + len(ran.blocked)
            break


def longest_first(specs: list, registry, store) -> list:
    """Order trials by expected duration (stored, else the data set's size), longest first, so
    no worker idles at the end; a protocol that lists others in ``after`` goes after theirs (it
    loads what they train and cache, e.g. reference models)."""
    past = {(row["dataset"], row["model"], row["protocol"]): row["seconds"]
            for row in store.trial_seconds()}

    def cost(spec):
        if (known := past.get((spec["dataset"], spec["model"], spec["protocol"]))) is not None:
            return known
        try:
            ds = registry.load_dataset(spec["dataset"])
        except Exception:  # noqa: BLE001 - the trial records why; order is only a heuristic
            return 0.0
        try:
            image = registry.get("models", spec["model"]).requires_image
        except LookupError:  # dataset-level trials have no model; zoo members are unregistered
            image = False
        return 1e-6 * ds.n_samples * ds.n_features * (2.0 if image else 1.0)

    present = {spec["protocol"] for spec in specs}
    return sorted(specs, key=lambda spec: (
        bool(present.intersection(registry.get("protocols", spec["protocol"]).after)),
        -cost(spec)))


def _prepare(plan, cfg, registry, store, run_id, todo, blocked, emit, clustering):
    """Do each combination's driver-side preparation (clustering) once, before any trial."""
    todo_keys = {s["key"] for s in todo}
    done = set()
    for protocol, combo in plan.prepare:
        ident = (protocol.name, combo.dataset.name, combo.clusterer.name)
        needed = {k for g in plan.groups if g.combo == combo for k in g.keys} & todo_keys
        if ident in done or not needed:
            continue
        done.add(ident)
        # only this protocol's trials: another protocol on the same (data set, clusterer)
        # prepares its own sources and does not depend on this preparation
        mine = [k for g in plan.groups
                if (g.combo.dataset == combo.dataset and g.combo.clusterer == combo.clusterer
                    and g.metric.protocol == protocol.name)
                for k in g.keys
                if k in todo_keys and plan.specs[k]["clusterer"] == combo.clusterer.name]
        emit("prepare", dataset=combo.dataset.name, clusterer=combo.clusterer.name)
        try:
            dataset = registry.load_dataset(combo.dataset.name)
            # finding sources may train (the vae-vgmm clusterer's VAE): on the run's device
            with using_device(getattr(cfg, "device", None)):
                row = protocol.prepare(combo, cfg, registry, dataset)
            row["run_id"] = run_id
            store.save_clustering(row)
            clustering.update(dict.fromkeys(mine, row["key"]))
        except Exception as exc:  # noqa: BLE001 - recorded against every trial that needed it
            err = f"{type(exc).__name__}: {exc}"
            emit("prepare_failed", dataset=combo.dataset.name, clusterer=combo.clusterer.name,
                 error=err, protocol=protocol.name)
            blocked.update(dict.fromkeys(mine, err))
