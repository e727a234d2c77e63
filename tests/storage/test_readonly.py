"""Tests for the read-only query interface (``robench query``)."""

import hashlib
import sqlite3

import pytest

from tests.helpers import add_runs

from robench.storage.readonly import ReadOnlyQueryError
from tests.helpers import query_readonly
from tests.helpers import save_scores
from robench.storage.store import Store
from tests.storage.test_store import DEFINITIONS, rho_scores, trial_row


def file_sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def row_counts(path):
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


@pytest.fixture
def filled_db(tmp_path):
    path = tmp_path / "robench.db"
    with Store(path) as store:
        add_runs(store, 1)
        store.save_trial(trial_row("t1"))
        store.save_trial(trial_row("t2", repeat=1))
        save_scores(store, rho_scores(), 1, DEFINITIONS)
    return path


def test_query_readonly_select(filled_db):
    columns, rows = query_readonly(
        filled_db, "SELECT key, repeat FROM trials WHERE repeat >= ? ORDER BY key", (0,)
    )
    assert columns == ["key", "repeat"]
    assert rows == [("t1", 0), ("t2", 1)]
    columns, rows = query_readonly(
        filled_db, "WITH r AS (SELECT value FROM scores WHERE score = 'rho') SELECT * FROM r"
    )
    assert columns == ["value"] and len(rows) == 1
    columns, _ = query_readonly(filled_db, "PRAGMA table_info(trials)")
    assert "name" in columns


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("INSERT INTO trials (key) VALUES ('evil')", "INSERT"),
        ("UPDATE trials SET accuracy = 0", "UPDATE"),
        ("DELETE FROM trials", "DELETE"),
        ("DROP TABLE trials", "DROP"),
        ("CREATE TABLE evil (x)", "CREATE"),
        ("WITH doomed AS (SELECT key FROM trials) DELETE FROM trials "
         "WHERE key IN (SELECT key FROM doomed)", "DELETE"),
        ("  /* sneaky */ -- comment\n delete from scores", "DELETE"),
        ("REPLACE INTO trials (key) VALUES ('t1')", "REPLACE"),
        ("ALTER TABLE trials ADD COLUMN evil TEXT", "ALTER"),
        ("ATTACH DATABASE 'other.db' AS other", "ATTACH"),
        ("VACUUM", "VACUUM"),
        ("PRAGMA journal_mode = delete", "PRAGMA"),
        ("PRAGMA query_only = OFF", "PRAGMA"),
        ("PRAGMA wal_checkpoint", "PRAGMA"),
        ("CREATE TEMP TABLE scratch (x)", "CREATE"),
    ],
)
def test_query_readonly_refuses_writes_and_leaves_db_unchanged(filled_db, sql, kind):
    before_hash, before_counts = file_sha256(filled_db), row_counts(filled_db)
    with pytest.raises(ReadOnlyQueryError, match="read-only") as info:
        query_readonly(filled_db, sql)
    assert kind in str(info.value)
    assert file_sha256(filled_db) == before_hash
    assert row_counts(filled_db) == before_counts


def test_query_readonly_vacuum_into_creates_no_file(filled_db, tmp_path):
    target = tmp_path / "copy.db"
    with pytest.raises(ReadOnlyQueryError, match="VACUUM"):
        query_readonly(filled_db, f"VACUUM INTO '{target}'")
    assert not target.exists()


def test_query_readonly_second_statement_never_runs(filled_db):
    before = row_counts(filled_db)
    with pytest.raises((ValueError, ReadOnlyQueryError)):
        query_readonly(filled_db, "SELECT 1; DELETE FROM trials")
    assert row_counts(filled_db) == before


def test_query_readonly_missing_db(tmp_path):
    missing = tmp_path / "nope.db"
    with pytest.raises(FileNotFoundError, match="robench run") as info:
        query_readonly(missing, "SELECT 1")
    assert str(missing) in str(info.value)
    assert not missing.exists()


def test_query_readonly_syntax_error_is_value_error(filled_db):
    with pytest.raises(ValueError, match="syntax error"):
        query_readonly(filled_db, "SELEC * FROM trials")
    with pytest.raises(ValueError, match="no such table"):
        query_readonly(filled_db, "SELECT * FROM nope")


def test_read_commands_leave_no_file_beside_the_database(filled_db):
    """results, query, diff, metadata and leaderboard leave the folder as they found it: no
    -shm or -wal file (a plain mode=ro reader of a WAL database creates both and cannot
    remove them) and the same bytes; the control, a plain mode=ro read, leaves both."""
    from click.testing import CliRunner

    from robench.cli import cli

    folder = filled_db.parent
    with open(filled_db, "rb") as fh:
        assert fh.read(20)[18:20] == b"\x02\x02"  # a WAL database (header bytes 18 and 19)
    before, digest = sorted(p.name for p in folder.iterdir()), file_sha256(filled_db)
    assert before == ["robench.db"]
    db = str(filled_db)
    for args in (["results", "--db", db], ["results", "--format", "json", "--db", db],
                 ["query", "select count(*) from trials", "--db", db],
                 ["diff", db, db], ["metadata", "--db", db],
                 ["leaderboard", "--db", db, "--out", str(folder.parent / "site")]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, (args, res.output)
        assert sorted(p.name for p in folder.iterdir()) == before, args
    assert file_sha256(filled_db) == digest
    plain = sqlite3.connect(f"{filled_db.resolve().as_uri()}?mode=ro", uri=True)
    plain.execute("SELECT count(*) FROM trials").fetchone()
    plain.close()
    assert {"robench.db-shm", "robench.db-wal"} <= {p.name for p in folder.iterdir()}


def test_a_read_while_a_run_holds_the_database_sees_its_committed_rows(filled_db):
    """With a writer's -wal beside the file the read goes through it (not immutable): a row
    committed to the -wal but not yet to the file is seen."""
    from robench.storage.readonly import readonly_uri

    with Store(filled_db) as store:
        store.save_trial(trial_row("t3", repeat=2))
        assert (filled_db.parent / "robench.db-wal").exists()
        assert "immutable" not in readonly_uri(filled_db)
        _, rows = query_readonly(filled_db, "SELECT count(*) FROM trials")
        assert rows == [(3,)]
    assert "immutable=1" in readonly_uri(filled_db)  # closed: no -wal, no -shm
