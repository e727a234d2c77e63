"""Executors: identical stored results, crashed workers recorded, cache hits, cache keys."""

import logging

import pytest

from tests.helpers import run_config, clusterings
from robench.run.runner import execute


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid", "mlp"], clusterers=["kmeans"],
                metrics=["rho"], repeats=1, k=3, executor="local", jobs=2,
                train={"max_epochs": 3, "patience": 1, "batch_size": 32})
    base.update(kw)
    return run_config(**base)


def stored(store):
    return {r["key"]: (r["status"], r["accuracy"], r["per_class"], r["n_train"], r["epochs"])
            for r in store.trials()}


@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    import dask

    # Fail fast on a killed worker (the default retries the task 3 times).
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(host="127.0.0.1", n_workers=2, threads_per_worker=1,
                                           processes=True, dashboard_address=None,
                                           silence_logs=logging.ERROR)
        yield cluster.scheduler_address
        cluster.close()


def test_local_process_and_dask_store_identical_results(tiny_registry, tmp_path, dask_cluster):
    from robench.storage.store import Store

    results = {}
    for name, extra in [("local", {}), ("process", {}),
                        ("dask", {"executor_options": {"scheduler": dask_cluster}})]:
        s = Store(tmp_path / f"{name}.db")
        report = execute(cfg(executor=name, **extra), tiny_registry, s)
        assert not report.failed, report.failed
        results[name] = stored(s)
        s.close()
    assert len(results["local"]) == 6
    assert results["local"] == results["process"] == results["dask"]


def test_a_killed_process_worker_is_recorded_and_the_rest_completes(tiny_registry, store):
    report = execute(cfg(executor="process", models=["die", "centroid"]), tiny_registry, store)
    rows = store.trials()
    failed = [r for r in rows if r["status"] == "failed"]
    assert {r["model"] for r in failed} == {"die"} and len(failed) == 3
    assert all("worker process died" in r["error"] for r in failed)
    assert len([r for r in rows if r["status"] == "ok"]) == 3
    assert len(report.failed) == 3


def test_a_killed_dask_worker_is_recorded_and_the_rest_completes(tiny_registry, store, dask_cluster):
    execute(cfg(executor="dask", models=["die", "centroid"],
                executor_options={"scheduler": dask_cluster}), tiny_registry, store)
    rows = store.trials()
    assert {r["model"] for r in rows if r["status"] == "failed"} == {"die"}
    assert len([r for r in rows if r["status"] == "ok"]) == 3


def test_second_run_does_no_training_and_no_clustering(tiny_registry, tmp_path, monkeypatch):
    from dataclasses import replace

    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "fresh-cache"))
    from robench.storage.store import Store
    from tests.plugins import tiny

    s = Store(tmp_path / "a.db")
    execute(cfg(models=["centroid"]), tiny_registry, s)
    assert clusterings(s)[0]["details"]["cache_hit"] is False

    def no_clustering(*a, **k):
        raise AssertionError("clustered again instead of using the cache")

    spec = tiny_registry.get("clusterers", "kmeans")
    tiny_registry._by_kind["clusterers"]["kmeans"] = replace(spec, fit_predict=no_clustering)
    tiny.SEEN["fit_calls"] = 0
    report = execute(cfg(models=["centroid"]), tiny_registry, s)
    assert report.n_ran == 0 and tiny.SEEN["fit_calls"] == 0, "same database: nothing trained"
    # a fresh database trains again, but its sources come from the on-disk cache
    s2 = Store(tmp_path / "b.db")
    report = execute(cfg(models=["centroid"]), tiny_registry, s2)
    assert not report.failed and report.n_ran == 3
    assert clusterings(s2)[0]["details"]["cache_hit"] is True


def test_cache_and_trial_keys_change_with_parameters_and_versions(tiny_registry):
    from dataclasses import replace

    from robench.families.source_aware import protocol as source_aware
    from robench.run.trials import Combo
    from robench.data.sources import sources_key

    base = sources_key("fp", "kmeans", "0.1.0/1", 5, 0)
    assert base == sources_key("fp", "kmeans", "0.1.0/1", 5, 0)
    for changed in [sources_key("fp2", "kmeans", "0.1.0/1", 5, 0),
                    sources_key("fp", "kmeans", "0.1.0/2", 5, 0),
                    sources_key("fp", "kmeans", "0.2.0/1", 5, 0),
                    sources_key("fp", "kmeans", "0.1.0/1", 4, 0),
                    sources_key("fp", "kmeans", "0.1.0/1", 5, 1)]:
        assert changed != base

    reg = tiny_registry
    combo = Combo(reg.get("datasets", "tiny"), reg.get("models", "centroid"),
                  reg.get("clusterers", "kmeans"))
    key = lambda c=cfg(), r=reg: source_aware.trial_spec(combo, c, r, "exclusive", 0)["key"]  # noqa: E731
    k0 = key()
    assert k0 == key()
    assert key(cfg(k=4)) != k0
    assert key(cfg(seed=1)) != k0
    assert key(cfg(train={"max_epochs": 4})) != k0
    # a new plugin version (or a spec version bump) re-runs the plugin's trials
    reg.infos["tests.plugins.tiny"].version = "2.0"
    assert key() != k0
    reg._by_kind["models"]["centroid"] = replace(reg.get("models", "centroid"), version="2")
    assert key() != k0


# --- Dask in chunks (issue 43) ----------------------------------------------------------------


def test_chunk_sizes_are_tens_to_hundreds_on_large_runs_and_one_on_small_ones():
    from robench.run.executors import MAX_CHUNK, chunk_size

    assert chunk_size(6, 2) == 1 and chunk_size(1, 8) == 1
    assert chunk_size(83_000, 32) == MAX_CHUNK == 100  # 830 tasks, not 83,000
    assert 10 <= chunk_size(2_000, 16) <= MAX_CHUNK


def test_dask_runs_chunks_and_a_dying_worker_loses_no_trial(tiny_registry, store,
                                                            dask_cluster, monkeypatch):
    """Chunks of 3 trials mixing a model that kills its worker with one that does not: the
    chunk that dies is retried trial by trial, every healthy trial is stored once, ok, and
    the culprit's trials are recorded as failed."""
    from robench.run import executors

    monkeypatch.setattr(executors, "CHUNKS_PER_WORKER", 1)
    sizes = []
    submit = executors.DaskExecutor._submit

    def counting(self, chunk, retry=False):
        sizes.append((len(chunk), retry))
        return submit(self, chunk, retry)

    monkeypatch.setattr(executors.DaskExecutor, "_submit", counting)
    execute(cfg(executor="dask", models=["centroid", "die"],
                executor_options={"scheduler": dask_cluster}), tiny_registry, store)
    first = [n for n, retry in sizes if not retry]
    assert first == [3, 3], "6 trials on 2 workers at 1 chunk per worker: two tasks of 3"
    assert all(n == 1 for n, retry in sizes if retry)
    rows = store.trials()
    assert len(rows) == 6 and len({r["key"] for r in rows}) == 6
    assert {r["model"] for r in rows if r["status"] == "failed"} == {"die"}
    assert len([r for r in rows if r["status"] == "ok"]) == 3


def test_a_dask_wait_with_no_worker_left_gives_up_instead_of_hanging(tiny_registry,
                                                                     monkeypatch):
    """A scheduler without workers (all died, none restarted): the first submission and the
    retry of a suspect are both given up after NO_WORKER_SECONDS (their trials recorded as
    failed), where the retry used to wait on fut.result() for ever."""
    distributed = pytest.importorskip("distributed")
    from robench.run import executors

    monkeypatch.setattr(executors, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(executors, "NO_WORKER_SECONDS", 0.5)
    cluster = distributed.LocalCluster(host="127.0.0.1", n_workers=0, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        ex = executors.DaskExecutor(tiny_registry, jobs=1, scheduler=cluster.scheduler_address)
        from robench.run.runner import plan_run

        specs = list(plan_run(cfg(models=["centroid"]), tiny_registry).specs.values())[:2]
        rows = list(ex.run(specs))
        assert [r["status"] for r in rows] == ["failed", "failed"]
        assert all("no Dask worker connected" in r["error"] for r in rows)
        fut = ex._submit([specs[0]], retry=True)
        (_, _, result, exc), = list(ex._as_finished({fut: [specs[0]]}, retry=True))
        assert result is None and isinstance(exc, executors._NoProgress)
        ex.close()
    finally:
        cluster.close()


def test_two_runs_on_one_scheduler_get_only_their_own_trials(tiny_registry):
    """Issue 51: chunks were keyed by their first trial and size, and Dask answers a task
    whose key it holds with that task's result: run B, whose first chunk began with the
    trial run A's did and was as long, got back A's rows (a trial it never asked for) and
    lost its own. A token per run in every key keeps them apart."""
    distributed = pytest.importorskip("distributed")
    from robench.run import executors
    from robench.run.runner import plan_run

    specs = list(plan_run(cfg(models=["centroid"], repeats=3), tiny_registry).specs.values())
    assert len(specs) == 9
    a, b = specs[:5], [specs[0], *specs[5:]]  # 1 worker: chunks of 2, the first ones alike
    assert executors.chunk_size(5, 1) == 2
    cluster = distributed.LocalCluster(host="127.0.0.1", n_workers=1, threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       silence_logs=logging.ERROR)
    try:
        ex_a = executors.DaskExecutor(tiny_registry, jobs=1, scheduler=cluster.scheduler_address)
        ex_b = executors.DaskExecutor(tiny_registry, jobs=1, scheduler=cluster.scheduler_address)
        run_a = ex_a.run(a)
        first = next(run_a)  # A's tasks are all submitted and held while B runs
        rows_b = list(ex_b.run(b))
        rows_a = [first, *run_a]
        ex_a.close()
        ex_b.close()
    finally:
        cluster.close()
    assert sorted(r["key"] for r in rows_b) == sorted(s["key"] for s in b)
    assert sorted(r["key"] for r in rows_a) == sorted(s["key"] for s in a)
    assert all(r["status"] == "ok" for r in rows_a + rows_b)
