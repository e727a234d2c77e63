"""Every value bounded and refused before anything is touched (issue 30, point 8): the cache
folder from the environment, query time limits that hold even inside one long step of SQL, a
JSON stream that stops still valid, and no file switched to WAL before the input is valid."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from click.testing import CliRunner

from robench.cli import cli
from tests.reliability.cli import rows, run

RUN = ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans", "--metric", "rho", "-k", "2",
       "-r", "1", "--executor", "local"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    from robench.plugins import make_registry, set_registry

    path = tmp_path_factory.mktemp("values") / "r.db"
    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    done = CliRunner().invoke(cli, [*RUN, "--db", str(path)])
    assert done.exit_code == 0, done.output
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("UPDATE scores SET details = ? WHERE rowid = (SELECT MIN(rowid) FROM scores)",
                 ["[" * 100_000 + "]" * 100_000])
    conn.commit()
    conn.close()
    yield path
    set_registry(None)


@pytest.mark.parametrize("where", ["a file", "under /proc"])
def test_a_cache_folder_from_the_environment_is_checked_like_the_option(tmp_path, db, where):
    bad = tmp_path / "a-file"
    bad.write_text("x")
    cache = str(bad) if where == "a file" else "/proc/no-such-process/cache"
    target = tmp_path / "new.db"
    result = CliRunner().invoke(cli, [*RUN, "--db", str(target)],
                                env={"ROBENCH_CACHE_DIR": cache})
    # before: accepted; every trial failed and was stored
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1 and "$ROBENCH_CACHE_DIR" in errors[0], result.stderr
    assert not target.exists()


def test_a_refused_run_does_not_switch_the_journal_mode(tmp_path, db):
    path = tmp_path / "delete.db"
    src, dst = sqlite3.connect(db), sqlite3.connect(path)
    src.backup(dst)
    src.close()
    dst.execute("PRAGMA journal_mode = DELETE")
    dst.close()
    assert rows(path, "PRAGMA journal_mode") == [("delete",)]
    before = path.read_bytes()
    for bad in (["--until", "decided", "--precision", "nan"],
                ["--set", "adequacy.sizes=[]"],
                ["--set", "train.max_epochs=[[[[[[[[[[1]]]]]]]]]]"]):
        result = CliRunner().invoke(cli, [*RUN, *bad, "--db", str(path)])
        assert result.exit_code == 2, (bad, result.output)
        # before: the file was switched to WAL, then the value refused
        assert path.read_bytes() == before, bad
        assert rows(path, "PRAGMA journal_mode") == [("delete",)]


def test_a_long_single_step_of_sql_is_stopped_at_the_limit(tmp_path, db):
    t0 = time.monotonic()
    done = run(["query", "SELECT length(printf('%.*c', 900000000, 'x'))", "--timeout", "1",
                "--db", str(db)], tmp_path)
    took = time.monotonic() - t0
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("Error") == 1 and "Traceback" not in done.stderr
    # before: one step ran 4.5 s under --timeout 1; now 1 s + at most 1 s grace (+ start-up)
    assert took < 1 + 1 + 5, took


def test_a_stopped_json_stream_is_still_valid_and_says_so(tmp_path, db):
    done = run(["query", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                "SELECT x FROM c", "--timeout", "1", "--format", "json", "--db", str(db)],
               tmp_path)
    assert done.returncode == 2
    out = json.loads(done.stdout)  # before: invalid JSON, cut mid-stream
    assert out[-1]["robench_error"].startswith("the query was stopped after its time limit")
    assert all("x" in r for r in out[:-1]) and len(out) > 1


def test_json_of_a_cell_nested_100000_deep_is_its_text(tmp_path, db):
    done = run(["query", "SELECT details FROM scores", "--format", "json", "--db", str(db)],
               tmp_path)
    # before: RecursionError traceback
    assert done.returncode == 0, done.stderr
    cells = [r["details"] for r in json.loads(done.stdout)]
    assert "[" * 100_000 + "]" * 100_000 in cells
