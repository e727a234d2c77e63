"""Tests for the SQLite results store: schema, declared columns, reading and writing rows."""

import json
import sqlite3
import subprocess
import sys

import pytest

from robench.specs import Score
from robench.storage.store import COLUMNS, JSON_COLUMNS, SCHEMA, Store, decode_row, encode_row
from tests.helpers import clusterings

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
    from tests.helpers import add_runs

    s = Store(tmp_path / "sub" / "robench.db")
    add_runs(s, 2)  # trials and skips below name runs 1 and 2 (foreign keys)
    yield s
    s.close()


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
    code = ("import sys, robench.storage.store, robench.run.scoring, robench.storage.readonly, robench.process.provenance, "
            "robench.present.skips, robench.present.leaderboard; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_start_and_finish_run_record_versions(store):
    run_id = store.start_run(
        command="robench run --profile quick",
        seed=3,
        config={"datasets": ["digits"]},
        plugin_versions={"robench.builtin": "0.1.0"},
    )
    (run,) = store.runs([run_id])
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


def test_save_clustering_and_skip_upsert(store):
    row = {"key": "c1", "run_id": 1, "dataset": "digits", "clusterer": "kmeans", "k": 5,
           "seed": 0, "fingerprint": "abc", "silhouette": 0.2,
           "details": {"per_class_silhouette": [0.1, float("nan")]}, "seconds": 0.3}
    store.save_clustering(row)
    store.save_clustering({**row, "silhouette": 0.25})
    (stored,) = clusterings(store, dataset="digits")
    assert stored["silhouette"] == 0.25
    assert stored["details"] == {"per_class_silhouette": [0.1, None]}
    store.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                    reason="no true sources", run_id=1)
    store.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                    reason="still no true sources", run_id=2)
    (skip,) = store.skips()
    assert skip["reason"] == "still no true sources" and skip["run_id"] == 2


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


# -- declared columns -------------------------------------------------------------------------


def _columns(path, table):
    conn = sqlite3.connect(path)
    try:
        return [(row[1], row[2]) for row in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def test_every_table_and_json_column_is_declared():
    assert set(JSON_COLUMNS) == set(COLUMNS)
    for table, names in JSON_COLUMNS.items():
        assert set(names) <= set(COLUMNS[table]), table
    assert "CREATE TABLE IF NOT EXISTS trials" in SCHEMA


def test_every_column_older_robench_added_on_the_fly_is_declared():
    # written by every protocol before columns had to be declared (alter=True added them)
    from tests.test_keys_stable import FIXTURES

    path = FIXTURES / "pre_open_core.db"
    moved = {"scores": {"definition"}}  # schema 2 keeps each definition once, in metrics
    for table in COLUMNS:
        declared = set(COLUMNS[table]) | moved.get(table, set())
        assert {name for name, _ in _columns(path, table)} <= declared, table


def test_protocol_columns_round_trip_and_json_ones_come_back_decoded(store):
    store.save_trial(trial_row(
        "t1", all_accuracy=0.8, correct="/w==", last_val_accuracy=0.7, last_test_accuracy=0.6,
        not_applicable=None, extra={"kmeans": {"k": 3}, "z": [1, float("nan")]},
        details={"ratio": 1.5},
    ))
    (row,) = store.trials()
    assert row["extra"] == {"kmeans": {"k": 3}, "z": [1, None]}
    assert row["details"] == {"ratio": 1.5}
    assert (row["all_accuracy"], row["correct"], row["last_test_accuracy"]) == (0.8, "/w==", 0.6)
    raw = store.db.execute("SELECT extra FROM trials").fetchone()[0]
    assert raw == '{"kmeans": {"k": 3}, "z": [1, null]}'


def test_a_row_with_an_undeclared_column_is_refused_and_nothing_is_written(store):
    with pytest.raises(ValueError, match=r"'coolness'.*'extra'"):
        store.save_trial(trial_row("t1", coolness=0.9))
    with pytest.raises(ValueError, match=r"'k_per_class'.*'details'"):
        store.save_clustering({"key": "c1", "dataset": "digits", "k_per_class": [3, 3]})
    with pytest.raises(ValueError, match="single value"):
        store.save_trial(trial_row("t1", accuracy=[0.5, 0.6]))
    assert store.trials() == [] and clusterings(store) == []
    assert "coolness" not in store.db["trials"].columns_dict


def test_encoding_an_encoded_row_changes_nothing():
    row = encode_row("trials", trial_row("t1", extra={"a": 1}))
    assert encode_row("trials", row) == row
    assert decode_row("trials", dict(row))["extra"] == {"a": 1}


def test_an_older_file_gains_a_declared_column_only_when_a_row_uses_it(tmp_path):
    path = tmp_path / "old.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    for name in ("extra", "not_applicable", "details"):  # as a file from before they existed
        conn.execute(f"ALTER TABLE trials DROP COLUMN {name}")
    conn.commit()
    conn.close()
    old = _columns(path, "trials")

    with Store(path) as store:  # opening adds nothing: it would change every trial digest
        assert _columns(path, "trials") == old
        store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
        store.save_trial(trial_row("t1", not_applicable=None))  # a NULL needs no column
        assert _columns(path, "trials") == old
        assert "extra" not in store.trials()[0]
        store.save_trial(trial_row("t2", repeat=1, extra={"a": 1}))
        assert _columns(path, "trials") == old + [("extra", "TEXT")]
        assert store.trials(keys=["t2"])[0]["extra"] == {"a": 1}
        assert store.trials(keys=["t1"])[0]["extra"] is None


def test_the_default_database_is_robench_db_or_robench_db_env(monkeypatch):
    from robench.storage.store import default_path

    monkeypatch.delenv("ROBENCH_DB", raising=False)
    assert default_path() == "robench.db"
    monkeypatch.setenv("ROBENCH_DB", "/tmp/x/results.db")
    assert default_path() == "/tmp/x/results.db"
    monkeypatch.setenv("ROBENCH_DB", "")  # set but empty: the default, never an empty path
    assert default_path() == "robench.db"
