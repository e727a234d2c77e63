"""The data's content is part of every trial key (issue 21, item 1)."""

import pytest

from robench.run.runner import execute
from tests.helpers import run_config
from tests.plugins import mutable_data


@pytest.fixture
def mutable_registry():
    from robench.plugins import make_registry, set_registry

    mutable_data.CONTENT["seed"] = 0
    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.mutable_data"],
                        load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)
    mutable_data.CONTENT["seed"] = 0


def _fresh_registry():
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.mutable_data"],
                        load_entrypoints=False)
    set_registry(reg)
    return reg


def _cfg(reg):
    return run_config(datasets=["mutable"], models=["centroid"], clusterers=["oracle"],
                      metrics=["rho"], repeats=2, k=3, executor="local", registry=reg)


def test_trial_versions_record_the_data_sets_content_fingerprint(mutable_registry, store):
    report = execute(_cfg(mutable_registry), mutable_registry, store)
    fp = mutable_registry.load_dataset("mutable").fingerprint()
    trials = store.trials()
    assert report.n_ran == len(trials) > 0
    assert {t["versions"]["dataset_content"] for t in trials} == {fp}
    assert {t["versions"]["dataset"] for t in trials} == {
        mutable_registry.component_version("datasets", "mutable")}


def test_replaced_content_retrains_and_unchanged_content_trains_nothing(mutable_registry, store):
    first = execute(_cfg(mutable_registry), mutable_registry, store)
    assert first.n_ran == first.n_planned > 0

    again = execute(_cfg(_fresh_registry()), _fresh_registry(), store)
    assert again.n_ran == 0 and again.n_cached == first.n_planned

    mutable_data.CONTENT["seed"] = 1  # same name, same version, other data
    reg = _fresh_registry()
    changed = execute(_cfg(reg), reg, store)
    assert changed.n_cached == 0 and changed.n_ran == first.n_planned
    assert changed.n_aggregated == 1 and changed.n_reused == 0  # the score is recomputed
    old = {s.score: s.value for s in first.scores}
    new = {s.score: s.value for s in changed.scores}
    assert old != new


def test_a_trial_refuses_data_that_changed_since_planning(mutable_registry):
    from robench.run.executors import execute_trial
    from robench.run.runner import plan_run
    from robench.run.trials import TrialEnv

    spec = next(iter(plan_run(_cfg(mutable_registry), mutable_registry).specs.values()))
    mutable_data.CONTENT["seed"] = 1
    row = execute_trial(spec, TrialEnv(_fresh_registry()))
    assert row["status"] == "failed"
    assert "changed since the run was planned" in row["error"]
