"""A --db that SQLite refuses ends in one line naming the problem and what to do (exit 2).

The import hoist once dropped the line that set ``reason`` in ``friendly_errors``: every SQLite
error on a --db became a NameError traceback. Each case below ran into it.
"""

import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.cli.common import friendly_errors

TINY = ["-d", "tiny", "-m", "centroid", "-c", "kmeans", "-k", "3", "-r", "1",
        "--executor", "local", "--metric", "rho"]


def _one_error_line(res):
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, NameError)
    assert "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, res.output
    return errors[0]


@pytest.mark.parametrize("db", ["/dev/null", ":memory:", "file:x.db?mode=memory"])
@pytest.mark.parametrize("command", [["run", *TINY], ["results"], ["query", "select 1"]])
def test_a_db_that_is_no_file_is_refused_in_one_line(tiny_registry, tmp_path, monkeypatch,
                                                       db, command):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, [*command, "--db", db])
    line = _one_error_line(res)
    assert "--db" in line and "file" in line


def _damage(path):
    """Overwrite every page after the first two with 0xff bytes (schema readable, data not)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for start in range(2 * page, len(data), page):
        data[start:start + page] = b"\xff" * min(page, len(data) - start)
    path.write_bytes(bytes(data))


def test_a_damaged_results_database_is_refused_in_one_line(tiny_registry, tmp_path):
    db = tmp_path / "r.db"
    assert CliRunner().invoke(cli, ["run", *TINY, "--db", str(db)]).exit_code == 0
    _damage(db)
    before = db.read_bytes()
    for command in (["run", *TINY], ["results"], ["query", "select * from trials"]):
        res = CliRunner().invoke(cli, [*command, "--db", str(db)])
        line = _one_error_line(res)
        assert str(db) in line or "r.db" in line
    assert db.read_bytes() == before  # nothing stored was overwritten


def test_an_sqlite_error_on_a_writable_db_names_the_file_and_the_way_out(tmp_path):
    @friendly_errors
    def command(db_path):
        raise sqlite3.DatabaseError("database disk image is malformed")

    with pytest.raises(SystemExit) as exit_:
        command(db_path=str(tmp_path / "r.db"))
    assert exit_.value.code == 2


def test_an_sqlite_error_on_an_unwritable_db_says_so(tmp_path, monkeypatch, capsys):
    from robench.cli import common

    monkeypatch.setattr(common, "unwritable", lambda path: "it is on a read-only file system")

    @friendly_errors
    def command(db_path):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    with pytest.raises(SystemExit) as exit_:
        command(db_path=str(tmp_path / "r.db"))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "cannot be written: it is on a read-only file system" in err
