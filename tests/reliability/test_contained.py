"""What a plugin raises or returns is contained: BaseExceptions, bad predictions, duplicate
names, failing imports (issue 16, defects 7-9)."""

from __future__ import annotations

import pytest

from robench.plugins import make_registry
from robench.run.runner import execute
from tests.helpers import run_config
from tests.reliability.cli import HOSTILE, rows, run


@pytest.fixture
def hostile():
    return make_registry(modules=list(HOSTILE), load_entrypoints=False)


@pytest.mark.parametrize("model, error", [
    ("exits", "SystemExit(3) raised by the trial's code"),
    ("interrupts", "KeyboardInterrupt raised by the trial's code (no Ctrl-C was pressed)"),
])
def test_base_exceptions_from_fit_are_failed_trials(hostile, store, model, error):
    cfg = run_config(["tiny"], [model, "centroid"], ["kmeans"], ["rho"], registry=hostile,
                     repeats=1, k=2)
    report = execute(cfg, hostile, store)
    assert not report.interrupted
    assert len(report.failed) == 3
    assert all(r["error"].startswith(error) for r in report.failed)
    assert [r["status"] for r in store.runs()] == ["failed"]
    assert len([t for t in store.trials() if t["status"] == "ok"]) == 3


def test_base_exceptions_in_worker_processes_are_failed_trials(tmp_path):
    db = tmp_path / "w.db"
    done = run(["run", "-d", "tiny", "-m", "exits", "-m", "interrupts", "-m", "centroid",
                "-c", "kmeans", "--metric", "rho", "-k", "2", "-r", "1", "--executor",
                "process", "-j", "2", "--db", str(db)], tmp_path, plugins=HOSTILE)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert rows(db, "SELECT model, status, COUNT(*) FROM trials GROUP BY 1, 2") == [
        ("centroid", "ok", 3), ("exits", "failed", 3), ("interrupts", "failed", 3)]
    assert rows(db, "SELECT status FROM runs") == [("failed",)]


@pytest.mark.parametrize("model, error", [
    ("nan-pred", "predicted 108 NaN or infinite label(s)"),
    ("short-pred", "predicted an array of shape (107,) for 108 rows"),
    ("range-pred", "label(s) outside 0..2"),
    ("str-pred", "expected integer class labels"),
])
def test_bad_predictions_are_failed_trials_with_the_reason(hostile, store, model, error):
    cfg = run_config(["tiny"], [model], ["kmeans"], ["rho"], registry=hostile, repeats=1, k=2)
    report = execute(cfg, hostile, store)
    assert len(report.failed) == 3, [r.get("accuracy") for r in store.trials()]
    assert all(r["error"].startswith("BadPredictions: ") and error in r["error"]
               for r in report.failed), report.failed[0]["error"]


def test_check_predictions_accepts_whole_number_floats():
    import numpy as np

    from robench.data.boundary import check_predictions

    out = check_predictions(np.array([0.0, 2.0, 1.0]), 3, 3, "m")
    assert out.dtype == np.int64 and out.tolist() == [0, 2, 1]


def test_a_worker_crash_noticed_only_when_refilling_the_pool_is_contained(tiny_registry, store,
                                                                         monkeypatch):
    # Under load the driver may still be storing a finished trial when another worker dies;
    # the pool is then broken before it is refilled, and submit() itself raises
    # BrokenProcessPool. That was an uncontained error (the run stopped); this makes the
    # order certain: every submit waits until the 'die' trial in flight has killed its worker.
    from concurrent.futures import wait

    from robench.run.executors import ProcessExecutor

    submit, in_flight = ProcessExecutor._submit, []

    def after_the_crash(self, spec):
        wait([f for f, s in in_flight if s["model"] == "die"])
        future = submit(self, spec)
        in_flight.append((future, spec))
        return future

    monkeypatch.setattr(ProcessExecutor, "_submit", after_the_crash)
    cfg = run_config(["tiny"], ["centroid", "die"], ["kmeans"], ["rho"], registry=tiny_registry,
                     repeats=3, k=2, executor="process", jobs=2)
    report = execute(cfg, tiny_registry, store)
    assert {r["model"] for r in report.failed} == {"die"} and len(report.failed) == 9
    assert all(r["error"].startswith("worker process died") for r in report.failed)
    assert len([t for t in store.trials() if t["status"] == "ok"]) == 9


def test_after_a_worker_crash_the_rest_runs_on_every_worker_again(tiny_registry, store,
                                                                   monkeypatch):
    # issue 16, defect 10: one crash made the rest of the run single-worker
    from robench.run.executors import ProcessExecutor

    pools = []
    new_pool = ProcessExecutor._new_pool

    def recording(self, workers, *args, **kwargs):
        pools.append(workers)
        return new_pool(self, workers, *args, **kwargs)

    monkeypatch.setattr(ProcessExecutor, "_new_pool", recording)
    cfg = run_config(["tiny"], ["die", "centroid"], ["kmeans"], ["rho"], registry=tiny_registry,
                     repeats=3, k=2, executor="process", jobs=2)
    report = execute(cfg, tiny_registry, store)
    assert {r["model"] for r in report.failed} == {"die"} and len(report.failed) == 9
    assert len([t for t in store.trials() if t["status"] == "ok"]) == 9
    first_isolated = pools.index(1)
    assert 2 in pools[first_isolated:], pools
