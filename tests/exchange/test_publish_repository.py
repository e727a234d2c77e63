"""The repository's settings and contributions (robench.exchange.publish.repository): only
regular files inside it are contributions, committed links never make a step write outside,
JSON of the wrong shape is one line before anything is written, and a pull request cannot
change the rules it is checked by."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from robench.errors import MergeError
from robench.exchange import publish
from tests.exchange.boards import git, one_line_error, publish_cli, report_text


def robench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_a_pull_request_cannot_change_the_rules_it_is_checked_by(pull_requests):
    """Settings are read from the pull request's own checkout, so a pull request that edits
    leaderboard.json (or requirements.txt, the workflow, published/) is refused: by robench's
    check (--base) before it reads them, and by the workflow's first step before it installs
    anything."""
    board = pull_requests
    git(board, "checkout", "-q", "settings")
    out = publish_cli("check", board, "--base", "main")
    assert out.returncode == 1, out.stdout + out.stderr
    refused = [line for line in out.stdout.splitlines() if "refused" in line]
    assert len(refused) == 1 and "1 path(s) outside contributions/" in refused[0]
    assert "`leaderboard.json`" in refused[0] and "verify:" not in out.stdout
    assert publish.accepted(board) == {}
    one_line_error(publish_cli("validate", board, "--base", "no-such-branch"))
    one_line_error(publish_cli("diff", board, "--base", "main"))
    git(board, "checkout", "-q", "honest")
    result = publish.validate(board, base="main")
    assert result.ok and "only contributions/ changed" in "\n".join(result.lines)


@pytest.mark.parametrize("make", ["dev-zero", "fifo", "outside", "published", "empty"])
def test_contributions_are_regular_files_inside_the_repository(board, honest, tmp_path, make):
    """Issue 40, 4: links to /dev/zero, a FIFO, a database outside, the published database."""
    entry = board / "contributions" / "evil.db"
    if make == "dev-zero":
        entry.symlink_to("/dev/zero")
    elif make == "fifo":
        os.mkfifo(entry)
    elif make == "outside":
        entry.symlink_to(honest)
    elif make == "published":
        entry.symlink_to(board / "published" / "robench.db")
    else:
        entry.write_bytes(b"")
    before = (board / "published" / "robench.db").read_bytes()
    out = publish_cli("check", board, timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "`evil.db`: rejected." in report_text(board)
    out = publish_cli("merge", board, timeout=60)
    assert out.returncode == 1
    assert (board / "published" / "robench.db").read_bytes() == before
    assert publish.accepted(board) == {}


@pytest.mark.parametrize("link, steps", [
    ("site", ("build", "run")), (".staging", ("check", "build", "run")),
    ("published/accepted.json", ("check", "merge", "run")),
    ("published", ("check", "build", "run"))])
def test_committed_links_never_make_a_step_write_outside(board, tmp_path, link, steps):
    """Issue 40, 4: committed links for site, .staging, accepted.json made steps write
    outside the repository."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "accepted.json").write_text("{}")
    target = outside / "accepted.json" if link.endswith(".json") else outside
    path = board / link
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.symlink_to(target)
    for step in steps:
        out = publish_cli(step, board, timeout=120)
        one_line_error(out)
        assert "symbolic link" in out.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["accepted.json"]
    assert (outside / "accepted.json").read_text() == "{}"


@pytest.mark.parametrize("name", ["leaderboard.json", "published/accepted.json"])
def test_json_of_the_wrong_shape_is_one_line_before_anything_is_written(board, honest, name):
    """Issue 40, 9: `[]` in leaderboard.json or accepted.json."""
    shutil.copyfile(honest, board / "contributions" / "alice.db")
    (board / name).write_text("[]")
    before = (board / "published" / "robench.db").read_bytes()
    for step in ("validate", "merge", "run"):
        out = publish_cli(step, board)
        one_line_error(out)
        assert "JSON object" in out.stderr
    assert (board / "published" / "robench.db").read_bytes() == before
    assert not (board / ".staging").exists()


def test_a_folder_that_is_not_a_leaderboard_is_refused_in_one_line(tmp_path):
    out = robench("publish", "check", tmp_path)
    assert out.returncode == 2 and "init-leaderboard" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    (tmp_path / "x").write_text("")
    out = robench("init-leaderboard", tmp_path)
    assert out.returncode == 2 and "not empty" in out.stderr


def accept(board, name: str, contributor: str) -> None:
    """Record in accepted.json that ``name`` was accepted as ``contributor``'s (other content)."""
    record = {"f" * 64: {"file": name, "contributor": contributor,
                         "accepted": "2026-12-01T00:00:00+00:00"}}
    (board / "published" / "accepted.json").write_text(json.dumps(record))


def test_a_pull_request_cannot_change_or_replace_an_accepted_contribution(board):
    """Issue 51, 6: new content under contributions/example.db was published as example's."""
    accept(board, "example.db", "example")
    (board / "contributions" / "example.db").write_bytes(b"not what was accepted")
    (board / "contributions" / "mallory.db").write_bytes(b"new results")
    todo, refused = publish.contributions(board)
    assert [p.name for p in todo] == ["mallory.db"]
    why = refused["example.db"]
    assert "accepted already (as example's" in why and "never change or replace" in why
    assert "allow_replace" in why and "\n" not in why
    result = publish.validate(board)
    assert not result.ok and result.rejected["example.db"] == why
    # the maintainer's stated override (a push to main: a pull request cannot change it)
    conf = json.loads((board / "leaderboard.json").read_text())
    (board / "leaderboard.json").write_text(json.dumps({**conf, "allow_replace": ["example.db"]}))
    todo, refused = publish.contributions(board)
    assert sorted(p.name for p in todo) == ["example.db", "mallory.db"] and refused == {}
    (board / "leaderboard.json").write_text(json.dumps({**conf, "allow_replace": "example.db"}))
    with pytest.raises(MergeError, match="allow_replace must be"):
        publish.settings(board)


@pytest.mark.parametrize("name, why", [
    ("\u0435xample", "mixes scripts (cyrillic, latin)"),  # Cyrillic е: a homoglyph of example
    ("alice\u202egnp", "U+202E"),  # a right-to-left override
    ("al\u200bice", "U+200B"),  # a zero-width space
    ("\uff21lice", "normal form NFKC (it reads as 'Alice')"),  # a fullwidth A
    ("Example", "looks like contributor 'example'"),
    ("\u0430\u0441\u0435", "looks like contributor 'ace'"),  # all Cyrillic: асе
    ("exa\u043c\u0440le", "mixes scripts"),
])
def test_contributor_names_that_look_like_others_or_hide_characters_are_refused(board, name,
                                                                                why):
    """Issue 51, 6: a contributor named with a Cyrillic `е` was shown beside `example`."""
    record = {"e" * 64: {"file": "example.db", "contributor": "example", "accepted": "x"},
              "a" * 64: {"file": "ace.db", "contributor": "ace", "accepted": "x"}}
    (board / "published" / "accepted.json").write_text(json.dumps(record))
    (board / "contributions" / f"{name}.db").write_bytes(b"results")
    todo, refused = publish.contributions(board)
    assert todo == [] and list(refused) == [f"{name}.db"]
    assert why in refused[f"{name}.db"], refused


def test_names_in_one_script_are_taken_and_lookalikes_among_new_ones_refused(board):
    for name in ("alice", "müller", "田中たろう", "борис", "bob", "Bob"):
        (board / "contributions" / f"{name}.db").write_bytes(b"results")
    todo, refused = publish.contributions(board)
    assert sorted(p.name for p in todo) == sorted(
        ["alice.db", "müller.db", "田中たろう.db", "борис.db", "Bob.db"])
    assert list(refused) == ["bob.db"] and "looks like contributor 'Bob'" in refused["bob.db"]
    from robench.exchange.publish.repository import skeleton

    assert skeleton("\u0435xample") == skeleton("example") == skeleton("EXAMPLE")
    assert skeleton("\u0430\u0441\u0435") == "ace" and skeleton("b0b") == "bob"
