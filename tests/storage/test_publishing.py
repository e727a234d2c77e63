"""A leaderboard repository runs itself: `robench init-leaderboard` writes it, `robench publish`
accepts an honest contribution and rejects a tampered one, offline, with the reason."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest

from robench.exchange import publishing


def robench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A repository from `robench init-leaderboard` with its example contribution, published."""
    path = tmp_path_factory.mktemp("board") / "board"
    out = robench("init-leaderboard", path, "--title", "Test board", "--requirement", "robench")
    assert out.returncode == 0, out.stderr
    for name in ("README.md", "leaderboard.json", "requirements.txt", ".gitignore",
                 ".github/workflows/leaderboard.yml", "published/robench.db",
                 "contributions/example.db"):
        assert (path / name).is_file(), name
    out = robench("publish", "run", path)
    assert out.returncode == 0, out.stdout + out.stderr
    return path


def test_init_leaderboard_passes_the_pipeline_on_its_own_example(board):
    assert (board / "site" / "index.html").is_file()
    assert [r["contributor"] for r in publishing.accepted(board).values()] == ["example"]
    assert publishing.pending(board) == []
    report = (board / ".staging" / "report.md").read_text()
    for step in ("validate: passed", "verify: passed", "diff: passed", "merge: passed",
                 "build: passed"):
        assert step in report
    workflow = (board / ".github" / "workflows" / "leaderboard.yml").read_text()
    for step in ("check", "run"):
        assert f"robench publish {step} ." in workflow  # every CI step is one command
    assert "actions/deploy-pages@" in workflow and "GITHUB_STEP_SUMMARY" in workflow
    assert workflow == publishing.template("workflow.yml")  # package data, written as is
    again = robench("publish", "check", board)  # nothing pending: nothing to reject
    assert again.returncode == 0, again.stdout


def test_an_honest_contribution_is_accepted_and_a_tampered_one_rejected_with_the_reason(
        board, tmp_path):
    honest = board / "contributions" / "alice.db"
    out = robench("run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2", "--seed", "1",
                  "--db", honest, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    tampered = board / "contributions" / "mallory.db"
    shutil.copyfile(honest, tampered)
    conn = sqlite3.connect(tampered)  # better numbers than the trials really gave
    with conn:
        conn.execute("UPDATE trials SET accuracy = min(1.0, accuracy + 0.05)")
        conn.execute("UPDATE scores SET value = value + 0.05")
    conn.close()
    check = robench("publish", "check", board)
    assert check.returncode == 1
    report = (board / ".staging" / "report.md").read_text()
    assert "`mallory.db`: rejected." in report and "`alice.db`: rejected" not in report
    reason = report.split("`mallory.db`: rejected.**", 1)[1].splitlines()[0]
    assert "contradicts itself" in reason or "conflict" in reason or "recompute" in reason \
        or "reproduce" in reason, reason

    tampered.unlink()  # the maintainer drops it; alice's goes through
    run = robench("publish", "run", board)
    assert run.returncode == 0, run.stdout + run.stderr
    contributors = sorted(r["contributor"] for r in publishing.accepted(board).values())
    assert contributors == ["alice", "example"]
    page = (board / "site" / "models.html").read_text()
    assert "alice (alice.db" in page  # provenance is the file name the maintainer accepted


def test_a_folder_that_is_not_a_leaderboard_is_refused_in_one_line(tmp_path):
    out = robench("publish", "check", tmp_path)
    assert out.returncode == 2 and "init-leaderboard" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    (tmp_path / "x").write_text("")
    out = robench("init-leaderboard", tmp_path)
    assert out.returncode == 2 and "not empty" in out.stderr
