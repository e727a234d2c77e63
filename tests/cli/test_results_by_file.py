"""A data set given by file, as it was run: ``robench results -d npz:PATH`` finds its stable name,
and ``robench migrate`` renames what an older robench stored under the file's absolute path
(issue 51)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli

RUN = ["-m", "svm", "-c", "oracle", "-r", "2", "--metric", "rho", "--executor", "local"]


@pytest.fixture(autouse=True)
def fresh_registry():
    """Every CLI call builds its registry afresh (resolution is cached per registry)."""
    from robench.plugins import set_registry

    set_registry(None)
    yield
    set_registry(None)


def invoke(*args):
    from robench.plugins import set_registry

    set_registry(None)
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def npz(tmp_path):
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(6), 20)
    y = groups // 2
    X = rng.normal(0, 1, (groups.size, 5)) + 3.0 * y[:, None] + groups[:, None]
    path = tmp_path / "data" / "x.npz"
    path.parent.mkdir()
    np.savez(path, X=X, y=y, groups=groups)
    return path


def table(db, sql):
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(sql).fetchall())


def test_results_finds_a_data_set_by_the_file_it_was_run_with(npz, tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    assert invoke("run", "-d", f"npz:{npz}", *RUN, "--db", db).exit_code == 0
    (name,), = table(db, "SELECT DISTINCT dataset FROM scores")
    assert name.startswith("npz:x-")
    monkeypatch.chdir(npz.parent)
    for given in (f"npz:{npz}", "npz:x.npz", name):  # absolute, relative, stored
        res = invoke("results", "-d", given, "--db", db, "--format", "csv")
        assert res.exit_code == 0, res.output
        assert name in res.output and "svm" in res.output
    res = invoke("results", "-d", "npz:nowhere.npz", "--db", db)
    assert res.exit_code == 2 and "nowhere.npz" in res.output
    assert "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1].startswith("Error: Invalid value for --dataset")


def test_migrate_renames_a_data_set_stored_under_its_path(npz, tmp_path, monkeypatch):
    """A database in the old shape is written by the real run code with the old naming (the
    canonical reference, an absolute path); after ``robench migrate`` its names and keys are
    those a run today writes, so a run on the same file trains nothing."""
    from robench.data import references

    today = tmp_path / "today.db"
    assert invoke("run", "-d", f"npz:{npz}", *RUN, "--db", today).exit_code == 0
    old = tmp_path / "old.db"
    with monkeypatch.context() as m:
        m.setattr(references, "stable_name",
                  lambda scheme, target, given, fingerprint:
                  references.reference_name(scheme, target, {}))
        assert invoke("run", "-d", f"npz:{npz}", *RUN, "--db", old).exit_code == 0
    (path_name,), = table(old, "SELECT DISTINCT dataset FROM trials")
    assert path_name == f"npz:{npz}"
    res = invoke("results", "-d", f"npz:{npz}", "--db", old, "--format", "csv")
    assert res.exit_code == 0 and path_name in res.output  # before migrating too

    res = invoke("migrate", "--db", old)
    assert res.exit_code == 0, res.output
    (name,), = table(today, "SELECT DISTINCT dataset FROM trials")
    assert f"data set npz:{npz} -> {name} (its stable name)" in res.output
    for sql in ("SELECT key, dataset, spec FROM trials", "SELECT key, dataset FROM scores",
                "SELECT key, dataset, trial_keys FROM score_groups",
                "SELECT dataset, model, rank FROM ranks"):
        assert table(old, sql) == table(today, sql), sql
    assert str(tmp_path) not in str(table(old, "SELECT * FROM score_groups"))
    res = invoke("run", "-d", f"npz:{npz}", *RUN, "--db", old)
    assert res.exit_code == 0 and "6 trials planned: 6 already stored" in res.output, res.output
    res = invoke("migrate", "--db", old)  # nothing left to rename
    assert res.exit_code == 0 and "->" not in res.output
