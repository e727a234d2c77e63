"""kill -9 of a run: workers exit with their driver, the run is marked killed, the rerun
resumes with nothing lost or duplicated (issue 16, defect 2; crash safety kept)."""

from __future__ import annotations

import os
import random
import signal
import time

from tests.reliability.cli import (HOSTILE, children, integrity, kill_driver, rows, run,
                                   start, wait_for)

SLOW = ["run", "-d", "tiny", "-m", "slow", "-c", "kmeans", "--metric", "rho", "-k", "3"]


def _n_trials(db):
    try:
        return rows(db, "SELECT COUNT(*) FROM trials")[0][0]
    except Exception:  # noqa: BLE001 - not created yet
        return 0


def test_workers_exit_when_their_driver_is_killed_and_the_run_is_marked_killed(tmp_path):
    db = tmp_path / "k.db"
    args = [*SLOW, "-r", "2", "--executor", "process", "-j", "2", "--db", str(db)]
    driver = start(args, tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": 3})
    workers = []
    try:
        wait_for(lambda: _n_trials(db) >= 1, 120, "a first stored trial")
        workers = children(driver.pid)
        assert workers, "the process executor started no worker"
    finally:
        assert kill_driver(driver, workers, 15), f"workers {workers} outlived their driver"
    assert rows(db, "SELECT id, status FROM runs") == [(1, "running")]

    again = run([*SLOW, "-r", "2", "--executor", "local", "--db", str(db)], tmp_path,
                plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": 0})
    assert again.returncode == 0, again.stderr
    assert "run 1 " in again.stderr and "marked 'killed'" in again.stderr
    assert rows(db, "SELECT id, status FROM runs ORDER BY id") == [(1, "killed"), (2, "ok")]
    assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("ok", 6)]
    assert integrity(db) == "ok"


def test_a_running_run_of_a_live_process_is_not_marked_killed(tmp_path):
    from robench.storage.store import Store

    with Store(tmp_path / "r.db") as store:
        live = store.start_run(command="x", seed=0, config={}, plugin_versions={})
        gone = store.start_run(command="y", seed=0, config={}, plugin_versions={})
        store.db.execute("UPDATE runs SET pid = 2147483646 WHERE id = ?", [gone])
        other_host = store.start_run(command="z", seed=0, config={}, plugin_versions={})
        store.db.execute("UPDATE runs SET pid = 2147483646, host = 'elsewhere' WHERE id = ?",
                         [other_host])
        reused = store.start_run(command="w", seed=0, config={}, plugin_versions={})
        store.db.execute("UPDATE runs SET pid_started = '1' WHERE id = ?", [reused])
        assert [r["id"] for r in store.mark_killed_runs()] == [gone, reused]
        status = {r["id"]: r["status"] for r in store.runs()}
        assert status == {live: "running", gone: "killed", other_host: "running",
                          reused: "killed"}


def test_kill_9_at_random_points_resumes_with_nothing_lost(tmp_path):
    """A few kill -9 at random moments; each resume completes the same trials and scores."""
    args = [*SLOW, "-r", "2", "--executor", "local"]
    reference = tmp_path / "ref.db"
    done = run([*args, "--db", str(reference)], tmp_path, plugins=HOSTILE,
               env={"ROBENCH_TEST_SLEEP": 0})
    assert done.returncode == 0, done.stderr
    expected = rows(reference, "SELECT key, accuracy FROM trials ORDER BY key")
    expected_scores = rows(reference, "SELECT key, value FROM scores ORDER BY key")

    rng = random.Random(16)
    db = tmp_path / "killed.db"
    for attempt in range(3):
        proc = start([*args, "--db", str(db)], tmp_path, plugins=HOSTILE,
                     env={"ROBENCH_TEST_SLEEP": 0.4})
        time.sleep(rng.uniform(1.5, 5.0))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert not db.exists() or integrity(db) == "ok", f"attempt {attempt}"
    done = run([*args, "--db", str(db)], tmp_path, plugins=HOSTILE,
               env={"ROBENCH_TEST_SLEEP": 0})
    assert done.returncode == 0, done.stderr
    assert rows(db, "SELECT key, accuracy FROM trials ORDER BY key") == expected
    assert rows(db, "SELECT key, value FROM scores ORDER BY key") == expected_scores
    statuses = [s for (s,) in rows(db, "SELECT status FROM runs ORDER BY id")]
    assert statuses[-1] == "ok" and "running" not in statuses
    assert integrity(db) == "ok"
