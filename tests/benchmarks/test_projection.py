"""benchmarks/projection.py: the paper-scale projection's plan coverage and arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import projection as P  # noqa: E402


@pytest.fixture(scope="module")
def paper():
    return P.paper_plan()


def test_every_planned_trial_is_in_one_measured_group(paper):
    cfg, plan, reg = paper
    found = P.groups(plan)
    assert sum(n for n, _ in found.values()) == len(plan.specs)
    # opt-in components are in the plan and so in the groups
    models = {g[2] for g in found}
    assert {"bayesian-alexnet", "lenet", "zoo-vit", "cnn-2", "svm"} <= models
    assert {g[0] for g in found} == {s["protocol"] for s in plan.specs.values()}
    for g, (n, spec) in found.items():
        assert P.group_of(spec) == g and n >= 1
    # representatives: repeat 0 (coverage 1), k-means sources, adequacy's smallest size
    sa = found[("source-aware", "mnist-5k", "cnn-2")][1]
    assert (sa["repeat"], sa["clusterer"]) == (0, "kmeans")
    ad = found[("adequacy", "mnist-5k", "cnn-2")][1]
    assert ad["params"]["size"] == min(s["params"]["size"] for s in plan.specs.values()
                                       if s["protocol"] == "adequacy")
    assert found[("coverage", "mnist-5k", "cnn-2")][1]["repeat"] == 1


def test_shortened_lowers_only_the_budget_and_clusterability_caps(paper):
    cfg, plan, reg = paper
    found = P.groups(plan)
    spec = found[("clusterability", "mnist-5k", "cnn-2")][1]
    short = P.shortened(spec)
    assert spec["params"]["train"]["max_epochs"] == 60  # the original is untouched
    assert short["params"]["train"]["max_epochs"] == P.MEASURE_EPOCHS
    assert short["params"]["train"]["patience"] == P.MEASURE_EPOCHS
    assert short["params"]["analysis"]["attack_cap"] == 50
    assert short["params"]["analysis"]["corruption_cap"] == 50  # paper: null (all)
    assert short["params"]["analysis"]["pgd_steps"] == spec["params"]["analysis"]["pgd_steps"]
    sa = found[("source-aware", "mnist-5k", "cnn-2")][1]
    assert P.shortened(sa)["params"]["k"] == sa["params"]["k"]


def _fit(epochs, max_epochs=1):
    return {"n": 100, "max_epochs": max_epochs, "epochs": epochs, "rest": 0.1}


def test_a_trial_is_fixed_seconds_plus_per_epoch_times_the_paper_epochs():
    spec = {"protocol": "source-aware", "params": {"train": {"max_epochs": 60}}}
    p = P.project_trial(spec, {"seconds": 10.0, "fits": [_fit([2.0])]}, epochs=1)
    assert p["fixed"] == pytest.approx(8.0)
    assert p["seconds"] == pytest.approx(8.0 + 2.0 * 60)
    # two epochs measured: the second (no start-up) is the per-epoch figure
    p = P.project_trial(spec, {"seconds": 10.0, "fits": [_fit([3.0, 2.0], 2)]}, epochs=2)
    assert p["seconds"] == pytest.approx(5.0 + 2.0 * 60)
    # a trial that trains nothing (svm) is its measured seconds
    assert P.project_trial(spec, {"seconds": 4.0, "fits": []}, epochs=1)["seconds"] == 4.0


def test_adequacy_epochs_scale_like_the_trial_and_vae_and_caps_extrapolate():
    spec = {"protocol": "adequacy", "params": {"train": {"max_epochs": 60}, "size": 100}}
    # the trial scaled its 1-epoch budget to 29 (scaled_budget): 60 x 29 epochs at paper scale
    fit = _fit([0.5] + [0.1] * 28, 29)
    p = P.project_trial(spec, {"seconds": 4.5, "fits": [fit]}, epochs=1)
    assert p["seconds"] == pytest.approx(4.5 - 3.3 + 0.1 * 60 * 29)
    wass = {"protocol": "shifted-cv", "params": {}}
    m = {"seconds": 5.0, "fits": [], "vaes": [{"epochs": 20, "ran": 1, "seconds": 3.0}]}
    assert P.project_trial(wass, m)["seconds"] == pytest.approx(5.0 + 3.0 * 19)
    clus = {"protocol": "clusterability",
            "params": {"train": {"max_epochs": 60},
                       "analysis": {"attack_cap": 1000, "corruption_cap": None,
                                    "multicut_cap": 2000}}}
    m = {"seconds": 5.0, "fits": [], "n_test": 1000,
         "timings": {"adversarial": 1.0, "corruptions": 1.0, "multicut": 1.0}}
    # attacks 50 -> 1000 rows and corruptions 50 -> 1000 linearly, multicut 500 -> 1000 squared
    assert P.cap_extra(clus, m) == pytest.approx(19 + 19 + 3)


def test_wall_hours_divide_trials_by_workers_and_add_the_preparation():
    proj = {"trial_seconds": 7200.0, "prepare_seconds": 360.0}
    assert P.wall_hours(proj, 2) == pytest.approx(1.1)
    assert P.wall_hours(proj, 8) == pytest.approx(0.35)
