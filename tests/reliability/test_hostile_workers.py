"""Workers die with their driver whatever they run, and time limits hold in every executor
(issue 30, points 3 and 5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.reliability.cli import (HOSTILE, ROOT, children, kill_driver, rows, run, start,
                                   wait_for)

GIL = ["run", "-d", "tiny", "-m", "holds-gil", "-c", "kmeans", "--metric", "rho", "-k", "2",
       "-r", "1"]


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out.extend(kids)
        todo.extend(kids)
    return out


@pytest.mark.parametrize("executor", ["process", "dask"])
def test_workers_die_with_a_driver_killed_during_a_gil_holding_trial(tmp_path, executor):
    if executor == "dask":
        pytest.importorskip("distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    driver = start([*GIL, "--executor", executor, "-j", "2", "--db", str(tmp_path / "g.db")],
                   tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_MARKS": marks})
    spawned = []
    try:
        wait_for(lambda: len(os.listdir(marks)) >= 1, 120, "a trial holding the GIL")
        time.sleep(1.0)  # past any poll of a parent-watching thread, were one able to run
        spawned = _descendants(driver.pid)
        busy = [int(m.split("-")[1]) for m in os.listdir(marks)]
        assert set(busy) <= set(spawned), (busy, spawned)
    finally:
        # before: the watching thread never ran while fit held the GIL; workers and the
        # resource tracker lived on
        assert kill_driver(driver, spawned, 20), f"processes {spawned} outlived their driver"


def test_a_trial_holding_the_gil_past_its_limit_ends_its_worker():
    # one C call that never returns to Python and holds the GIL: neither SIGALRM's handler
    # nor a thread can run; the kernel timer ends the process
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from robench.process import guard
        guard.HARD_LIMIT_GRACE[0] = 0.5
        with guard.time_limit(0.5):
            sum(range(10**15))
        sys.exit(5)
    """)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert time.perf_counter() - t0 < 30


def test_a_trial_that_defeats_the_local_time_limit_is_still_failed_and_warned(tmp_path):
    db = tmp_path / "d.db"
    done = run(["run", "-d", "tiny", "-m", "defiant", "-c", "kmeans", "--metric", "rho", "-k",
                "2", "-r", "1", "--executor", "local", "--trial-timeout", "1", "--db", str(db)],
               tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": 2})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "warning: --executor local" in done.stderr
    # before: ran past --trial-timeout and was stored ok
    assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("failed", 3)]
    (error,) = rows(db, "SELECT DISTINCT error FROM trials")[0]
    assert error.startswith("TrialTimeout: trial ran") and "did not stop" in error


def test_run_help_says_which_executors_can_stop_a_hostile_trial(tmp_path):
    done = run(["run", "--help"], tmp_path)
    text = " ".join(done.stdout.split())
    assert "only the process and dask executors" in text.lower()


def test_the_dask_executor_has_a_time_limit(tmp_path):
    pytest.importorskip("distributed")
    db = tmp_path / "k.db"
    done = run(["run", "-d", "tiny", "-m", "hang", "-m", "centroid", "-c", "kmeans", "--metric",
                "rho", "-k", "2", "-r", "1", "--executor", "dask", "-j", "2",
                "--trial-timeout", "1", "--db", str(db)], tmp_path, plugins=HOSTILE, timeout=240)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    # before: no limit reached a Dask worker; the run hung
    assert rows(db, "SELECT model, status, COUNT(*) FROM trials GROUP BY 1, 2") == [
        ("centroid", "ok", 3), ("hang", "failed", 3)]
    assert "TrialTimeout: trial ran past the time limit of 1 s" in done.stderr
