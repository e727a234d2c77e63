"""One step at a time per repository, and what a killed step left
(robench.exchange.publish.lock)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from robench.exchange import publish
from tests.exchange.boards import one_line_error, publish_cli


def test_a_second_publish_refuses_while_one_runs_and_waits_when_asked(board):
    """Issue 40, 7: two `publish run` 2 s apart on one directory."""
    with publish.repository_lock(board):
        out = publish_cli("validate", board, timeout=60)
        one_line_error(out)
        assert "another robench publish is running" in out.stderr
    # a second run that is told to wait goes through once the first one is done
    holder_done = threading.Event()

    def hold():
        with publish.repository_lock(board):
            time.sleep(2)
        holder_done.set()

    t = threading.Thread(target=hold)
    t.start()
    time.sleep(0.3)
    out = publish_cli("validate", board, "--wait", "60", timeout=120)
    t.join()
    assert out.returncode == 0 and holder_done.is_set(), out.stderr


def test_what_a_killed_step_left_is_removed_by_the_next_and_never_published(board, honest,
                                                                           tmp_path):
    """A hard kill mid-step leaves hidden temporary folders (validate's new staging, build's
    new site, a folder moved aside, merge's work folder), each holding robench's marker: the
    next step removes them under the lock, and none is published. A folder or link a person
    named like one (no marker) is left alone, a link never followed (issue 51, 6: such folders
    were deleted without a word)."""
    from robench.exchange.publish.lock import MARKER

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not robench's")
    made = [board / ".staging-new-k1l2", board / ".site-new-x9", board / ".site.old-4242",
            board / "published" / ".merging-ab12"]
    for folder in made:
        folder.mkdir()
        shutil.copyfile(honest, folder / "robench.db")
        (folder / MARKER).write_text("")
    theirs = [board / ".site-new-notes", board / "published" / ".merging-keep"]
    for folder in theirs:
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
    (board / ".staging-new-link").symlink_to(outside, target_is_directory=True)
    shutil.copyfile(honest, board / "contributions" / "alice.db")
    assert publish.validate(board).ok
    assert not [p for p in made if os.path.lexists(p)]
    assert all((p / "notes.txt").read_text() == "mine" for p in theirs)
    assert (board / ".staging-new-link").is_symlink()
    assert (outside / "keep.txt").read_text() == "not robench's"
    assert not (board / ".staging" / MARKER).exists()  # .staging is no leftover
    assert publish.verify(board, seed=5).ok
    assert publish.merge(board).ok
    assert sorted(p.name for p in (board / "published").iterdir()) == [
        ".merging-keep", "accepted.json", "robench.db"]
    assert [r["file"] for r in publish.accepted(board).values()] == ["alice.db"]
    assert publish.clear_leftovers(board) == []  # the steps removed their own folders
    ignored = (board / ".gitignore").read_text().split()
    assert {".staging-new-*/", ".site-new-*/", "published/.merging-*/"} <= set(ignored)


def test_only_folders_robench_made_are_leftovers(board):
    """The rule alone: a marked folder goes; the same names without the marker, a file and a
    link stay; a folder moved aside by replace_folder is marked (a kill then leaves it
    removable), the one put in place is not."""
    from robench.exchange.publish.lock import MARKER, made_folder, replace_folder

    ours = made_folder(".site-new-", board)
    mine = board / ".site-new-notes"
    mine.mkdir()
    (board / ".staging.old-file").write_text("a file")
    (board / ".site.old-link").symlink_to(ours, target_is_directory=True)
    assert publish.clear_leftovers(board) == [ours.name]
    assert mine.is_dir() and (board / ".staging.old-file").is_file()
    assert (board / ".site.old-link").is_symlink()

    site = board / "site"
    site.mkdir()
    (site / "index.html").write_text("old")
    new = made_folder(".site-new-", board)
    (new / "index.html").write_text("new")
    moved = []
    real_replace = os.replace

    def spy(src, dst):  # the folder moved aside holds the marker when it is moved
        moved.append((os.path.basename(dst), (Path(src) / MARKER).exists()))
        real_replace(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", spy)
        replace_folder(new, site)
    assert moved[0][0].startswith(".site.old-") and moved[0][1]
    assert (site / "index.html").read_text() == "new" and not (site / MARKER).exists()
