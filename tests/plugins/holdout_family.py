"""A whole metric family in one test plugin: a protocol with knobs, a metric, its CLI report and
its leaderboard section. Nothing in robench/ knows about it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robench import hookimpl
from robench.specs import Knob, LeaderboardSection, MetricSpec, ProtocolSpec, Score
from robench.data.splitters import partition_rng, test_mask, validation_split
from robench.run.trials import fit_and_score, make_spec

NAME = "holdout"


def plan(combo, cfg, registry):
    """R random hold-out trials of one (dataset, model), test share from the knob."""
    knobs = cfg.knobs["holdout"]
    return [make_spec(NAME, "1", combo, cfg, registry, kind="holdout", repeat=r,
                      params={"test_size": knobs["test_size"], "train": cfg.train},
                      with_clusterer=False)
            for r in range(knobs["repeats"])]


def run(spec, env):
    """Train on a stratified random split (validation carved from training), score on test."""
    data = env.dataset(spec["dataset"])
    mask = test_mask("random", data.y, None, seed=spec["seed"], repeat=spec["repeat"],
                     test_size=spec["params"]["test_size"])
    fit, val = validation_split(np.flatnonzero(~mask), data.y, 0.2,
                                partition_rng(spec["seed"], spec["repeat"], "random", 7))
    model = env.registry.get("models", spec["model"])
    return fit_and_score(model, data, fit, val, np.flatnonzero(mask), seed=spec["repeat"],
                         train_budget=spec["params"]["train"])


def check(knobs):
    if knobs["repeats"] > 50:
        raise ValueError("repeats above 50 are not worth it here")


def aggregate(group, trials):
    accs = [t["accuracy"] for t in trials if t["status"] == "ok"]
    return [Score(**group, metric="holdout-acc", score="holdout-acc",
                  value=float(np.mean(accs)) if accs else None, n=len(accs))]


def report(rows):
    return [f"HOLDOUT REPORT {r['dataset']}/{r['model']}: {r['value']:.3f}" for r in rows]


def section(rows):
    return {"rows": sorted(rows, key=lambda r: r["model"])} if rows else None


PROTOCOL = ProtocolSpec(
    name=NAME, plan=plan, run=run, description="Random hold-out, R repeats.", section="holdout",
    knobs=(Knob("repeats", "int", "hold-out repeats", default=2, profiles={"paper": 10},
                minimum=1),
           Knob("test_size", "float", "test share", default=0.25, minimum=0.05, maximum=0.9)),
    check_knobs=check,
)
METRIC = MetricSpec(
    name="holdout-acc", description="Mean hold-out accuracy.", protocol=NAME,
    aggregate=aggregate, definition="mean test accuracy over R random hold-out splits",
    uses_clusterer=False, report=report,
    leaderboard=LeaderboardSection(build=section, template="holdout.html",
                                   templates=str(Path(__file__).parent / "templates")),
    display_order=5,
)


@hookimpl
def register_protocols(register):
    register(PROTOCOL)


@hookimpl
def register_metrics(register):
    register(METRIC)
