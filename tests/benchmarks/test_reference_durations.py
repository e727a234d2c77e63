"""benchmarks/reference_durations.py: the packaged reference durations come from named runs."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from robench.run.estimate import REFERENCE, load_reference


def test_reference_durations_script_pools_the_named_runs(tmp_path):
    """benchmarks/reference_durations.py on tests/fixtures/docs.db: the rows are
    Store.trial_durations of the named runs, stamped with their commit, machine and date, and
    read back by load_reference."""
    from robench.storage.store import Store

    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "docs.db"
    shutil.copyfile(root / "tests" / "fixtures" / "docs.db", db)
    script = importlib.util.spec_from_file_location(
        "reference_durations", root / "benchmarks" / "reference_durations.py")
    mod = importlib.util.module_from_spec(script)
    script.loader.exec_module(mod)
    with Store(db, readonly=True) as store:
        run = store.runs()[0]
        expected = store.trial_durations(runs=[run["id"]])
    out = tmp_path / "ref.json"
    assert mod.main(["--db", f"{db}:{run['id']}", "--db", f"{db}:{run['id']}",
                     "--out", str(out)]) == 0
    rows, stamp = load_reference(out)
    assert json.loads(out.read_text())["rows"] == rows
    assert stamp["commit"] == str(run["git_rev"])[:10] and stamp["machine"] == run["platform"]
    # the same runs twice: every group pooled once, with its trials counted twice
    assert len(rows) == len(expected)
    assert sorted(r["n"] for r in rows) == sorted(2 * r["n"] for r in expected)
    by = {(r["dataset"], r["model"], r["protocol"], r["kind"], r["max_epochs"]): r for r in rows}
    for r in expected:
        got = by[(r["dataset"], r["model"], r["protocol"], r["kind"], r["max_epochs"])]
        assert got["seconds"] == pytest.approx(r["seconds"], abs=1e-4)
    assert REFERENCE.name == "reference_durations.json"
