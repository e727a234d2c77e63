"""A score group whose trials all failed never replaces a stored score (issue 16, defect 5)."""

from __future__ import annotations

from robench.run.runner import execute
from tests.helpers import run_config


def test_failed_trials_never_replace_a_stored_score(tiny_registry, store, monkeypatch):
    from tests.plugins import tiny

    cfg = run_config(["tiny"], ["centroid"], ["kmeans"], ["rho"], registry=tiny_registry,
                     repeats=2, k=2)
    first = execute(cfg, tiny_registry, store)
    good = {s.score: s.value for s in first.scores}
    assert good["rho"] is not None
    # the same trials stored as failed (as a broken plugin version would leave them) and
    # failing again when rerun
    store.db.execute("UPDATE trials SET status = 'failed', error = 'RuntimeError: broken'")

    def broken(self, *args):
        raise RuntimeError("broken")

    monkeypatch.setattr(tiny.Centroid, "fit", broken)
    again = execute(cfg, tiny_registry, store)
    assert len(again.failed) == 6
    assert {s.score: s.value for s in again.scores} == good
    stored = {r["score"]: r["value"] for r in store.scores(metric="rho")}
    assert stored["rho"] == good["rho"]
    assert {r["run_id"] for r in store.scores(metric="rho")} == {first.run_id}
