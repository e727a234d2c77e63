"""The runner end to end on tiny components: invariants 1, 4, 5 and 6, rerun, skips."""

import numpy as np
import pytest

from tests.helpers import run_config, clusterings
from robench.families.source_aware import protocol as source_aware
from robench.run.runner import ConfigError, execute, plan_run
from tests.plugins import tiny


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"], metrics=["rho"],
                repeats=2, k=3, executor="local")
    base.update(kw)
    return run_config(**base)


def test_run_stores_trials_and_scores_then_rerun_trains_nothing(tiny_registry, store):
    report = execute(cfg(), tiny_registry, store)
    assert report.n_planned == 6 and report.n_ran == 6 and not report.failed
    rows = store.trials()
    assert len(rows) == 6 and {r["kind"] for r in rows} == {"inclusive", "exclusive", "random"}
    for r in rows:
        assert r["status"] == "ok" and 0 <= r["accuracy"] <= 1
        assert len(r["per_class"]) == 3 and r["n_test"] > 0 and r["seconds"] >= 0
        assert r["run_id"] == report.run_id
    scores = {s["score"]: s for s in store.scores(metric="rho")}
    assert set(scores) == {"rho", "acc_exclusive", "acc_inclusive", "acc_random"}
    assert scores["rho"]["n"] == 2 and scores["rho"]["definition"]
    run = store.runs([report.run_id])[0]
    assert run["status"] == "ok" and run["config"]["k"] == 3 and run["robench_version"]

    tiny.SEEN["fit_calls"] = 0
    again = execute(cfg(), tiny_registry, store)
    assert again.n_ran == 0 and again.n_cached == 6
    assert tiny.SEEN["fit_calls"] == 0, "a rerun trains nothing"
    assert {s["score"]: s["value"] for s in store.scores(metric="rho")}["rho"] == scores["rho"]["value"]


def test_more_repeats_runs_only_the_new_trials(tiny_registry, store):
    execute(cfg(repeats=2), tiny_registry, store)
    report = execute(cfg(repeats=3), tiny_registry, store)
    assert report.n_cached == 6 and report.n_ran == 3


def test_test_partition_never_reaches_fit_or_early_stopping(tiny_registry, store):
    """Invariant 1: fit receives train and validation rows only, never a test row."""
    tiny.SEEN["fit"].clear()
    tiny.SEEN["val"].clear()
    execute(cfg(models=["spy"], repeats=3), tiny_registry, store)
    rows = store.trials()
    assert len(tiny.SEEN["fit"]) == len(rows) == 9
    from robench.run.trials import TrialEnv

    ds = TrialEnv(tiny_registry).dataset("tiny")
    as_set = lambda X: frozenset(r.tobytes() for r in X)  # noqa: E731
    by_fit_rows = {}
    for row in rows:
        fit_idx, val_idx, test_idx = source_aware.partition(row["spec"], ds, tiny_registry)
        by_fit_rows[as_set(ds.X[fit_idx])] = (row, as_set(ds.X[val_idx]), as_set(ds.X[test_idx]))
    for X_fit, X_val in zip(tiny.SEEN["fit"], tiny.SEEN["val"]):
        row, val_rows, test_rows = by_fit_rows[as_set(X_fit)]  # the trial this fit belongs to
        assert as_set(X_val) == val_rows and len(X_val) > 0, "early stopping has a validation split"
        assert not test_rows & as_set(X_fit) and not test_rows & as_set(X_val)
        assert len(X_fit) + len(X_val) + len(test_rows) == ds.n_samples


def test_same_seed_same_numbers_other_seed_other_partitions(tiny_registry, tmp_path):
    from robench.storage.store import Store

    def accs(path, seed):
        s = Store(path)
        execute(cfg(seed=seed), tiny_registry, s)
        out = {(r["kind"], r["repeat"]): (r["accuracy"], r["n_test"], r["per_class"])
               for r in s.trials()}
        s.close()
        return out

    a = accs(tmp_path / "a.db", 5)
    b = accs(tmp_path / "b.db", 5)
    c = accs(tmp_path / "c.db", 6)
    assert a == b
    assert a != c


def test_a_failing_trial_is_recorded_and_the_rest_runs(tiny_registry, store):
    report = execute(cfg(models=["boom", "centroid"]), tiny_registry, store)
    failed = [r for r in store.trials() if r["status"] == "failed"]
    assert len(failed) == 6 and all(r["model"] == "boom" for r in failed)
    assert all("boom: this model always fails" in r["error"] for r in failed)
    assert len(report.failed) == 6
    assert len([r for r in store.trials() if r["status"] == "ok"]) == 6
    by_model = {s["model"]: s for s in store.scores(metric="rho") if s["score"] == "rho"}
    assert by_model["centroid"]["value"] is not None and by_model["boom"]["value"] is None
    # a rerun retries only the failures
    again = execute(cfg(models=["boom", "centroid"]), tiny_registry, store)
    assert again.n_cached == 6 and again.n_ran == 6


def test_interrupt_keeps_finished_trials_and_the_next_run_resumes(tiny_registry, store):
    """Invariants 6 and 5: each trial is committed on its own (short transactions), so Ctrl-C
    loses only trials in flight, and the next run reruns only what is not stored."""
    report = execute(cfg(executor="interrupt-after", repeats=3), tiny_registry, store)
    assert report.interrupted
    assert len(store.trials()) == tiny.InterruptAfter.N
    assert store.runs([report.run_id])[0]["status"] == "interrupted"
    resumed = execute(cfg(repeats=3), tiny_registry, store)
    assert resumed.n_cached == tiny.InterruptAfter.N and resumed.n_ran == 9 - tiny.InterruptAfter.N
    assert len(store.trials()) == 9


def test_oracle_is_skipped_with_reason_for_data_without_sources(tiny_registry):
    plan = plan_run(cfg(datasets=["tiny", "tiny-nosrc"], clusterers=["kmeans", "oracle"]),
                    tiny_registry)
    assert [(s["dataset"], s["clusterer"]) for s in plan.skipped] == [("tiny-nosrc", "oracle")]
    assert "has none" in plan.skipped[0]["reason"]
    clusterers = {g.combo.clusterer.name for g in plan.groups}
    assert clusterers == {"kmeans", "oracle"}


def test_oracle_asked_for_by_name_on_data_without_sources_is_an_error(tiny_registry):
    with pytest.raises(ConfigError, match="oracle.*has none"):
        plan_run(cfg(datasets=["tiny-nosrc"], clusterers=["oracle"],
                     explicit={"clusterers": ["oracle"], "datasets": ["tiny-nosrc"]}),
                 tiny_registry)


def test_oracle_uses_the_true_sources(tiny_registry, store):
    execute(cfg(clusterers=["oracle"]), tiny_registry, store)
    clus = clusterings(store)[0]
    assert clus["clusterer"] == "oracle" and clus["details"]["k_per_class"] == [3, 3, 3]
    ds = tiny.make_tiny()
    exclusive = [r for r in store.trials() if r["kind"] == "exclusive"]
    for r in exclusive:
        _, _, test_idx = source_aware.partition(r["spec"], ds, tiny_registry)
        assert np.unique(ds.sources[test_idx]).size == 3  # one true source per class


def test_too_many_sources_is_skipped_before_anything_runs(tiny_registry, store):
    # decided while planning (issue 21): before, every trial of the combination was stored
    # as failed. Not named by the user, it is a skip of that protocol with the reason (issue
    # 33); named, an error (tests/run/test_applicability.py)
    report = execute(cfg(k=20), tiny_registry, store)
    assert report.failed == [] and report.n_planned == 0 and store.trials() == []
    (skip,) = report.skipped
    msg = skip["reason"]
    assert "k=20" in msg and "class '0' has 36" in msg and "smaller --sources" in msg


def test_random_baseline_is_shared_across_clusterers(tiny_registry):
    plan = plan_run(cfg(clusterers=["kmeans", "oracle"]), tiny_registry)
    kinds = [s["kind"] for s in plan.specs.values()]
    assert kinds.count("random") == 2 and kinds.count("exclusive") == 4


def test_trials_run_longest_first(tiny_registry, store):
    from robench.run.runner import longest_first

    plan = plan_run(cfg(datasets=["tiny"], models=["centroid", "mlp"]), tiny_registry)
    specs = list(plan.specs.values())
    # cold: equal data, so order is stable; after a run the measured seconds decide
    execute(cfg(models=["centroid", "mlp"], train={"max_epochs": 2, "batch_size": 16}),
            tiny_registry, store)
    ordered = longest_first(specs, tiny_registry, store)
    secs = {r["model"]: r["seconds"] for r in store.trial_seconds()}
    slow = max(secs, key=secs.get)
    assert ordered[0]["model"] == slow
    assert sorted(s["key"] for s in ordered) == sorted(s["key"] for s in specs)


def test_make_spec_is_keyed_spec_of_its_combination(tiny_registry):
    from robench.run.trials import Combo, keyed_spec, make_spec

    cfg = run_config(["tiny"], ["centroid"], ["kmeans"], ["rho"], registry=tiny_registry)
    reg = tiny_registry
    combo = Combo(reg.get("datasets", "tiny"), reg.get("models", "centroid"),
                  reg.get("clusterers", "kmeans"))
    params = {"k": 3}
    spec = make_spec("p", "7", combo, cfg, reg, kind="exclusive", repeat=1, params=params,
                     with_clusterer=True)
    versions = {**reg.dataset_versions("tiny"),
                "model": reg.component_version("models", "centroid"),
                "clusterer": reg.component_version("clusterers", "kmeans")}
    assert spec == keyed_spec("p", "7", dataset="tiny", model="centroid", clusterer="kmeans",
                              kind="exclusive", repeat=1, seed=cfg.seed, params=params,
                              versions=versions)
    assert spec["versions"]["protocol"] == "7" and len(spec["key"]) == 24
    shared = make_spec("p", "7", combo, cfg, reg, kind="random", repeat=1, params=params,
                       with_clusterer=False)
    assert shared["clusterer"] == "" and "clusterer" not in shared["versions"]
