"""Tests for the SQLite results store and the read-only query interface."""

import hashlib
import json
import sqlite3
import subprocess
import sys

import pytest

from robench.specs import Score
from robench.store import ReadOnlyQueryError, Store, query_readonly, score_key

DEFINITIONS = {"rho": ("1", "rho = E[AccX] / E[AccI] over R repeats")}


def trial_row(key, **overrides):
    """Return a complete trial row as the runner would hand it to the store."""
    row = {
        "key": key,
        "run_id": 1,
        "dataset": "digits",
        "model": "mlp",
        "clusterer": "kmeans",
        "protocol": "rho",
        "kind": "exclusive",
        "repeat": 0,
        "seed": 7,
        "params": {"k": 5, "test_fraction": 0.2},
        "spec": {"model": "mlp", "dataset": "digits"},
        "versions": {"mlp": "1", "digits": "1"},
        "status": "ok",
        "error": None,
        "accuracy": 0.9,
        "train_accuracy": 0.99,
        "val_accuracy": 0.95,
        "per_class": [0.8, float("nan"), 1.0],
        "n_train": 1000,
        "n_val": 100,
        "n_test": 300,
        "epochs": 5,
        "best_epoch": 4,
        "history": [{"epoch": 1, "val_accuracy": 0.5}],
        "seconds": 1.5,
        "worker": "local",
    }
    row.update(overrides)
    return row


def rho_scores(model="mlp", rho=0.9, clusterer="kmeans"):
    """Return the four rho sub-scores of one model."""
    return [
        Score("digits", model, clusterer, "rho", "rho", rho, rho - 0.05, rho + 0.05, n=5),
        Score("digits", model, clusterer, "rho", "acc_exclusive", 0.8 * rho, n=5),
        Score("digits", model, clusterer, "rho", "acc_inclusive", 0.8, n=5),
        Score("digits", model, "", "rho", "acc_random", 0.81, n=5, details={"note": "x"}),
    ]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "sub" / "robench.db")
    yield s
    s.close()


def file_sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def row_counts(path):
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


def test_store_creates_parent_dir_schema_and_wal(tmp_path):
    path = tmp_path / "a" / "b" / "robench.db"
    with Store(path) as store:
        assert store.db.journal_mode == "wal"
        assert {"runs", "trials", "scores", "clusterings", "skips"} <= set(store.db.table_names())
        indexes = {i.name for i in store.db["trials"].indexes} | {
            i.name for i in store.db["scores"].indexes
        }
        assert {"idx_trials_group", "idx_scores_dataset_metric"} <= indexes
    # Opening again must not fail or duplicate anything.
    with Store(path) as store:
        assert store.db["trials"].count == 0


def test_store_imports_without_torch():
    code = "import sys, robench.store, robench.leaderboard; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_start_and_finish_run_record_versions(store):
    run_id = store.start_run(
        command="robench run --profile quick",
        seed=3,
        config={"datasets": ["digits"]},
        plugin_versions={"robench.builtin": "0.1.0"},
    )
    (run,) = store.runs()
    assert run["id"] == run_id and run["status"] == "running"
    assert run["config"] == {"datasets": ["digits"]}
    assert run["plugin_versions"] == {"robench.builtin": "0.1.0"}
    assert run["robench_version"] and run["python"] and run["platform"] and run["started_at"]
    store.finish_run(run_id, "ok", n_planned=4, n_cached=1, n_ok=3, n_failed=0, n_skipped=2)
    (run,) = store.runs([run_id])
    assert run["status"] == "ok" and run["finished_at"]
    assert (run["n_planned"], run["n_cached"], run["n_ok"], run["n_skipped"]) == (4, 1, 3, 2)
    second = store.start_run(command="robench run", seed=3, config={}, plugin_versions={})
    assert second > run_id
    assert "; CPU: " in run["platform"]


def test_platform_description_names_cpu_model_and_best_vector_isa(tmp_path):
    from robench.store import platform_description

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\n"
                       "flags\t\t: fpu sse2 avx avx2 avx512f fma\n\n"
                       "processor\t: 1\nmodel name\t: Example CPU 9000\n")
    assert platform_description(str(cpuinfo)).endswith("; CPU: Example CPU 9000, avx512f")
    cpuinfo.write_text("model name\t: Older CPU\nflags\t: fpu sse2 avx\n")
    assert platform_description(str(cpuinfo)).endswith("; CPU: Older CPU, avx")
    # no cpuinfo (macOS, Windows): still names the platform and some processor
    assert "; CPU: " in platform_description(str(tmp_path / "missing"))


def test_finish_run_rejects_unknown_status_and_counters(store):
    run_id = store.start_run(command="x", seed=0, config={}, plugin_versions={})
    with pytest.raises(ValueError, match="status"):
        store.finish_run(run_id, "done")
    with pytest.raises(ValueError, match="n_bogus"):
        store.finish_run(run_id, "ok", n_bogus=1)


def test_save_trial_round_trips_json_columns(store):
    store.save_trial(trial_row("t1"))
    (row,) = store.trials()
    assert row["params"] == {"k": 5, "test_fraction": 0.2}
    assert row["spec"] == {"model": "mlp", "dataset": "digits"}
    assert row["versions"] == {"mlp": "1", "digits": "1"}
    assert row["history"] == [{"epoch": 1, "val_accuracy": 0.5}]
    assert row["per_class"] == [0.8, None, 1.0]  # NaN is stored as JSON null
    assert row["accuracy"] == 0.9 and row["n_test"] == 300 and row["finished_at"]
    raw = store.db.execute("SELECT per_class FROM trials").fetchone()[0]
    assert json.loads(raw) == [0.8, None, 1.0]


def test_save_trial_upsert_twice_keeps_one_row_and_updates(store):
    store.save_trial(trial_row("t1", status="failed", error="boom", accuracy=None))
    store.save_trial(trial_row("t1", accuracy=0.75, error=None))
    rows = store.trials()
    assert len(rows) == 1
    assert rows[0]["status"] == "ok" and rows[0]["accuracy"] == 0.75 and rows[0]["error"] is None


def test_save_trial_is_committed_immediately(store):
    store.save_trial(trial_row("t1"))
    # A second connection sees the row: nothing is left in an open transaction.
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("SELECT count(*) FROM trials").fetchone()[0] == 1
    finally:
        conn.close()
    assert not store.db.conn.in_transaction


def test_save_trial_stores_missing_clusterer_as_empty_string(store):
    store.save_trial(trial_row("t1", clusterer=None, protocol="random", kind="random"))
    assert store.trials(clusterer="")[0]["key"] == "t1"


def test_ok_trial_keys_returns_only_ok(store):
    store.save_trial(trial_row("ok1"))
    store.save_trial(trial_row("bad", status="failed", error="ValueError: x"))
    store.save_trial(trial_row("ok2", repeat=1))
    asked = ["ok1", "bad", "ok2", "missing"] + [f"k{i}" for i in range(1200)]
    assert store.ok_trial_keys(asked) == {"ok1", "ok2"}
    assert store.ok_trial_keys([]) == set()


def test_trials_filters_and_keys(store):
    for i in range(3):
        store.save_trial(trial_row(f"x{i}", repeat=i, kind="exclusive"))
        store.save_trial(trial_row(f"i{i}", repeat=i, kind="inclusive"))
    assert [r["key"] for r in store.trials(kind="exclusive")] == ["x0", "x1", "x2"]
    assert {r["key"] for r in store.trials(keys=["x1", "i2", "nope"])} == {"x1", "i2"}
    assert [r["key"] for r in store.trials(keys=["x2", "x0"], kind="exclusive")] == ["x0", "x2"]
    assert len(store.trials(kind=["exclusive", "inclusive"], repeat=1)) == 2
    with pytest.raises(ValueError, match="unknown trials column"):
        store.trials(**{"kind; DROP TABLE trials": 1})


def test_save_scores_upserts_by_key(store):
    run1 = store.start_run(command="x", seed=0, config={}, plugin_versions={})
    store.save_scores(rho_scores(rho=0.9), run1, DEFINITIONS)
    assert len(store.scores()) == 4
    run2 = store.start_run(command="x", seed=0, config={}, plugin_versions={})
    store.save_scores(rho_scores(rho=0.7), run2, DEFINITIONS)
    rows = store.scores(dataset="digits", metric="rho")
    assert len(rows) == 4
    rho = next(r for r in rows if r["score"] == "rho")
    assert rho["value"] == pytest.approx(0.7) and rho["run_id"] == run2
    assert rho["ci_low"] == pytest.approx(0.65) and rho["n"] == 5
    assert rho["higher_is_better"] is True
    assert rho["metric_version"] == "1" and rho["definition"].startswith("rho =")
    assert rho["key"] == score_key("digits", "mlp", "kmeans", "rho", "rho")
    random = next(r for r in rows if r["score"] == "acc_random")
    assert random["details"] == {"note": "x"} and random["clusterer"] == ""


def test_save_scores_nan_value_is_null_and_filters_work(store):
    store.save_scores(
        [Score("digits", "cnn", "kmeans", "rho", "rho", float("nan"))] + rho_scores(), 1,
        DEFINITIONS,
    )
    assert store.scores(model="cnn")[0]["value"] is None
    assert len(store.scores(model="mlp")) == 4
    assert store.scores(dataset="other") == []


def test_save_scores_requires_a_definition(store):
    with pytest.raises(ValueError, match="definition"):
        store.save_scores(rho_scores(), 1, {})
    assert store.scores() == []


def test_save_clustering_and_skip_upsert(store):
    row = {"key": "c1", "run_id": 1, "dataset": "digits", "clusterer": "kmeans", "k": 5,
           "seed": 0, "fingerprint": "abc", "silhouette": 0.2,
           "details": {"per_class_silhouette": [0.1, float("nan")]}, "seconds": 0.3}
    store.save_clustering(row)
    store.save_clustering({**row, "silhouette": 0.25})
    (stored,) = store.clusterings(dataset="digits")
    assert stored["silhouette"] == 0.25
    assert stored["details"] == {"per_class_silhouette": [0.1, None]}
    store.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                    reason="no true sources", run_id=1)
    store.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                    reason="still no true sources", run_id=2)
    (skip,) = store.skips()
    assert skip["reason"] == "still no true sources" and skip["run_id"] == 2


# -- query_readonly ---------------------------------------------------------------------------


@pytest.fixture
def filled_db(tmp_path):
    path = tmp_path / "robench.db"
    with Store(path) as store:
        store.save_trial(trial_row("t1"))
        store.save_trial(trial_row("t2", repeat=1))
        store.save_scores(rho_scores(), 1, DEFINITIONS)
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


def test_score_key_is_sha256_of_identity():
    expected = hashlib.sha256(json.dumps(["d", "m", "", "rho", "rho"]).encode()).hexdigest()
    assert score_key("d", "m", "", "rho", "rho") == expected


def test_save_trial_accepts_numpy_values(store):
    np = pytest.importorskip("numpy")
    store.save_trial(trial_row(
        "np", per_class=np.array([0.5, np.nan]), n_test=np.int64(30), accuracy=np.float32(0.5),
        params={"k": np.int64(5)},
    ))
    (row,) = store.trials()
    assert row["per_class"] == [0.5, None] and row["n_test"] == 30
    assert row["accuracy"] == 0.5 and row["params"] == {"k": 5}


def test_save_trial_from_several_threads(store):
    from concurrent.futures import ThreadPoolExecutor

    # A runner may save from an executor's callback thread; every write must land.
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: store.save_trial(trial_row(f"t{i}", repeat=i)), range(40)))
    assert len(store.ok_trial_keys(f"t{i}" for i in range(40))) == 40
