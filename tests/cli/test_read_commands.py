"""Read commands never write: results, query and leaderboard open the file read-only."""

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from robench.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD_MAIN = FIXTURES / "main_0a81169.db"  # schema 0, WAL, written by main at 0a81169


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def md5(path):
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def _read_everything(db, tmp_path):
    for args in (["results"], ["results", "--format", "json"], ["results", "--metric", "rho"],
                 ["query", "select count(*) from scores"],
                 ["leaderboard", "--out", tmp_path / "site"]):
        res = run(*args, "--db", db)
        assert res.exit_code == 0, (args, res.output)


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_read_commands_leave_the_file_byte_identical(tmp_path, journal):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    if journal == "delete":
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.close()
    before = md5(db)
    _read_everything(db, tmp_path)
    assert md5(db) == before  # not migrated, not switched to WAL
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == journal
    conn.close()


def test_a_read_only_file_in_a_read_only_folder(tmp_path, monkeypatch):
    # tests run as root, which writes anywhere: the folder is made to look read-only
    import os

    import robench.storage.readonly

    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    db.chmod(0o444)
    real_access = os.access
    monkeypatch.setattr(robench.storage.readonly.os, "access",
                        lambda p, mode: False if Path(p) == folder else real_access(p, mode))
    assert robench.storage.readonly.readonly_uri(db).endswith("?mode=ro&immutable=1")
    before = md5(db)
    _read_everything(db, tmp_path)
    assert md5(db) == before
    assert sorted(p.name for p in folder.iterdir()) == ["r.db"]  # no -wal, no -shm


def test_a_file_that_is_not_a_database_is_exit_2(tmp_path):
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n" * 20)
    for args in (["results"], ["query", "select 1"], ["leaderboard", "--out", tmp_path / "s"]):
        res = run(*args, "--db", notes)
        assert res.exit_code == 2 and "is not an SQLite database" in res.output, args
        assert "Traceback" not in res.output
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    res = run("results", "--db", other)
    assert res.exit_code == 2 and "not a robench results database" in res.output


def test_query_stops_a_runaway_recursive_query(tmp_path):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    sql = "with recursive r(i) as (select 1 union all select i+1 from r) select count(*) from r"
    res = run("query", sql, "--timeout", "0.5", "--db", db)
    assert res.exit_code == 2
    assert "stopped after its time limit of 0.5 s" in res.output and "--timeout" in res.output
    ok = run("query", "select count(*) as n from scores", "--timeout", "0.5", "--db", db)
    assert ok.exit_code == 0 and "8" in ok.output


def test_query_streams_rows_until_the_time_limit(tmp_path):
    # An endless result: rows are written as they are fetched, then the limit stops it with
    # the same one-line error (a query that gathered everything first printed no row at all).
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    sql = "with recursive r(i) as (select 1 union all select i+1 from r) select i from r"
    res = run("query", sql, "--timeout", "0.5", "--format", "csv", "--db", db)
    assert res.exit_code == 2
    assert "stopped after its time limit of 0.5 s" in res.output
    lines = res.output.splitlines()
    assert lines[:4] == ["i", "1", "2", "3"]
    assert len(lines) > 1000  # several batches went out before the stop


def test_stream_readonly_yields_batches_and_closes(tmp_path):
    from robench.storage.readonly import stream_readonly
    from tests.helpers import query_readonly

    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    sql = ("with recursive r(i) as (select 1 union all select i+1 from r where i < 2500) "
           "select i from r")
    cols, batches = stream_readonly(db, sql, batch_size=1000)
    sizes = [len(b) for b in batches]
    assert cols == ["i"] and sizes == [1000, 1000, 500]
    assert query_readonly(db, sql)[1] == [(i,) for i in range(1, 2501)]
    # closed early, its connection is closed too (the generator's finally ran)
    closed = []
    import sqlite3 as _sqlite3

    real_connect = _sqlite3.connect

    class Conn:
        def __init__(self, *a, **k):
            self._c = real_connect(*a, **k)

        def __getattr__(self, name):
            return getattr(self._c, name)

        def close(self):
            closed.append(True)
            self._c.close()

    import robench.storage.readonly as ro

    ro.sqlite3.connect, saved = Conn, ro.sqlite3.connect
    try:
        cols, batches = stream_readonly(db, sql, batch_size=10)
        next(batches)
        assert not closed
        batches.close()
        assert closed
    finally:
        ro.sqlite3.connect = saved


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_query_formats_empty_and_many_rows(tmp_path, fmt):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    many = ("with recursive r(i) as (select 1 union all select i+1 from r where i < 2500) "
            "select i, 'x' || i as s from r")
    res = run("query", many, "--format", fmt, "--db", db)
    assert res.exit_code == 0, res.output
    if fmt == "json":
        rows = json.loads(res.output)
        assert len(rows) == 2500 and rows[-1] == {"i": 2500, "s": "x2500"}
    elif fmt == "csv":
        assert res.output.splitlines()[-1] == "2500,x2500"
    else:
        out = res.output.splitlines()
        assert out[0].split() == ["i", "s"] and out[-1].split() == ["2500", "x2500"]
        assert len(out) == 2502
    empty = run("query", "select 1 as i where 0", "--format", fmt, "--db", db)
    assert empty.exit_code == 0
    expected = {"json": [], "csv": "i", "table": "(no rows)"}[fmt]
    got = json.loads(empty.output) if fmt == "json" else empty.output.strip()
    assert got == expected


def test_query_json_decodes_json_columns(tmp_path):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    res = run("query", "select config, details from runs, scores limit 1", "--format", "json",
              "--db", db)
    (row,) = json.loads(res.output)
    assert row["config"]["repeats"] == 2 and isinstance(row["details"], dict)


def test_results_json_and_csv_carry_details_and_versions(tmp_path):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    rows = json.loads(run("results", "--format", "json", "--db", db).output)
    rho = next(r for r in rows if r["score"] == "rho" and r["model"] == "svm")
    assert rho["details"]["interval"]["method"] == "fieller"
    assert rho["versions"]["robench"] and "robench.builtin.models" in rho["versions"]["plugins"]
    assert rho["versions"]["components"]["model"]  # the model's version its trials used
    assert rho["run_id"] == 1 and rho["configuration"] == "legacy"
    csv = run("results", "--format", "csv", "--db", db).output.splitlines()
    assert csv[0].endswith("configuration,run_id,configuration_label,contributor,helper,details,versions,"
                          "verification,rank_interval,rank_best,rank_worst,rank_estimate,"
                          "unranked")


def test_results_refuses_an_unknown_filter_naming_the_closest(tmp_path):
    db = tmp_path / "r.db"
    shutil.copyfile(OLD_MAIN, db)
    res = run("results", "--metric", "rhoo", "--db", db)
    assert res.exit_code == 2
    assert "no stored score has metric 'rhoo'. Did you mean 'rho'? Known: rho" in res.output
    res = run("results", "--model", "nosuch", "--db", db)
    assert res.exit_code == 2 and "Known: mlp, svm" in res.output


def test_results_prints_the_headline_tables_by_default_and_every_score_on_request(tmp_path):
    """A one-data-set database of every family (tests/fixtures/docs.db, 257 scores): by
    default each metric's own report under its configuration, about a screen; the full dump
    behind --all-scores; the exports unchanged."""
    db = tmp_path / "docs.db"
    shutil.copyfile(FIXTURES / "docs.db", db)
    scores = sqlite3.connect(db).execute("select count(*) from scores").fetchone()[0]
    assert run("migrate", "--db", db).exit_code == 0  # the file's ranks, stored once
    res = run("results", "--db", db)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) <= 150 < scores
    assert lines[0] == "=== digits: 2 model(s), 6 metric(s) ==="  # the zoo's helper apart
    for metric, report in (("rho", "digits - sources by kmeans: ranked by rho"),
                           ("coverage", "digits - coverage (Mani et al.)"),
                           ("shifted-cv", "digits - shifted-cv, sub-domains by kmeans"),
                           ("adequacy", "digits / cnn-1 - sources by kmeans: dataset adequacy"),
                           ("lost-test", "digits - lost-test")):
        assert any(l.startswith(f"digits / {metric}: configuration ") for l in lines), metric
        assert any(l.startswith(report) for l in lines), report
    # purity-ratio's report (28 lines: the ranked table, then the validation tables) is longer
    # than 20 lines: shown by its headline table, pointing at the whole report
    assert any(l.startswith("digits / purity-ratio: configuration ") for l in lines)
    # without an interval its values are listed best first, with no rank (issue 38) and no
    # position either: nothing was tested
    at = lines.index("digits - purity-ratio: best first, not ranked")
    assert lines[at + 1].split() == ["rank", "#", "model", "score", "95%", "CI", "Model_ACC"]
    assert [l.split() for l in lines[at + 2:at + 4]] == [
        ["-", "-", "cnn-1", "0.696", "68.8"], ["-", "-", "mlp", "0.658", "79.1"]]
    assert lines[at + 4].startswith("  ranks: no interval")  # why nobody is ranked
    assert "  (the whole report: robench results -d digits --metric purity-ratio)" in \
        lines[at + 5:at + 9]
    # verification is said per model, not per data-set-level pseudo model
    assert "  digits / mlp: not verified" in lines and "  digits / : not verified" not in lines
    assert "  digits / zoo: not verified" not in lines
    assert not any(l.startswith("digits - purity-ratio (feature-space") for l in lines)
    whole = run("results", "--metric", "purity-ratio", "--db", db).output
    assert "digits - purity-ratio (feature-space" in whole and "validation" in whole
    # adequacy's report (25 lines, a table per model) has no headline: its first tables that
    # fit, then where the rest is
    assert "  (1 more table(s): robench results -d digits --metric adequacy)" in lines
    assert not any(l.startswith("digits / mlp - sources by kmeans") for l in lines)
    whole = run("results", "--metric", "adequacy", "--db", db).output
    assert "digits / mlp - sources by kmeans: dataset adequacy" in whole
    # the headline tables, in display order: rho's first
    assert [l for l in lines if l.startswith("digits / ")][0].startswith("digits / rho:")
    assert not any(l.startswith("dataset  model") for l in lines)  # no raw dump
    full = run("results", "--all-scores", "--db", db).output.splitlines()
    header = next(i for i, l in enumerate(full) if l.startswith("dataset  model"))
    from robench.storage.store import Store

    with Store(db, readonly=True) as store:
        helpers = {m for _, m in store.helper_models()}  # listed apart, not in the tables
    shown = sqlite3.connect(db).execute(
        f"select count(*) from scores where model not in ({','.join('?' * len(helpers))})",
        sorted(helpers)).fetchone()[0]
    dump = [l for l in full[header + 2:] if l.startswith("digits ")]
    assert len(dump) == shown and helpers  # one row per score
    assert len(json.loads(run("results", "--format", "json", "--db", db).output)) == scores


def test_exported_per_repeat_values_are_numbers(tmp_path):
    """details["per_repeat"] of every family holds numbers, in the JSON and the CSV export."""
    db = tmp_path / "docs.db"
    shutil.copyfile(FIXTURES / "docs.db", db)
    rows = json.loads(run("results", "--format", "json", "--db", db).output)
    csv_rows = run("results", "--format", "csv", "--db", db).output
    seen = 0
    for row in rows:
        per = (row["details"] or {}).get("per_repeat")
        if per is not None:
            assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in per
                       if v is not None), (row["metric"], row["score"], per)
            seen += 1
    assert seen >= 10 and '"per_repeat": [0.' in csv_rows.replace('""', '"')


def test_a_headline_table_states_its_own_ranking_rule_not_a_generic_one():
    """A section that ranks by tested pairs shows each row's rank interval and its rule,
    printed under the table; a section without one shows the order of the estimates only,
    labelled as such."""
    from types import SimpleNamespace

    from robench.cli.results import _headline_lines

    rows = [{"model": m, "value": v, "ci_low": v - 0.1, "ci_high": v + 0.1, "rank": k,
             "rank_interval": "1-2"} for k, (m, v) in enumerate((("a", 0.6), ("b", 0.5)), 1)]
    rule = ("rank intervals from all 1 pair: the paired difference over shared repeats, "
            "Holm-corrected (familywise 5%)")

    def registry(head):
        section = SimpleNamespace(headline=lambda _rows: head, columns=())
        return SimpleNamespace(get=lambda kind, name: SimpleNamespace(leaderboard=section))

    score_rows = [{"dataset": "d"}]
    paired = _headline_lines(registry({"label": "x", "rows": rows, "rule": rule}), "x",
                             score_rows)
    assert paired[0] == "\nd - x: sorted by the estimate"
    assert [l.split()[:3] for l in paired[2:4]] == [["1-2", "1", "a"], ["1-2", "2", "b"]]
    below = paired[paired.index(next(l for l in paired if l.startswith("  ranks: "))):]
    assert " ".join(" ".join(below).split()) == f"ranks: {rule}."
    assert all(len(line) <= 80 for line in paired)
    plain = [{k: v for k, v in r.items() if k != "rank_interval"} for r in rows]
    marginal = _headline_lines(registry({"label": "x", "rows": plain}), "x", score_rows)
    assert marginal[0] == ("\nd - x: sorted by the estimate (# is the order of the estimates, "
                           "no tested rank)")
    assert not any(l.startswith("  ranks: ") for l in marginal)


def test_query_into_a_closed_pipe_exits_quietly_as_unix_tools_do(tmp_path):
    """`robench query ... | head -1`: once head has its line robench stops, says nothing on
    stderr (no "Error: Broken pipe", no "Exception ignored") and exits 141 (128 + SIGPIPE,
    what a shell reports for a Unix tool ended by the pipe)."""
    import os
    import subprocess
    import sys

    from robench.storage.store import Store

    db = tmp_path / "r.db"
    Store(db).close()
    sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) "
           "SELECT x, printf('%040d', x) AS pad FROM c")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for fmt in ("table", "csv", "json"):
        proc = subprocess.Popen([sys.executable, "-m", "robench", "query", sql, "--db", str(db),
                                 "--format", fmt, "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout.readline()  # what head reads, then it goes away
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141, (fmt, err)
        assert err == "", (fmt, err)
