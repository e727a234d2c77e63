"""benchmarks/merge_scale.py, run tiny: its generated contributions are what it says they are."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import merge_scale as M  # noqa: E402


def test_generated_contributions_merge_as_honest_duplicates_and_again_copy_nothing(tmp_path):
    from robench.exchange.merge import merge_databases

    sources = M.generate(tmp_path, contributors=2, n_models=3, repeats=2)
    # 3 models x 2 data sets x (inclusive, exclusive, random) x 2 repeats
    assert [M._count(p, "trials") for p in sources] == [36, 36]
    report = merge_databases(sources, tmp_path / "all.db")
    assert report.conflicts == [] and report.unchecked == []
    first, second = report.sources
    assert first["trials"] == 36 and first["scores"] > 0 and first["verifications"] == 1
    # the shared baseline: the same 12 trials and its scores, run elsewhere by the other one
    assert second["trials_duplicate"] == 12 and second["trials"] == 24
    assert second["scores_duplicate"] > 0 and second["scores_conflict"] == 0
    assert second["scores_without_trials"] == 0 and second["verifications"] == 1
    again = merge_databases(sources, tmp_path / "all.db")
    assert all(s.get("already") for s in again.sources)
    old = M.as_schema_3(sources, tmp_path / "schema3")
    conn = sqlite3.connect(old[0])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'verifications'").fetchone()
    conn.close()
