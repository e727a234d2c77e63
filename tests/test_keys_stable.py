"""Trial keys and score fingerprints stay byte-identical across refactors.

``tests/fixtures/pre_open_core.db`` was written by robench before the open-core refactor, by
the commands listed in ``pre_open_core.json``. Rerunning them on a copy must train nothing
(every trial key is the same) and reuse every stored score group (every trial digest, score
digest and inputs fingerprint is the same), without touching the trials table's columns:
adding one would change every trial digest and so every fingerprint.
"""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _table(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def fixture_commands(monkeypatch, tmp_path):
    """Return (database copy, commands, reports of every run) with the fixture's plugins."""
    import robench.runner
    from robench.plugins import make_registry, set_registry

    about = json.loads((FIXTURES / "pre_open_core.json").read_text())
    db = tmp_path / "pre_open_core.db"
    shutil.copyfile(FIXTURES / "pre_open_core.db", db)
    # an empty cache: nothing may come from models or sources cached by other tests
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reports = []
    execute = robench.runner.execute

    def recording_execute(*args, **kwargs):
        report = execute(*args, **kwargs)
        reports.append(report)
        return report

    monkeypatch.setattr(robench.runner, "execute", recording_execute)
    set_registry(make_registry(modules=about["modules"], load_entrypoints=False))
    yield db, about["commands"], reports
    set_registry(None)


def test_the_pre_open_core_database_reruns_with_nothing_to_run_or_score(fixture_commands):
    from robench.cli import cli

    db, commands, reports = fixture_commands
    columns = _table(db, "PRAGMA table_info(trials)")
    stored = {t: _table(db, f"SELECT * FROM {t} ORDER BY key")
              for t in ("trials", "scores", "score_groups")}

    for argv in commands:
        result = CliRunner().invoke(cli, [*argv, "--db", str(db)])
        assert result.exit_code == 0, result.output

    assert len(reports) == len(commands)
    for argv, report in zip(commands, reports):
        assert report.n_ran == 0 and report.n_cached == report.n_planned > 0, argv
        assert not report.failed and not report.interrupted, argv
        assert report.n_aggregated == 0 and report.n_reused > 0, argv
    # every score group the database holds was reused by the command that wrote it
    by_command = {json.dumps(argv): report for argv, report in zip(commands, reports)}
    n_groups = _table(db, "SELECT count(*) FROM score_groups")[0][0]
    assert sum(r.n_reused for r in by_command.values()) == n_groups
    assert _table(db, "PRAGMA table_info(trials)") == columns
    for table, rows in stored.items():
        assert _table(db, f"SELECT * FROM {table} ORDER BY key") == rows, table
