"""What a plugin raises or returns is contained: BaseExceptions, bad predictions, duplicate
names, failing imports (issue 16, defects 7-9)."""

from __future__ import annotations

import pytest

from robench.plugins import make_registry
from robench.runner import execute
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
