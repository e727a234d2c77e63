"""Executors: identical stored results, crashed workers recorded, cache hits, cache keys."""

import logging

import pytest

from robench.config import RunConfig
from robench.runner import execute


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid", "mlp"], clusterers=["kmeans"],
                metrics=["rho"], repeats=1, k=3, executor="local", jobs=2,
                train={"max_epochs": 3, "patience": 1, "batch_size": 32})
    base.update(kw)
    return RunConfig(**base)


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
    from robench.store import Store

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
