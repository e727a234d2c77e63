"""Two runs on one database both finish, with every trial stored once (issue 16, defect 1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.reliability.cli import ROOT, integrity, rows, start

FAST = ["run", "-d", "digits", "-m", "svm", "-c", "kmeans", "--metric", "rho", "--executor", "local"]


def test_two_processes_writing_at_once_lose_no_write(tmp_path):
    # SQLite's own behaviour, through Store: with a deferred BEGIN in WAL mode most of these
    # writes failed at once with "database is locked" (2,181 of 3,000 on this kind of machine).
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from robench.store import Store
        store = Store(sys.argv[1])
        for i in range(150):
            store.save_trial({{"key": f"{{sys.argv[2]}}-{{i}}", "status": "ok", "dataset": "d",
                               "model": "m", "protocol": "p", "kind": "random", "repeat": i}})
            store.save_skip(dataset="d", model=sys.argv[2], clusterer="", metric="m",
                            reason=str(i))
        store.close()
    """)
    db = tmp_path / "stress.db"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db), name],
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert rows(db, "SELECT COUNT(*) FROM trials") == [(300,)]
    assert integrity(db) == "ok"


def _both(tmp_path, first, second):
    db = tmp_path / "c.db"
    procs = [start([*args, "--db", str(db)], tmp_path) for args in (first, second)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    return db


def _planned_keys(db) -> int:
    return rows(db, "SELECT COUNT(DISTINCT key) FROM trials")[0][0]


def test_two_runs_of_the_same_combination_both_finish(tmp_path):
    db = _both(tmp_path, [*FAST, "-r", "2"], [*FAST, "-r", "2"])
    # 2 repeats x (inclusive, exclusive, random) = 6 trials, each stored once and ok
    assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("ok", 6)]
    assert rows(db, "SELECT status FROM runs ORDER BY id") == [("ok",), ("ok",)]
    assert rows(db, "SELECT COUNT(*) FROM scores WHERE score = 'rho' AND value IS NULL") == [(0,)]
    assert integrity(db) == "ok"


def test_two_runs_of_different_combinations_both_finish(tmp_path):
    db = _both(tmp_path, [*FAST, "-r", "2"], [*FAST, "-r", "3", "--seed", "1"])
    assert rows(db, "SELECT status, COUNT(*) FROM trials GROUP BY status") == [("ok", 15)]
    assert _planned_keys(db) == 15
    assert rows(db, "SELECT status FROM runs ORDER BY id") == [("ok",), ("ok",)]
    assert integrity(db) == "ok"
