"""Fixtures of the publish tests: an honest contribution, an empty board, pull requests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robench.exchange import publish
from tests.exchange.boards import git, honest_run


@pytest.fixture(scope="session")
def honest(tmp_path_factory) -> Path:
    """An honest contribution: digits, svm, rho, 2 repeats (6 trials)."""
    return honest_run(tmp_path_factory.mktemp("honest"))


@pytest.fixture
def board(tmp_path) -> Path:
    """An empty leaderboard repository (no example contribution)."""
    path = tmp_path / "board"
    publish.init_repository(path, title="Hostile board", requirement="robench",
                            allow_editable=True)
    return path


@pytest.fixture
def pull_requests(board, honest):
    """The board in git (main), and two pull requests: ``honest`` adds a contribution;
    ``settings`` adds the same one and lowers verify_fraction and allows its model unverified."""
    git(board, "init", "-q", "-b", "main")
    git(board, "add", "-A")
    git(board, "commit", "-q", "-m", "board")
    for branch, change in (("honest", False), ("settings", True)):
        git(board, "checkout", "-q", "-b", branch, "main")
        shutil.copyfile(honest, board / "contributions" / "alice.db")
        if change:
            conf = json.loads((board / "leaderboard.json").read_text())
            conf.update(verify_fraction=0.01, verify_allow={"datasets": [], "models": ["svm"]})
            (board / "leaderboard.json").write_text(json.dumps(conf))
        git(board, "add", "-A")
        git(board, "commit", "-q", "-m", branch)
    git(board, "checkout", "-q", "main")
    return board
