"""The bad-input table: names, values, files, databases and SQL a hostile user might type.

Every case exits 2 with exactly one 'Error:' line and no traceback, and leaves the results
database byte for byte as it was (issue 16, "a suite that keeps it so").
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from tests.reliability.cli import HOSTILE

RUN = ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans", "--metric", "rho", "-k", "2",
       "-r", "1", "--executor", "local"]

# (id, argv with {db} {bad} {trunc} {foreign} {file} {dir} {missing} placeholders, message part)
CASES = [
    # -- names
    ("unknown-dataset", ["run", "-d", "nosuch", "--db", "{db}"], "unknown dataset 'nosuch'"),
    ("unknown-model", ["run", "-d", "tiny", "-m", "nosuch", "--db", "{db}"], "unknown model"),
    ("unknown-clusterer", ["run", "-d", "tiny", "-c", "kmeanz", "--db", "{db}"],
     "Did you mean 'kmeans'?"),
    ("unknown-metric", ["run", "--metric", "rhoo", "--db", "{db}"], "unknown metric 'rhoo'"),
    ("unknown-executor", [*RUN, "--executor", "nosuch", "--db", "{db}"], "unknown executor"),
    ("unknown-profile", [*RUN, "--profile", "fast", "--db", "{db}"], "'fast' is not one of"),
    ("empty-dataset-name", ["run", "-d", "", "--db", "{db}"], "unknown dataset ''"),
    ("upper-case-name", ["run", "-d", "TINY", "--db", "{db}"], "unknown dataset 'TINY'"),
    ("sql-in-a-name", ["run", "-d", "tiny'; drop table runs;--", "--db", "{db}"],
     "unknown dataset"),
    ("nothing-to-run", ["run", "--db", "{db}"], "say what to run"),
    ("scheduler-without-dask", [*RUN, "--scheduler", "tcp://h:1", "--db", "{db}"],
     "--scheduler goes with --executor dask"),
    ("unknown-list-kind", ["list", "gizmos"], "'gizmos' is not one of"),
    ("unknown-knob-section", ["knobs", "trian"], "Did you mean 'train'?"),
    ("unknown-command", ["rnu"], "No such command 'rnu'"),
    ("unknown-option", ["run", "--fast"], "No such option '--fast'"),
    ("only-broken-data", ["run", "-d", "nan-data", "-m", "centroid", "-c", "kmeans",
                          "--metric", "rho", "--db", "{db}"], "X contains NaN"),
    ("model-not-for-data", ["run", "-d", "tiny", "-m", "cnn-1", "--metric", "rho", "-c",
                            "kmeans", "--db", "{db}"], "needs images"),
    # -- values
    ("k-too-large", [*RUN, "-k", "1000", "--db", "{db}"], "use a smaller --sources/-k"),
    ("k-one", [*RUN, "-k", "1", "--db", "{db}"], "1 is not in the range 2<=x<=1000"),
    ("k-word", [*RUN, "-k", "many", "--db", "{db}"], "'many' is not a valid integer"),
    ("repeats-zero", [*RUN, "-r", "0", "--db", "{db}"], "0 is not in the range 1<=x<=10000"),
    ("repeats-negative", [*RUN, "-r", "-1", "--db", "{db}"], "not in the range 1<=x<=10000"),
    ("repeats-float", [*RUN, "-r", "1.5", "--db", "{db}"], "'1.5' is not a valid integer"),
    ("seed-negative", [*RUN, "--seed", "-5", "--db", "{db}"], "-5 is not in the range"),
    ("seed-2**70", [*RUN, "--seed", str(2**70), "--db", "{db}"], "is not in the range"),
    ("seed-word", [*RUN, "--seed", "abc", "--db", "{db}"], "'abc' is not a valid integer"),
    ("jobs-zero", [*RUN, "-j", "0", "--db", "{db}"], "0 is not in the range 1<=x<=1024"),
    ("lr-word", [*RUN, "--set", "train.lr=abc", "--db", "{db}"], 'value "abc" is not a number'),
    ("lr-negative", [*RUN, "--set", "train.lr=-1", "--db", "{db}"], "below the minimum"),
    ("lr-nan", [*RUN, "--set", "train.lr=NaN", "--db", "{db}"], "is not finite"),
    ("lr-infinite", [*RUN, "--set", "train.lr=Infinity", "--db", "{db}"], "is not finite"),
    ("lr-huge", [*RUN, "--set", "train.lr=1e300", "--db", "{db}"], "above the maximum"),
    ("batch-size-zero", [*RUN, "--set", "train.batch_size=0", "--db", "{db}"],
     "below the minimum 1"),
    ("batch-size-float", [*RUN, "--set", "train.batch_size=1.5", "--db", "{db}"],
     "is not an integer"),
    ("batch-size-bool", [*RUN, "--set", "train.batch_size=true", "--db", "{db}"],
     "is not an integer"),
    ("max-epochs-negative", [*RUN, "--set", "train.max_epochs=-3", "--db", "{db}"],
     "below the minimum 1"),
    ("max-epochs-list", [*RUN, "--set", "train.max_epochs=[1,2]", "--db", "{db}"],
     "is not an integer"),
    ("patience-null", [*RUN, "--set", "train.patience=null", "--db", "{db}"],
     "null is not allowed"),
    ("weight-decay-negative", [*RUN, "--set", "train.weight_decay=-1", "--db", "{db}"],
     "below the minimum"),
    ("mc-samples-zero", [*RUN, "--set", "train.mc_samples=0", "--db", "{db}"],
     "below the minimum"),
    ("unknown-knob", [*RUN, "--set", "train.lrate=1", "--db", "{db}"], "unknown train knob 'lrate'"),
    ("unknown-section", [*RUN, "--set", "trian.lr=1", "--db", "{db}"], "unknown section"),
    ("set-without-value", [*RUN, "--set", "train.lr", "--db", "{db}"],
     "--set expects SECTION.KEY=VALUE"),
    ("set-without-key", [*RUN, "--set", "=1", "--db", "{db}"], "--set expects"),
    ("trial-timeout-negative", [*RUN, "--trial-timeout", "-1", "--db", "{db}"],
     "is not in the range"),
    ("trial-timeout-word", [*RUN, "--trial-timeout", "soon", "--db", "{db}"],
     "'soon' is not a valid float"),
    ("trial-timeout-nan", [*RUN, "--trial-timeout", "nan", "--db", "{db}"],
     "--trial-timeout"),
    ("format-xml", ["results", "--format", "xml", "--db", "{db}"], "'xml' is not one of"),
    # -- values without bounds before issue 30
    ("repeats-2**63", [*RUN, "-r", str(2**63), "--db", "{db}"], "not in the range 1<=x<=10000"),
    ("sources-huge", [*RUN, "-k", str(10**12), "--db", "{db}"], "not in the range 2<=x<=1000"),
    ("set-3000-deep", [*RUN, "--set", "train.max_epochs=" + "[" * 3000 + "]" * 3000, "--db",
                       "{db}"], "deeper than 8 levels"),
    ("set-list-3000-deep", [*RUN, "--set", "adequacy.sizes=" + "[" * 3000 + "]" * 3000,
                            "--db", "{db}"], "deeper than 8 levels"),
    ("batch-size-10**30", [*RUN, "--set", f"train.batch_size={10**30}", "--db", "{db}"],
     "above the maximum"),
    ("max-epochs-10**30", [*RUN, "--set", f"train.max_epochs={10**30}", "--db", "{db}"],
     "above the maximum 100000"),
    ("weight-decay-10**400", [*RUN, "--set", f"train.weight_decay={10**400}", "--db", "{db}"],
     "above the maximum"),
    ("adequacy-sizes-empty", [*RUN, "--set", "adequacy.sizes=[]", "--db", "{db}"],
     "shorter than 1"),
    ("adequacy-sizes-long", [*RUN, "--set", "adequacy.sizes=[" + ",".join(["5"] * 1001) + "]",
                             "--db", "{db}"], "longer than 1000"),
    ("precision-nan", [*RUN, "--until", "decided", "--precision", "nan", "--db", "{db}"],
     "is not a finite number"),
    ("decided-without-rho", ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans", "--metric",
                             "adequacy", "-k", "2", "-r", "6", "--executor", "local",
                             "--until", "decided", "--db", "{db}"], "declares a paired comparison"),
    ("query-timeout-nan", ["query", "select 1", "--timeout", "nan", "--db", "{db}"],
     "is not a finite number"),
    ("query-timeout-inf", ["query", "select 1", "--timeout", "inf", "--db", "{db}"],
     "is not in the range"),
    ("query-timeout-zero", ["query", "select 1", "--timeout", "0", "--db", "{db}"],
     "is not in the range"),
    ("query-timeout-negative", ["query", "select 1", "--timeout", "-1", "--db", "{db}"],
     "is not in the range"),
    # -- files
    ("db-is-a-directory", [*RUN, "--db", "{dir}"], "is a directory"),
    ("db-under-a-file", [*RUN, "--db", "{file}/x.db"], "is a file, not a folder"),
    ("cache-dir-is-a-file", [*RUN, "--cache-dir", "{file}", "--db", "{db}"],
     "is a file"),
    ("results-missing-db", ["results", "--db", "{missing}"], "no results database"),
    ("leaderboard-missing-db", ["leaderboard", "--db", "{missing}"], "no results database"),
    ("query-missing-db", ["query", "select 1", "--db", "{missing}"], "no results database"),
    ("leaderboard-out-under-a-file", ["leaderboard", "--db", "{db}", "--out", "{file}/site"],
     "Not a directory"),
    ("leaderboard-out-is-a-file", ["leaderboard", "--db", "{db}", "--out", "{file}"],
     "is a file"),
    # -- databases
    ("run-on-random-bytes", [*RUN, "--db", "{bad}"], "{bad}"),
    ("results-on-random-bytes", ["results", "--db", "{bad}"], "{bad}"),
    ("query-on-random-bytes", ["query", "select * from runs", "--db", "{bad}"], "{bad}"),
    ("leaderboard-on-random-bytes", ["leaderboard", "--db", "{bad}", "--out", "{dir}/s"],
     "{bad}"),
    ("run-on-truncated-db", [*RUN, "--db", "{trunc}"], "{trunc}"),
    ("results-on-truncated-db", ["results", "--db", "{trunc}"], "{trunc}"),
    ("run-on-another-apps-db", [*RUN, "--db", "{foreign}"], "{foreign}"),
    ("results-on-another-apps-db", ["results", "--db", "{foreign}"], "{foreign}"),
    ("leaderboard-on-another-apps-db", ["leaderboard", "--db", "{foreign}", "--out",
                                        "{dir}/s"], "{foreign}"),
    # -- SQL
    ("sql-drop", ["query", "drop table runs", "--db", "{db}"], "read-only"),
    ("sql-insert", ["query", "insert into runs (status) values ('x')", "--db", "{db}"],
     "read-only"),
    ("sql-update", ["query", "update runs set status = 'ok'", "--db", "{db}"], "read-only"),
    ("sql-delete", ["query", "delete from trials", "--db", "{db}"], "read-only"),
    ("sql-create", ["query", "create table x (a)", "--db", "{db}"], "read-only"),
    ("sql-attach", ["query", "attach '{dir}/x.db' as x", "--db", "{db}"], "read-only"),
    ("sql-vacuum-into", ["query", "vacuum into '{dir}/copy.db'", "--db", "{db}"], "read-only"),
    ("sql-pragma-write", ["query", "pragma journal_mode = delete", "--db", "{db}"],
     "read-only"),
    ("sql-two-statements", ["query", "select 1; drop table runs", "--db", "{db}"], ""),
    ("sql-comment-hidden-write", ["query", "/* hi */ delete from runs", "--db", "{db}"],
     "read-only"),
    ("sql-cte-write", ["query", "with x as (select 1) delete from runs", "--db", "{db}"],
     "read-only"),
    ("sql-unknown-table", ["query", "select * from nosuch", "--db", "{db}"],
     "no such table: nosuch"),
    ("sql-syntax", ["query", "selec 1", "--db", "{db}"], "SQL error"),
    ("sql-load-extension", ["query", "select load_extension('x')", "--db", "{db}"], ""),
]


def _digest(path):
    h = hashlib.sha256()
    for suffix in ("", "-wal", "-shm"):
        p = path.parent / (path.name + suffix)
        # an empty WAL file and none hold the same data: SQLite creates and removes it
        h.update((p.read_bytes() if p.exists() and suffix != "-shm" else b"") or b"-")
    return h.hexdigest()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A good results database and the bad files the table points at."""
    from robench.plugins import make_registry, set_registry

    root = tmp_path_factory.mktemp("bad-input")
    set_registry(make_registry(modules=list(HOSTILE), load_entrypoints=False))
    good = root / "good.db"
    done = CliRunner().invoke(cli, [*RUN, "--db", str(good)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    conn = sqlite3.connect(good)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    bad = root / "random.db"
    bad.write_bytes(bytes(range(256)) * 64)
    trunc = root / "truncated.db"
    trunc.write_bytes(good.read_bytes()[:3000])
    foreign = root / "other-app.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE trials (id INTEGER PRIMARY KEY, patient TEXT)")
    conn.execute("INSERT INTO trials (patient) VALUES ('x')")
    conn.commit()
    conn.close()
    plain = root / "a-file.txt"
    plain.write_text("not a directory\n")
    folder = root / "a-dir"
    folder.mkdir()
    yield {"db": good, "bad": bad, "trunc": trunc, "foreign": foreign, "file": plain,
           "dir": folder, "missing": root / "missing.db"}
    set_registry(None)


@pytest.mark.parametrize("case, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input(files, case, argv, message):
    names = {k: str(v) for k, v in files.items()}
    argv = [a.format(**names) for a in argv]
    message = message.format(**names)
    watched = [files[k] for k in ("db", "bad", "trunc", "foreign")]
    before = [_digest(p) for p in watched]
    shutil.rmtree(files["dir"] / "s", ignore_errors=True)
    res = CliRunner().invoke(cli, argv)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"raw traceback: {res.exception!r}") from res.exception
    assert res.exit_code == 2, (res.exit_code, res.output, res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1, res.stderr
    assert "Traceback" not in res.stderr + res.output
    assert message in errors[0], errors[0]
    assert [_digest(p) for p in watched] == before, "a file changed"
    assert not (files["dir"] / "copy.db").exists() and not (files["dir"] / "x.db").exists()


def test_the_table_is_big_enough():
    assert len(CASES) >= 75
