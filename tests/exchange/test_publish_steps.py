"""The publish steps as functions, on tiny contributions: true reasons, an all-or-nothing merge,
and the pipeline's verification in the published database and on the site."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.exchange import publishing

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "2", "--metric", "rho",
        "--set", "train.max_epochs=2", "--set", "train.batch_size=16"]


@pytest.fixture(scope="module")
def tiny_db(tmp_path_factory):
    """A tiny contribution run in worker processes (they record how they ran)."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    try:
        db = tmp_path_factory.mktemp("steps") / "alice.db"
        res = CliRunner().invoke(cli, ["run", *TINY, "-m", "centroid", "-m", "mlp",
                                       "--executor", "process", "-j", "2", "--db", str(db)])
        assert res.exit_code == 0, res.output
    finally:
        set_registry(None)
    return db


@pytest.fixture
def board(tmp_path, tiny_registry):
    repo = tmp_path / "board"
    publishing.init_repository(repo, requirement="robench")
    return repo


def edit(path, sql: str) -> None:
    """Run ``sql`` on the database at ``path`` and close it (its bytes are then the file's)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


def published_bytes(repo) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((repo / "published").iterdir())}


def check(repo) -> list:
    return [publishing.validate(repo), publishing.verify(repo), publishing.diff(repo)]


def test_trials_record_how_they_ran(tiny_db):
    import json

    with sqlite3.connect(tiny_db) as conn:
        found = {json.loads(r[0]) == {"threads": 1, "executor": "process"}
                 for r in conn.execute("SELECT execution FROM trials")}
    assert found == {True}


def test_an_honest_contribution_is_published_with_the_pipelines_verification(board, tiny_db):
    from robench.present.site import build_site

    shutil.copyfile(tiny_db, board / "contributions" / "alice.db")
    assert all(step.ok for step in check(board)), (board / ".staging" / "report.md").read_text()
    assert publishing.merge(board).ok
    assert publishing.build(board, builder=build_site).ok
    with sqlite3.connect(board / "published" / "robench.db") as conn:
        (n, where, contributor), = conn.execute(
            "SELECT n_matched, recorded_in, contributor FROM verifications").fetchall()
    assert n == 10 and contributor == "alice"
    assert where == f"{publishing.PIPELINE}: publish verify of alice.db"
    page = (board / "site" / "models" / "mlp.html").read_text().replace("&#39;", "'")
    assert "sampled trials on " in page and f"(recorded in {where})" in page
    assert [r["contributor"] for r in publishing.accepted(board).values()] == ["alice"]
    # the published file is one self-contained database: reading it leaves nothing beside it
    assert sorted(p.name for p in (board / "published").iterdir()) == [
        "accepted.json", "robench.db"]


def test_an_edited_score_is_rejected_because_its_trials_give_another(board, tiny_db):
    mallory = board / "contributions" / "mallory.db"
    shutil.copyfile(tiny_db, mallory)
    edit(mallory, "UPDATE scores SET value = value + 0.05 WHERE metric = 'rho'")
    result = publishing.validate(board)
    assert not result.ok
    reason = result.rejected["mallory.db"]
    assert "not what robench recomputes from the contribution's own trials" in reason, reason
    assert "claimed" in reason and "recomputed" in reason
    assert "conflict" not in reason  # nothing is published or pending that it could clash with


def test_merge_alone_publishes_nothing_that_was_not_verified_here(board, tiny_db):
    shutil.copyfile(tiny_db, board / "contributions" / "alice.db")
    before = published_bytes(board)
    result = publishing.merge(board)  # no check ran: alice's trials were not re-run here
    assert not result.ok and "not verified here" in result.rejected["alice.db"]
    assert published_bytes(board) == before and publishing.accepted(board) == {}


def test_merge_is_all_or_nothing(board, tiny_db):
    shutil.copyfile(tiny_db, board / "contributions" / "alice.db")
    check(board)
    # a second contribution arrives after the check: it was not verified, so neither merges
    bob = board / "contributions" / "bob.db"
    shutil.copyfile(tiny_db, bob)
    edit(bob, "UPDATE runs SET command = 'bob'")  # other bytes, same results
    before = published_bytes(board)
    result = publishing.merge(board)
    assert not result.ok and set(result.rejected) == {"bob.db"}
    assert published_bytes(board) == before and publishing.accepted(board) == {}
    check(board)
    assert publishing.merge(board).ok
    assert sorted(r["contributor"] for r in publishing.accepted(board).values()) == [
        "alice", "bob"]


def test_the_diff_report_lists_only_what_changes(board, tiny_db):
    shutil.copyfile(tiny_db, board / "contributions" / "alice.db")
    check(board)
    assert publishing.merge(board).ok
    again = board / "contributions" / "alice-again.db"
    shutil.copyfile(tiny_db, again)
    edit(again, "UPDATE runs SET command = 'again'")
    steps = check(board)
    assert [s.ok for s in steps] == [True, True, True]
    lines = steps[2].lines
    assert lines[0].startswith("- ") and " 0 changed, 0 new" in lines[0]
    assert not any(line.startswith("| ") for line in lines)  # no table of unchanged scores
