"""The paper-scale projection (bench.py's *projection* section): measure, then project.

``robench run --all --profile paper`` plans tens of thousands of trials (every registered data
set, model, clusterer and metric, opt-in components included). This module measures what one
trial of each kind costs on this machine and multiplies by the planner's own plan:

1. **The plan.** :func:`paper_plan` is the planner's real plan for ``run --all --profile paper``
   (``robench.run.runner.plan_run``), not a hand count. Its trials fall into *groups*: (protocol,
   data set, model), and shifted-cv's fold-distance trial (no model) per data set.
2. **One trial per group, shortened.** :func:`representative` picks one spec of each group
   (repeat 0, the k-means sources where there is a choice; adequacy: its smallest size, which
   has the most epochs). :func:`shortened` lowers its training budget to
   :data:`MEASURE_EPOCHS` epochs (patience as large, so every one runs); everything else in
   the spec stays the paper's (attacks, corruptions, Monte Carlo samples, VAE and decoder
   epochs, data sizes). The trials run through the executor's own ``execute_trial`` in
   worker processes with one torch thread, as ``run`` does.
3. **Per-epoch and fixed seconds.** In the worker, every :class:`robench.learn.train.TorchClassifier`
   fit is timed epoch by epoch (its ``epoch_callback`` hook, which observes only). A trial's
   *fixed* seconds are its wall time minus its epochs: data, prediction passes, feature
   extraction, attacks, corruptions, VAEs, decoders, clustering in the trial.
4. **Extrapolation.** A projected trial = fixed + per-epoch seconds x the epochs the paper
   budget allows (the spec's ``max_epochs``; adequacy scales it per size exactly as the trial
   does). Per-epoch seconds: the mean of the measured epochs after the first, or the only
   one (start-up included, an upper bound) when a fit ran one epoch, as at
   :data:`MEASURE_EPOCHS` = 1. Every trial is charged all its epochs, so with early stopping
   (patience 10 of 60) this is an **upper bound**; shifted-cv trains 100 epochs with patience
   100 (the paper's), so there it is not.
5. **VAEs and clusterability's caps.** The VAEs (the vae-vgmm clusterers', shifted-cv's fold
   distances) train :data:`MEASURE_VAE_EPOCHS` epoch; their whole time counts per epoch and
   is multiplied by their epochs. Clusterability attacks, corrupts and multicuts fewer rows
   (:data:`REDUCED_CAPS`); the phases the trial times are scaled back (:func:`cap_extra`).
6. **Driver-side preparation** (finding sources: k-means, multicut, the vae-vgmm clusterers)
   runs once per (data set, clusterer) before any trial; it is measured (its VAEs as above)
   and added to the wall time undivided (the driver does it alone).

Caches are shared the way a run shares them (one fresh cache directory for the measurement:
corrupted data sets, VAEs, reference models, features); each group's trials are charged its
representative's seconds, so a group whose representative paid for a cache entry that the
group's other trials would reuse is over-charged (upper bound again).
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

#: Epochs each measured trial trains (its budget shortened to this many).
MEASURE_EPOCHS = 1
#: Protocols whose trials scale the epoch budget by the training size (adequacy).
SIZE_SCALED = ("adequacy",)


def paper_plan(load_entrypoints: bool = False):
    """Return (config, plan, registry) of ``run --all --profile paper`` as the planner makes it."""
    from robench.run.config import RunConfig
    from robench.plugins import make_registry
    from robench.run.runner import plan_run

    reg = make_registry(load_entrypoints=load_entrypoints)
    cfg = RunConfig(datasets=reg.names("datasets"), models=reg.names("models"),
                    clusterers=reg.names("clusterers"), metrics=reg.names("metrics"),
                    profile="paper").resolve(reg)
    return cfg, plan_run(cfg, reg), reg


def group_of(spec: dict) -> tuple:
    """Return the measurement group of a trial spec: (protocol, data set, model or '-')."""
    return (spec["protocol"], spec["dataset"], spec.get("model") or "-")


def _preference(spec: dict) -> tuple:
    # repeat 0, the cheapest clusterer's sources (the trial's cost does not depend on which
    # clusterer found them), exclusive partitions (the larger training partition), and for
    # adequacy the smallest size (the most epochs and validation passes per gradient step)
    # coverage: repeat 1, as repeat 0's reference model may be clusterability's, cached
    size = (spec.get("params") or {}).get("size") or 0
    repeat = spec.get("repeat", 0)
    return (abs(repeat - 1) if spec["protocol"] == "coverage" else repeat,
            spec.get("clusterer") not in ("kmeans", ""),
            spec.get("kind") != "exclusive", size, spec["key"])


def groups(plan) -> dict:
    """Return {group: (number of planned trials, representative spec)} of a plan."""
    counts = Counter(group_of(s) for s in plan.specs.values())
    best = {}
    for spec in plan.specs.values():
        g = group_of(spec)
        if g not in best or _preference(spec) < _preference(best[g]):
            best[g] = spec
    return {g: (counts[g], best[g]) for g in counts}


def paper_epochs(spec: dict):
    """Return the epoch budget of a spec's training (None for a trial that trains nothing)."""
    train = (spec.get("params") or {}).get("train") or {}
    return train.get("max_epochs")


#: Clusterability's analysis caps during the measurement (the paper's: attacks on 1,000 test
#: images, every test image corrupted, a multicut of 2,000 points); each phase the trial times
#: (its ``timings``) is scaled back to the paper's caps: attacks and corruptions linearly in
#: the rows, the multicut on its complete graph quadratically. The other caps stay the paper's.
REDUCED_CAPS = {"attack_cap": 50, "corruption_cap": 50, "multicut_cap": 500}
#: (phase timed by the trial, the cap its rows come from, exponent of the rows in its cost)
CAP_PHASES = (("adversarial", "attack_cap", 1), ("corruptions", "corruption_cap", 1),
              ("multicut", "multicut_cap", 2))


def shortened(spec: dict, epochs: int = MEASURE_EPOCHS) -> dict:
    """Return a copy of ``spec`` whose training budget is ``epochs`` epochs, all of them run.

    A clusterability trial's analysis caps are lowered too (:data:`REDUCED_CAPS`).
    """
    out = copy.deepcopy(spec)
    train = (out.get("params") or {}).get("train")
    if train and "max_epochs" in train:
        train["max_epochs"] = min(int(train["max_epochs"]), epochs)
        train["patience"] = train["max_epochs"]
    analysis = (out.get("params") or {}).get("analysis")
    if out["protocol"] == "clusterability" and analysis:
        for knob, cap in REDUCED_CAPS.items():
            if knob in analysis:
                paper = analysis[knob]
                analysis[knob] = cap if paper is None else min(int(paper), cap)
    return out


def _cap_rows(cap, n_test: int) -> int:
    return n_test if cap is None else min(int(cap), n_test)


def cap_extra(spec: dict, measured: dict) -> float:
    """Return the seconds a clusterability trial's phases would add at the paper's caps."""
    timings, n_test = measured.get("timings") or {}, measured.get("n_test")
    analysis = (spec.get("params") or {}).get("analysis") or {}
    if spec["protocol"] != "clusterability" or not timings or not n_test:
        return 0.0
    short = shortened(spec)["params"]["analysis"]
    extra = 0.0
    for phase, knob, power in CAP_PHASES:
        if phase not in timings or knob not in analysis:
            continue
        paper, done = _cap_rows(analysis[knob], n_test), _cap_rows(short[knob], n_test)
        if done:
            extra += timings[phase] * ((paper / done) ** power - 1)
    return extra


# --- the worker side ---------------------------------------------------------------------

_FITS: list = []
_VAES: list = []
#: Epochs each measured VAE trains (the shifted-cv VAEs' own loop: no per-epoch hook).
MEASURE_VAE_EPOCHS = 1


def _instrument() -> None:
    """Time every TorchClassifier fit of this process epoch by epoch (observing only)."""
    from robench.learn.train import TorchClassifier

    if getattr(TorchClassifier, "_projection_timed", False):
        return

    def get(self):
        inner = self.__dict__.get("_inner_epoch_callback")
        log = self.__dict__.get("_projection_log")
        if log is None:
            return inner

        def observed(clf, epoch):
            log["ends"].append(time.perf_counter())
            return inner(clf, epoch) if inner is not None else None

        return observed

    def set_(self, value):
        self.__dict__["_inner_epoch_callback"] = value

    fit = TorchClassifier.fit

    def timed_fit(self, X, *args, **kwargs):
        log = {"n": len(X), "max_epochs": int(self.max_epochs), "start": time.perf_counter(),
               "ends": []}
        self.__dict__["_projection_log"] = log
        try:
            return fit(self, X, *args, **kwargs)
        finally:
            log["end"] = time.perf_counter()
            self.__dict__.pop("_projection_log", None)
            _FITS.append(log)

    TorchClassifier.epoch_callback = property(get, set_)
    TorchClassifier.fit = timed_fit
    TorchClassifier._projection_timed = True

    # The VAEs (vae-vgmm clusterers, shifted-cv's fold distances) train in a loop of their
    # own: each one trains MEASURE_VAE_EPOCHS epoch(s), and its whole time (set-up and the
    # encoding pass included) counts as that many epochs, an upper bound per epoch.
    from robench.families.shifted_cv import vae

    train_vae = vae.train_vae

    def short_vae(X, *, epochs, **kwargs):
        t0 = time.perf_counter()
        out = train_vae(X, epochs=min(int(epochs), MEASURE_VAE_EPOCHS), **kwargs)
        _VAES.append({"epochs": int(epochs), "ran": min(int(epochs), MEASURE_VAE_EPOCHS),
                      "seconds": time.perf_counter() - t0})
        return out

    vae.train_vae = short_vae


#: Address-space limit of a measuring worker: a trial that would outgrow it fails with a
#: MemoryError (recorded against its group) instead of the kernel killing the worker and the
#: whole measurement with it (a paper-profile trial once grew past 22 GB here).
WORKER_MEMORY_LIMIT = 12 * 2**30


def _init_worker(cache: str, load_entrypoints: bool) -> None:
    import resource
    import sys

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > WORKER_MEMORY_LIMIT:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_LIMIT, hard))

    os.environ["ROBENCH_TORCH_THREADS"] = "1"
    sys._robench_called_from_test = not load_entrypoints
    from robench.data.cache import set_cache_dir
    from robench.run.executors import limit_threads

    limit_threads()
    set_cache_dir(cache)
    _instrument()


_ENV = {}


def measure_trial(spec: dict, load_entrypoints: bool = False) -> dict:
    """Run a (shortened) spec in this process; return its seconds and its fits' epoch times."""
    from robench.run.executors import execute_trial

    if "env" not in _ENV:
        from robench.plugins import make_registry
        from robench.run.trials import TrialEnv

        _ENV["env"] = TrialEnv(make_registry(load_entrypoints=load_entrypoints))
        for name in ("digits", "mnist-5k", "synthetic-sources"):  # loading is not a trial's
            try:
                _ENV["env"].dataset(name)
            except Exception:  # noqa: BLE001 - the trial records its own error
                pass
    _FITS.clear()
    _VAES.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    row = execute_trial(spec, _ENV["env"])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    fits = []
    for log in _FITS:
        starts = [log["start"]] + log["ends"][:-1]
        durations = [e - s for s, e in zip(starts, log["ends"])]
        fits.append({"n": log["n"], "max_epochs": log["max_epochs"], "epochs": durations,
                     "rest": log["end"] - (log["ends"][-1] if log["ends"] else log["start"])})
    return {"seconds": seconds, "cpu": cpu, "status": row["status"],
            "error": (row.get("error") or "").splitlines()[0][:200] if row.get("error") else None,
            "fits": fits, "vaes": list(_VAES),
            "timings": (row.get("extra") or {}).get("timings"),
            "n_test": (row.get("extra") or {}).get("n_test")}


def measure_prepare(protocol_name: str, dataset: str, clusterer: str,
                    load_entrypoints: bool = False) -> dict:
    """Find one (data set, clusterer)'s sources the way the driver does; return its seconds."""
    from robench.run.config import RunConfig
    from robench.plugins import make_registry
    from robench.run.trials import Combo

    reg = make_registry(load_entrypoints=load_entrypoints)
    cfg = RunConfig(datasets=[dataset], models=["mlp"], clusterers=[clusterer], metrics=["rho"],
                    profile="paper").resolve(reg)
    protocol = reg.get("protocols", protocol_name)
    combo = Combo(dataset=reg.get("datasets", dataset), model=None,
                  clusterer=reg.get("clusterers", clusterer))
    data = reg.load_dataset(dataset)
    _VAES.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        protocol.prepare(combo, cfg, reg, data)
        error = None
    except Exception as exc:  # noqa: BLE001 - reported in the table
        error = f"{type(exc).__name__}: {exc}"[:200]
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "error": error, "vaes": list(_VAES)}


# --- projection ----------------------------------------------------------------------------


def per_epoch(fit: dict):
    """Return a fit's seconds per epoch: the mean of its epochs after the first (start-up)."""
    e = fit["epochs"]
    if not e:
        return None
    return sum(e[1:]) / len(e[1:]) if len(e) > 1 else e[0]


def vae_extra(measured: dict) -> float:
    """Return the seconds a measurement's VAEs would add at their full epochs."""
    return sum(v["seconds"] * (v["epochs"] - v["ran"]) / v["ran"]
               for v in measured.get("vaes", ()))


def project_trial(spec: dict, measured: dict, epochs: int = MEASURE_EPOCHS) -> dict:
    """Return the projected seconds of one trial of ``spec``'s group from its measurement.

    ``fixed`` is the measured wall time minus every measured epoch; each fit trained by the
    spec's budget is charged its per-epoch seconds times the paper's epochs (adequacy: scaled
    by the measured fit's own budget, as the trial scales it); a fit with a budget of its own
    (not the spec's) stays at its measured seconds.
    """
    budget = paper_epochs(spec)
    train = sum(sum(f["epochs"]) for f in measured["fits"])
    fixed = measured["seconds"] - train
    extrapolated = vae_extra(measured) + cap_extra(spec, measured)
    projected = fixed + extrapolated
    for f in measured["fits"]:
        pe = per_epoch(f)
        if pe is None:
            continue
        if budget and spec["protocol"] in SIZE_SCALED and f["max_epochs"] >= epochs:
            n_epochs = math.ceil(budget * f["max_epochs"] / epochs)
        elif budget and f["max_epochs"] == min(budget, epochs):
            n_epochs = budget
        else:  # a budget of its own: measured as it runs
            projected += sum(f["epochs"])
            continue
        projected += pe * n_epochs
        extrapolated += pe * n_epochs
    return {"seconds": projected, "fixed": fixed, "train": projected - fixed,
            "extrapolated": extrapolated}


def measure(plan, *, jobs: int = 2, load_entrypoints: bool = False, only=None,
            epochs: int = MEASURE_EPOCHS, progress=None, prepare: bool = True) -> dict:
    """Measure one shortened trial of every group of ``plan`` and every preparation.

    Returns {"groups": {group: {"n", "spec", "measured"}}, "prepare": {(ds, clusterer): {...}},
    "seconds": wall time of the measurement}. ``only`` (a predicate on the group) limits it.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    found = {g: v for g, v in groups(plan).items() if only is None or only(g)}
    prep = {}
    for protocol, combo in plan.prepare:
        ident = (combo.dataset.name, combo.clusterer.name)
        if (only is None or any(g[1] == ident[0] for g in found)) and (
                prepare or ident[1] == "kmeans"):
            prep.setdefault(ident, protocol.name)
    with tempfile.TemporaryDirectory(prefix="robench-projection-") as cache:
        from robench.data.cache import cache_dir

        shared = cache_dir() / "datasets"  # parsed data sets: loading is not a trial's cost
        if shared.is_dir():
            os.symlink(shared, Path(cache) / "datasets")
        out = {"groups": {}, "prepare": {}}
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                 initargs=(cache, load_entrypoints)) as pool:
            # k-means sources first (every representative uses them), the other clusterers'
            # preparations alongside the trials; coverage after clusterability, as run orders
            first = {i: p for i, p in prep.items() if i[1] in ("kmeans", "oracle")}
            waits = {pool.submit(measure_prepare, p, *i, load_entrypoints): ("prepare", i)
                     for i, p in first.items()}
            for fut, (_, ident) in list(waits.items()):
                out["prepare"][ident] = fut.result()
            waits = {pool.submit(measure_prepare, p, *i, load_entrypoints): ("prepare", i)
                     for i, p in prep.items() if i not in first}
            order = sorted(found, key=lambda g: (g[0] == "coverage", g))
            for g in order:
                n, spec = found[g]
                fut = pool.submit(measure_trial, shortened(spec, epochs), load_entrypoints)
                waits[fut] = ("trial", g)
            from concurrent.futures import as_completed

            for fut in as_completed(waits):
                what, ident = waits[fut]
                result = fut.result()
                if what == "prepare":
                    out["prepare"][ident] = result
                else:
                    n, spec = found[ident]
                    out["groups"][ident] = {"n": n, "spec": spec, "measured": result}
                if progress:
                    progress(what, ident, result)
    out["seconds"] = time.perf_counter() - t0
    return out


def project(measured: dict, *, epochs: int = MEASURE_EPOCHS) -> dict:
    """Return the projection: per group its trials and seconds, totals, what was extrapolated."""
    rows, total, extrapolated, failed = {}, 0.0, 0.0, []
    for g, info in measured["groups"].items():
        m = info["measured"]
        if m["status"] != "ok":
            failed.append((g, m["error"]))
        p = project_trial(info["spec"], m, epochs)
        rows[g] = {"n": info["n"], "per_trial": p["seconds"], "fixed": p["fixed"],
                   "seconds": info["n"] * p["seconds"],
                   "extrapolated": info["n"] * p["extrapolated"], "measured_s": m["seconds"]}
        total += rows[g]["seconds"]
        extrapolated += rows[g]["extrapolated"]
    prepare = sum(p["seconds"] + vae_extra(p) for p in measured["prepare"].values())
    return {"groups": rows, "trial_seconds": total, "extrapolated": extrapolated,
            "prepare_seconds": prepare, "failed": failed,
            "trials": sum(r["n"] for r in rows.values())}


def wall_hours(projection: dict, workers: int) -> float:
    """Return the projected wall hours on ``workers`` single-threaded workers.

    Trials are independent, so wall ~ the trials' seconds / workers (the longest-first order
    keeps the tail short: the longest single trial is minutes against hours); the driver's
    preparation runs before them, undivided.
    """
    return (projection["trial_seconds"] / workers + projection["prepare_seconds"]) / 3600

