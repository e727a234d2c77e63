"""Warm reruns: stored scores whose inputs are unchanged are reused, changed ones recomputed."""

import dataclasses
import sqlite3

import pytest

from tests.helpers import run_config
from robench.run.runner import execute
from tests.plugins import spy_metric


@pytest.fixture
def spy_registry():
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.spy_metric"],
                        load_entrypoints=False)
    set_registry(reg)
    spy_metric.CALLS.clear()
    yield reg
    set_registry(None)


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid"], clusterers=["kmeans", "oracle"],
                metrics=["spy-rho", "rho"], repeats=2, k=3, executor="local")
    base.update(kw)
    return run_config(**base)


def _table(scores):
    return [(s.dataset, s.model, s.clusterer, s.metric, s.score, s.value, s.ci_low, s.ci_high,
             s.n, s.higher_is_better) for s in scores]


def test_warm_rerun_calls_no_aggregate_and_reports_the_same_scores(spy_registry, store):
    first = execute(cfg(), spy_registry, store)
    assert sorted(spy_metric.CALLS) == [("tiny", "centroid", "kmeans"), ("tiny", "centroid", "oracle")]
    assert first.n_aggregated == 4 and first.n_reused == 0
    stored = {r["key"]: r for r in store.scores()}

    spy_metric.CALLS.clear()
    again = execute(cfg(), spy_registry, store)
    assert spy_metric.CALLS == [], "unchanged inputs: no aggregate runs"
    assert again.n_aggregated == 0 and again.n_reused == 4
    assert _table(again.scores) == _table(first.scores)  # same rows, same order
    rho = {(s.clusterer, s.score): s for s in again.scores if s.metric == "rho"}
    assert rho[("kmeans", "rho")].details["acc_exclusive"]  # details come back decoded
    # nothing rewritten: every score still names the run that computed it
    assert {r["key"]: r for r in store.scores()} == stored
    assert {r["run_id"] for r in stored.values()} == {first.run_id}


def test_rescore_recomputes_everything(spy_registry, store):
    execute(cfg(), spy_registry, store)
    spy_metric.CALLS.clear()
    report = execute(cfg(), spy_registry, store, rescore=True)
    assert len(spy_metric.CALLS) == 2 and report.n_reused == 0


def test_new_trial_reaggregates_only_its_groups(spy_registry, store):
    execute(cfg(), spy_registry, store)
    spy_metric.CALLS.clear()
    report = execute(cfg(repeats=3), spy_registry, store)
    assert report.n_ran > 0
    assert sorted(spy_metric.CALLS) == [("tiny", "centroid", "kmeans"), ("tiny", "centroid", "oracle")]
    assert {s.n for s in report.scores if s.score == "rho"} == {3}
    # another model joins: the centroid groups are unchanged and reused
    spy_metric.CALLS.clear()
    report = execute(cfg(repeats=3, models=["centroid", "spy"]), spy_registry, store)
    assert sorted(spy_metric.CALLS) == [("tiny", "spy", "kmeans"), ("tiny", "spy", "oracle")]
    assert report.n_reused == 4 and report.n_aggregated == 4


def test_a_rewritten_trial_reaggregates(spy_registry, store):
    execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    row = next(r for r in store.trials() if r["kind"] == "exclusive")
    row["accuracy"] = 0.123  # as if the trial had been run again with another outcome
    store.save_trial(row)
    spy_metric.CALLS.clear()
    report = execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    assert spy_metric.CALLS == [("tiny", "centroid", "kmeans")]
    acc = {s.score: s for s in report.scores if s.metric == "rho"}["acc_exclusive"]
    assert 0.123 in acc.details["per_repeat"]


def test_a_bumped_metric_version_reaggregates(spy_registry, store):
    execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    metrics = spy_registry._by_kind["metrics"]
    metrics["spy-rho"] = dataclasses.replace(metrics["spy-rho"], version="2")
    spy_metric.CALLS.clear()
    report = execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    assert spy_metric.CALLS == [("tiny", "centroid", "kmeans")]
    assert report.n_reused == 1  # rho itself did not change
    assert {r["metric_version"] for r in store.scores(metric="spy-rho")} == {"2"}


def test_a_deleted_or_edited_score_reaggregates(spy_registry, store):
    execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    conn = sqlite3.connect(store.path)
    conn.execute("DELETE FROM scores WHERE metric = 'spy-rho' AND score = 'acc_random'")
    conn.execute("UPDATE scores SET value = 0.5 WHERE metric = 'rho' AND score = 'rho'")
    conn.commit()
    conn.close()
    spy_metric.CALLS.clear()
    report = execute(cfg(clusterers=["kmeans"]), spy_registry, store)
    assert spy_metric.CALLS == [("tiny", "centroid", "kmeans")]
    assert report.n_aggregated == 2
    assert len(store.scores(metric="spy-rho")) == 4
    rho = {r["score"]: r for r in store.scores(metric="rho")}["rho"]
    assert rho["value"] != 0.5 and rho["run_id"] == report.run_id  # recomputed, rewritten


def test_scores_say_what_they_were_computed_from(spy_registry, store):
    report = execute(cfg(clusterers=["kmeans"], metrics=["rho"]), spy_registry, store)
    (group,) = store.db["score_groups"].rows
    assert group["run_id"] == report.run_id
    assert group["metric_version"] == spy_registry.get("metrics", "rho").version
    trial_keys = {r["key"] for r in store.trials()}
    import json

    assert set(json.loads(group["trial_keys"])) == trial_keys
    assert {r["inputs"] for r in store.scores()} == {group["inputs"]}
    assert len(json.loads(group["scores"])) == 4


def test_a_database_from_before_score_groups_still_works(spy_registry, tmp_path):
    from robench.storage.store import Store

    path = tmp_path / "old.db"
    with Store(path) as s:
        execute(cfg(clusterers=["kmeans"]), spy_registry, s)
    # make it look like an older robench wrote it: no inputs column, no score_groups table
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE score_groups")
    conn.execute("ALTER TABLE scores DROP COLUMN inputs")
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master "
                                   "WHERE type IN ('view', 'index') AND sql IS NOT NULL").fetchall():
        conn.execute(f"DROP {kind} {name}")
    conn.execute("ALTER TABLE scores DROP COLUMN configuration")
    conn.execute("DROP TABLE configurations")
    conn.execute("PRAGMA user_version = 0")
    conn.commit()
    conn.close()
    spy_metric.CALLS.clear()
    with Store(path) as s:
        report = execute(cfg(clusterers=["kmeans"]), spy_registry, s)
        assert spy_metric.CALLS == [("tiny", "centroid", "kmeans")]  # computed once, then reused
        assert report.n_ran == 0 and "inputs" in s.db["scores"].columns_dict
    spy_metric.CALLS.clear()
    with Store(path) as s:
        assert execute(cfg(clusterers=["kmeans"]), spy_registry, s).n_aggregated == 0
    assert spy_metric.CALLS == []


def test_planning_and_storing_import_neither_sklearn_nor_torch():
    """A warm `robench run` plans, reads the store and prints: none of that needs sklearn."""
    import subprocess
    import sys

    code = ("import sys, robench.cli, robench.run.runner, robench.storage.store, robench.plugins\n"
            "reg = robench.plugins.make_registry(load_entrypoints=False)\n"
            "assert len(reg.all('protocols')) >= 6\n"
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from robench.data import SourceExclusiveSplit  # re-exported by the package

    assert SourceExclusiveSplit(n_repeats=2).get_n_splits() == 2
