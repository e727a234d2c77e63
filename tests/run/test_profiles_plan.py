"""Every profile plans clean: `run --all` on every built-in data set and clusterer (issue 33).

For each profile (quick, standard, paper) the planner's own plan of every built-in data set,
model, clusterer and metric (opt-in ones included: a superset of what `run --all` asks for)
is checked without training anything: every planned trial's partitions are built, by the
protocol's own functions, from the sources the trial will use, and must be a valid split (no
error; train, validation and test non-empty and disjoint). The oracle's sources are found for
real (it reads the true source ids: fast); another clusterer's are stood in for by the
contract a clusterer fulfils, k sources per class (a round-robin labelling), since clustering
is what a run does, not what planning may do.

Before issue 33 this failed: the standard and paper profiles planned 5 shifted-cv folds on
synthetic-sources' 4 true sources per class (the oracle's), so 251 trials of a standard
`run --all` failed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from robench.data import sources as sources_mod
from robench.run.config import RunConfig
from robench.families.shifted_cv import protocol as shifted_cv
from robench.families.source_aware import adequacy_protocol as adequacy
from robench.families.source_aware import protocol as source_aware
from robench.learn.reference_model import reference_split
from robench.run.runner import plan_run

PROFILES = ("quick", "standard", "paper")


def stand_in_sources(dataset, clusterer, version, k, seed):
    """Return the oracle's true sources, or k round-robin sources per class for the others."""
    if clusterer.requires_true_sources:
        return _real_find_sources(dataset, clusterer, version, k, seed)
    y = np.asarray(dataset.y)
    groups = np.empty(y.shape[0], dtype=np.int64)
    for c in range(dataset.n_classes):
        idx = np.flatnonzero(y == c)
        groups[idx] = c * k + np.arange(idx.size) % k
    n = dataset.n_classes
    return sources_mod.Sources(groups, np.full(n, k), np.full(n, np.nan), np.bincount(y),
                               0.0, False)


_real_find_sources = sources_mod.find_sources


def _reference(spec, dataset, registry):
    p = spec["params"]
    return [reference_split(dataset.y, seed=spec["seed"], test_size=p["test_size"],
                            val_fraction=p["val_fraction"])]


def _shifted_cv(spec, dataset, registry):
    if spec["kind"] != shifted_cv.WASSERSTEIN:
        return [shifted_cv.partition(spec, dataset, registry)]
    parts = []  # the fold-distance trial builds every repeat's shifted and random folds
    p = spec["params"]
    for r in range(p["n_repeats"]):
        for kind in ("shifted", "random"):
            folds = shifted_cv.sample_folds({**spec, "kind": kind, "repeat": r}, dataset,
                                            registry)
            for f in range(p["folds"]):
                test = np.flatnonzero(folds == f)
                rest = np.flatnonzero(folds != f)
                parts.append((rest, rest, test))
    return parts


#: protocol -> the partitions its trial will use, built without training
PARTITIONS = {
    "source-aware": lambda spec, ds, reg: [source_aware.partition(spec, ds, reg)],
    "adequacy": lambda spec, ds, reg: [adequacy.partition(spec, ds, reg)],
    "shifted-cv": _shifted_cv,
    "clusterability": _reference,
    "coverage": _reference,
}


def _partition_id(spec) -> tuple:
    params = {k: v for k, v in spec["params"].items() if k != "train"}
    return (spec["protocol"], spec["dataset"], spec["clusterer"], spec["kind"], spec["seed"],
            json.dumps(params, sort_keys=True, default=str))


def _checked(specs) -> list:
    """Return one spec per distinct partition, repeats 0, 1 and the last of each (fast)."""
    last = {}
    for s in specs:
        pid = _partition_id(s)
        last[pid] = max(last.get(pid, 0), s["repeat"])
    seen, out = set(), []
    for s in specs:
        pid = _partition_id(s)
        if s["repeat"] in (0, 1, last[pid]) and (pid, s["repeat"]) not in seen:
            seen.add((pid, s["repeat"]))
            out.append(s)
    return out


@pytest.fixture(scope="module")
def builtin_registry():
    from robench.plugins import make_registry

    return make_registry(load_entrypoints=False)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_planned_trial_of_every_profile_can_be_partitioned(profile, builtin_registry,
                                                                 monkeypatch):
    reg = builtin_registry
    monkeypatch.setattr(source_aware, "find_sources", stand_in_sources)
    monkeypatch.setattr(shifted_cv, "find_sources", stand_in_sources)
    cfg = RunConfig(datasets=reg.names("datasets"), models=reg.names("models"),
                    clusterers=reg.names("clusterers"), metrics=reg.names("metrics"),
                    profile=profile).resolve(reg)
    plan = plan_run(cfg, reg)
    assert plan.specs and not plan.broken
    assert {c for s in plan.specs.values() for c in [s["clusterer"]] if c} \
        == set(reg.names("clusterers")), "every clusterer plans trials somewhere"
    bad = {}
    for spec in _checked(list(plan.specs.values())):
        assert spec["protocol"] in PARTITIONS, \
            f"protocol {spec['protocol']!r}: add how its partitions are built to PARTITIONS"
        dataset = reg.load_dataset(spec["dataset"])
        try:
            for train, val, test in PARTITIONS[spec["protocol"]](spec, dataset, reg):
                assert len(train) and len(val) and len(test), "an empty part"
                assert not set(np.asarray(test).tolist()) & set(np.asarray(train).tolist()), \
                    "test overlaps train"
        except (ValueError, AssertionError) as exc:
            where = (spec["protocol"], spec["dataset"], spec["clusterer"] or "-", spec["kind"])
            bad.setdefault(where, f"{type(exc).__name__}: {exc}")
    assert not bad, "planned trials whose preconditions do not hold:\n" + "\n".join(
        f"  {w}: {e}" for w, e in sorted(bad.items()))


def test_the_oracle_on_synthetic_sources_plans_every_protocol_in_every_profile(
        builtin_registry):
    reg = builtin_registry
    for profile in PROFILES:
        cfg = RunConfig(datasets=["synthetic-sources"], models=["mlp"], clusterers=["oracle"],
                        metrics=["rho", "adequacy", "shifted-cv"], profile=profile).resolve(reg)
        plan = plan_run(cfg, reg)
        assert not plan.skipped, (profile, plan.skipped)
        assert {g.metric.name for g in plan.groups} == {"rho", "adequacy", "shifted-cv"}
        folds = {s["params"]["folds"] for s in plan.specs.values()
                 if s["protocol"] == "shifted-cv"}
        asked = cfg.knobs["shifted_cv"]["folds"]
        assert folds == {min(asked, 4)}, (profile, folds)  # 4 true sources per class
