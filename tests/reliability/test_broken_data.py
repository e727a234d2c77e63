"""A broken data set is reported once and skipped with its reason; the rest runs (issue 16,
defect 4)."""

from __future__ import annotations

import pytest

from tests.reliability.cli import HOSTILE, rows, run

BROKEN = {
    "nan-data": "X contains NaN or infinite values",
    "one-class": "has a single class",
    "mismatched": "y must be 1-D with one label per row of X",
    "wrong-type": "load() returned a dict, expected a robench.data.Dataset",
    "unreachable": "failed to load: OSError: the download server is unreachable",
}


def test_broken_data_sets_beside_a_healthy_one(tmp_path):
    db = tmp_path / "b.db"
    args = ["run", "-d", "tiny"]
    for name in BROKEN:
        args += ["-d", name]
    done = run([*args, "-m", "centroid", "-c", "kmeans", "--metric", "rho", "-k", "2", "-r", "1",
                "--executor", "local", "--db", str(db)], tmp_path, plugins=HOSTILE)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for name, why in BROKEN.items():
        # reported once, on stderr, with its reason
        lines = [ln for ln in done.stderr.splitlines() if f"'{name}'" in ln]
        assert len(lines) == 1 and why in lines[0], (name, done.stderr)
    assert rows(db, "SELECT dataset, status, COUNT(*) FROM trials GROUP BY 1, 2") == [
        ("tiny", "ok", 3)]
    assert rows(db, "SELECT status FROM runs") == [("ok",)]
    skipped = dict(rows(db, "SELECT dataset, reason FROM skips"))
    assert set(skipped) == set(BROKEN)
    assert all(why in skipped[name] for name, why in BROKEN.items())


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_data_set_alone_is_a_clear_error(tmp_path, name):
    db = tmp_path / "alone.db"
    done = run(["run", "-d", name, "-m", "centroid", "-c", "kmeans", "--metric", "rho",
                "--executor", "local", "--db", str(db)], tmp_path, plugins=HOSTILE)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert BROKEN[name] in done.stderr
    assert not db.exists()
