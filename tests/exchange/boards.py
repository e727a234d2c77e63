"""What the publish tests share: an honest contribution, the report, and robench's commands run
as a user runs them (a separate process on this checkout)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from tests.reliability.cli import run


def honest_run(folder: Path, name: str = "honest.db", *extra) -> Path:
    """Run an honest contribution (digits, svm, rho, 2 repeats: 6 trials) into ``folder``."""
    db = folder / name
    out = run(["run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2", "--seed", "1",
               "--db", db, *extra], folder)
    assert out.returncode == 0, out.stderr
    return db


def report_text(board) -> str:
    return (board / ".staging" / "report.md").read_text(encoding="utf-8")


def publish_cli(step, board, *extra, timeout=300):
    """Run ``robench publish STEP BOARD EXTRA...`` in a separate process."""
    return run(["publish", step, board, *extra], board.parent, timeout=timeout)


def one_line_error(out):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def git(repo, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def edit(path, sql: str) -> None:
    """Run ``sql`` on the database at ``path`` and close it (its bytes are then the file's)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()
