"""Ctrl-C exits 130 wherever it comes, leaving a consistent database (issue 16, defect 11)."""

from __future__ import annotations

import signal
import time

from click.testing import CliRunner

from robench.cli import cli
from tests.reliability.cli import HOSTILE, integrity, rows, start, trials_stored


def test_ctrl_c_while_planning_exits_130(tiny_registry, tmp_path, monkeypatch):
    from robench.run import prepare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # planning happens in robench.run.prepare (the run's one preparation): patch it there
    monkeypatch.setattr(prepare, "plan_run", interrupted)
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans",
                                   "--metric", "rho", "--db", str(tmp_path / "i.db")])
    assert res.exit_code == 130, res.output
    assert "Aborted!" not in res.output + res.stderr
    assert not (tmp_path / "i.db").exists()


def test_ctrl_c_during_trials_exits_130_with_a_consistent_database(tmp_path):
    db = tmp_path / "i.db"
    proc = start(["run", "-d", "tiny", "-m", "centroid", "-m", "hang", "-c", "kmeans",
                  "--metric", "rho", "-k", "2", "-r", "1", "--executor", "local",
                  "--trial-timeout", "0", "--db", str(db)], tmp_path, plugins=HOSTILE)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if trials_stored(db) >= 3:
            break
        time.sleep(0.2)
    time.sleep(0.5)  # inside the hanging trial now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert rows(db, "SELECT status FROM runs") == [("interrupted",)]
    assert rows(db, "SELECT model, status FROM trials GROUP BY 1, 2") == [("centroid", "ok")]
    assert integrity(db) == "ok"


def test_a_second_ctrl_c_during_a_race_exits_quietly(tmp_path):
    """Ctrl-C twice, as a terminal sends it (to the whole process group), while a process
    worker runs a trial that never ends (issue 51): the driver ends its workers and exits at
    once, with no traceback. Before, it waited at exit for the trial in flight, and the
    second Ctrl-C printed a KeyboardInterrupt traceback from that wait. A shell reports 130
    both for exit status 130 and for a process that the second Ctrl-C ends by SIGINT in the
    last moments of its exit (-2 here)."""
    import os

    db = tmp_path / "i.db"
    proc = start(["run", "-d", "tiny", "-m", "centroid", "-m", "hang", "-c", "kmeans",
                  "--metric", "rho", "-k", "2", "-r", "6", "--until", "decided",
                  "--executor", "process", "-j", "2", "--trial-timeout", "0", "--db", str(db)],
                 tmp_path, plugins=HOSTILE, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            if trials_stored(db) >= 3:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # the hanging trial is in flight on a worker now
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the workers too, whatever happened
        except ProcessLookupError:
            pass
    assert proc.returncode in (130, -signal.SIGINT), err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert rows(db, "SELECT status FROM runs") == [("interrupted",)]
    assert integrity(db) == "ok"
