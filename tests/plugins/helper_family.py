"""A metric that trains a helper model beside the one asked for (as purity-ratio trains its
zoo): each combination's trial plus one of ``centroid`` on the same data set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robench import hookimpl
from robench.specs import LeaderboardSection, MetricSpec, ProtocolSpec, Score
from robench.data.splitters import partition_rng, test_mask, validation_split
from robench.run.trials import fit_and_score, keyed_spec

NAME = "helped"
HELPER = "centroid"


def plan(combo, cfg, registry):
    """The combination's model, then the helper, once each."""
    specs = []
    for model in dict.fromkeys([combo.model.name, HELPER]):
        specs.append(keyed_spec(
            NAME, "1", dataset=combo.dataset.name, model=model, kind="holdout", repeat=0,
            seed=cfg.seed, params={"train": cfg.train},
            versions={**registry.dataset_versions(combo.dataset.name),
                      "model": registry.component_version("models", model)}))
    return specs


def run(spec, env):
    data = env.dataset(spec["dataset"])
    mask = test_mask("random", data.y, None, seed=spec["seed"], repeat=0, test_size=0.25)
    fit, val = validation_split(np.flatnonzero(~mask), data.y, 0.2,
                                partition_rng(spec["seed"], 0, "random", 7))
    model = env.registry.get("models", spec["model"])
    return fit_and_score(model, data, fit, val, np.flatnonzero(mask), seed=0,
                         train_budget=spec["params"]["train"])


def aggregate(group, trials):
    """One score per model trained (the helper's too, as purity-ratio's zoo members get)."""
    out = []
    for t in trials:
        if t["status"] == "ok":
            out.append(Score(group["dataset"], t["model"], "", NAME, NAME, t["accuracy"],
                             n=t["n_test"]))
    return out


def headline(rows):
    from robench.present.leaderboard import rank_rows

    ranked = rank_rows([{"model": r["model"], "value": r["value"], "ci_low": None,
                         "ci_high": None, "higher_is_better": True} for r in rows])
    return {"label": NAME, "format": "pct", "rows": ranked} if ranked else None


def section(rows):
    return {"rows": sorted(rows, key=lambda r: r["model"])} if rows else None


PROTOCOL = ProtocolSpec(name=NAME, plan=plan, run=run, description="One hold-out, plus a helper.")
METRIC = MetricSpec(
    name=NAME, description="Hold-out accuracy.", protocol=NAME, aggregate=aggregate,
    definition="test accuracy of one hold-out split", uses_clusterer=False,
    leaderboard=LeaderboardSection(build=section, template="holdout.html", headline=headline,
                                   templates=str(Path(__file__).parent / "templates")),
)


@hookimpl
def register_protocols(register):
    register(PROTOCOL)


@hookimpl
def register_metrics(register):
    register(METRIC)
