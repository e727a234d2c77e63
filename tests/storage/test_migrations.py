"""Schema versions: a database written by an older robench is migrated in place, once."""

import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.storage.migrations import APPLICATION_ID, CURRENT, SchemaError, migrate
from robench.storage.store import SCHEMA, Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD_MAIN = FIXTURES / "main_0a81169.db"  # see tests/run/test_configurations.py


def _rows(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def old_db(tmp_path):
    path = tmp_path / "old.db"
    shutil.copyfile(OLD_MAIN, path)
    return path


def test_migrate_command_brings_the_old_fixture_to_the_current_schema(old_db):
    definition = _rows(old_db, "SELECT DISTINCT definition FROM scores")
    assert len(definition) == 1 and len(definition[0][0]) > 200  # repeated on every row
    res = CliRunner().invoke(cli, ["migrate", "--db", str(old_db)])
    assert res.exit_code == 0, res.output
    assert f"schema version 0 -> {CURRENT}" in res.output
    assert _rows(old_db, "PRAGMA user_version") == [(CURRENT,)]
    assert _rows(old_db, "PRAGMA application_id") == [(APPLICATION_ID,)]
    assert _rows(old_db, "PRAGMA foreign_key_check") == []
    # each definition once, in metrics; scores point to it
    assert _rows(old_db, "SELECT name, version, definition FROM metrics") == [
        ("rho", "2", definition[0][0])]
    assert "definition" not in [c for _, c, *_ in _rows(old_db, "PRAGMA table_info(scores)")]
    assert _rows(old_db, "SELECT count(*) FROM scores WHERE metric_id IS NULL") == [(0,)]
    # human-readable columns first
    cols = [c for _, c, *_ in _rows(old_db, "PRAGMA table_info(scores)")]
    assert cols[:5] == ["dataset", "model", "clusterer", "metric", "score"]
    # the source-aware trials point to the clustering their partitions came from
    linked = _rows(old_db, "SELECT kind, count(clustering) FROM trials GROUP BY kind")
    assert dict(linked) == {"exclusive": 4, "inclusive": 4, "random": 0}
    again = CliRunner().invoke(cli, ["migrate", "--db", str(old_db)])
    assert "up to date" in again.output


def test_foreign_keys_are_declared_and_enforced(tmp_path):
    with Store(tmp_path / "r.db") as store:
        fks = {(t, f[3], f[2]) for t in ("trials", "scores", "score_groups", "clusterings")
               for f in store.db.execute(f"PRAGMA foreign_key_list({t})").fetchall()}
        assert {("trials", "run_id", "runs"), ("trials", "clustering", "clusterings"),
                ("scores", "run_id", "runs"), ("scores", "configuration", "configurations"),
                ("scores", "metric_id", "metrics"), ("score_groups", "run_id", "runs"),
                ("clusterings", "run_id", "runs")} <= fks
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            store.save_trial({"key": "t", "run_id": 99, "status": "ok", "dataset": "d"})


def test_views_rank_the_chosen_configuration(old_db):
    from robench.plugins import get_registry
    from robench.run.ranking import compute_ranks, refresh_ranks, table_rows

    with Store(old_db) as store:  # migrated; the ranks are stored when scores change
        assert _rows(old_db, "SELECT count(*) FROM leaderboard") == [(0,)]
        refresh_ranks(store, get_registry())
        expected = {(r["model"], r["rank"]) for r in compute_ranks(table_rows(store),
                                                                   get_registry())}
    rows = _rows(old_db, "SELECT dataset, metric, clusterer, rank, model, configuration_label "
                         "FROM leaderboard ORDER BY rank, model")
    assert {r[4] for r in rows} == {"svm", "mlp"}
    assert {(r[4], r[3]) for r in rows} == expected  # the ranks the site computes
    assert rows[0][5].startswith("legacy")
    summary = _rows(old_db, "SELECT model, kind, trials, ok FROM trial_summary "
                            "WHERE model = 'mlp' ORDER BY kind")
    assert summary == [("mlp", "exclusive", 2, 2), ("mlp", "inclusive", 2, 2),
                       ("mlp", "random", 2, 2)]
    assert _rows(old_db, "SELECT configuration, chosen FROM configuration_choice") == [
        ("legacy", 1)]


def test_a_run_continues_the_run_ids_of_a_migrated_file(old_db, tiny_registry):
    with Store(old_db) as store:
        assert store.start_run(command="x", seed=0, config={}, plugin_versions={}) == 2


def test_refuses_what_is_not_a_robench_database_and_a_newer_one(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE x (a)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="not a robench results database"):
        migrate(other, SCHEMA)
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a database at all" * 50)
    with pytest.raises(SchemaError, match="not an SQLite database"):
        migrate(text, SCHEMA)
    newer = tmp_path / "newer.db"
    Store(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {CURRENT + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="newer than this robench"):
        migrate(newer, SCHEMA)
    res = CliRunner().invoke(cli, ["migrate", "--db", str(text)])
    assert res.exit_code == 2 and "not an SQLite database" in res.output
