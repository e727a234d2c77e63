"""Ctrl-C exits 130 wherever it comes, leaving a consistent database (issue 16, defect 11)."""

from __future__ import annotations

import signal
import time

from click.testing import CliRunner

from robench.cli import cli
from tests.reliability.cli import HOSTILE, integrity, rows, start


def test_ctrl_c_while_planning_exits_130(tiny_registry, tmp_path, monkeypatch):
    from robench.run import prepare, runner
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # robench run plans through robench.run.prepare, which holds its own name for plan_run
    # once imported (by an earlier test): both names are patched
    monkeypatch.setattr(runner, "plan_run", interrupted)
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
        if db.exists() and rows(db, "SELECT COUNT(*) FROM trials")[0][0] >= 3:
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
