"""--trial-timeout ends a hung trial, records it as failed with the reason, and the run goes on
(issue 16, defect 3)."""

from __future__ import annotations

import signal
import time

import pytest

from robench.run.config import TRIAL_TIMEOUT, RunConfig
from tests.reliability.cli import HOSTILE, rows, run


def test_profiles_give_the_time_limit_and_it_is_in_no_trial_key(tiny_registry):
    from robench.run.runner import plan_run

    assert RunConfig([], [], [], [], profile="quick").trial_timeout == TRIAL_TIMEOUT["quick"] == 900
    assert RunConfig([], [], [], [], profile="paper").trial_timeout == 14400
    plans = [plan_run(RunConfig(["tiny"], ["centroid"], ["kmeans"], ["rho"], repeats=1, k=2,
                                trial_timeout=t).resolve(tiny_registry), tiny_registry)
             for t in (5, 900)]
    assert list(plans[0].specs) == list(plans[1].specs)
    with pytest.raises(ValueError, match="--trial-timeout"):
        RunConfig([], [], [], [], trial_timeout=-1)


@pytest.mark.parametrize("model", ["hang", "spin"])
def test_a_hung_trial_is_stopped_and_the_local_run_goes_on(store, model):
    from robench.plugins import make_registry
    from robench.run.runner import execute
    from tests.helpers import run_config

    reg = make_registry(modules=list(HOSTILE), load_entrypoints=False)
    cfg = run_config(["tiny"], [model, "centroid"], ["kmeans"], ["rho"], registry=reg,
                     repeats=1, k=2, trial_timeout=0.5)
    t0 = time.perf_counter()
    report = execute(cfg, reg, store)
    assert time.perf_counter() - t0 < 60
    assert len(report.failed) == 3 and {r["model"] for r in report.failed} == {model}
    assert all(r["error"].startswith("TrialTimeout: trial ran past the time limit of 0.5 s")
               for r in report.failed)
    ok = [t for t in store.trials() if t["status"] == "ok"]
    assert {t["model"] for t in ok} == {"centroid"} and len(ok) == 3


def test_a_hung_trial_in_a_worker_process_is_stopped(tmp_path):
    db = tmp_path / "t.db"
    t0 = time.perf_counter()
    done = run(["run", "-d", "tiny", "-m", "hang", "-m", "centroid", "-c", "kmeans",
                "--metric", "rho", "-k", "2", "-r", "1", "--executor", "process", "-j", "2",
                "--trial-timeout", "1", "--db", str(db)], tmp_path, plugins=HOSTILE,
               timeout=240)
    assert time.perf_counter() - t0 < 200
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "TrialTimeout: trial ran past the time limit of 1 s" in done.stderr
    assert rows(db, "SELECT model, status, COUNT(*) FROM trials GROUP BY 1, 2") == [
        ("centroid", "ok", 3), ("hang", "failed", 3)]
    assert rows(db, "SELECT status FROM runs") == [("failed",)]


def test_a_trial_the_alarm_cannot_reach_ends_its_worker(tmp_path):
    # a C call that never returns to Python (libc sleep with SIGALRM blocked, GIL released):
    # the alarm's Python handler never runs, the hard limit ends the process, which the
    # process executor records as a failed trial
    import subprocess
    import sys
    import textwrap

    from tests.reliability.cli import ROOT

    code = textwrap.dedent(f"""
        import ctypes, ctypes.util, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from robench.process import guard
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        guard.HARD_LIMIT_GRACE[0] = 0.5
        with guard.time_limit(0.5):
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
            libc.sleep(60)
        sys.exit(5)
    """)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], timeout=60)
    # ended by the kernel timer (SIGKILL); where none is available, by a thread (exit 71)
    assert done.returncode in (-signal.SIGKILL, 71)
    assert time.perf_counter() - t0 < 30
