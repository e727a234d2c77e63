"""One step at a time per repository, and what a killed step left
(robench.exchange.publish.lock)."""

from __future__ import annotations

import os
import shutil
import threading
import time

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
    new site, a folder moved aside, merge's work folder): the next step removes them under the
    lock, a link among them unlinked without following it, and none is published."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not robench's")
    made = [board / ".staging-new-k1l2", board / ".site-new-x9", board / ".site.old-4242",
            board / "published" / ".merging-ab12"]
    for folder in made:
        folder.mkdir()
        shutil.copyfile(honest, folder / "robench.db")
    (board / ".staging-new-link").symlink_to(outside, target_is_directory=True)
    shutil.copyfile(honest, board / "contributions" / "alice.db")
    assert publish.validate(board).ok
    assert not [p for p in made if os.path.lexists(p)]
    assert not os.path.lexists(board / ".staging-new-link")
    assert (outside / "keep.txt").read_text() == "not robench's"
    assert publish.verify(board, seed=5).ok
    assert publish.merge(board).ok
    assert sorted(p.name for p in (board / "published").iterdir()) == [
        "accepted.json", "robench.db"]
    assert [r["file"] for r in publish.accepted(board).values()] == ["alice.db"]
    ignored = (board / ".gitignore").read_text().split()
    assert {".staging-new-*/", ".site-new-*/", "published/.merging-*/"} <= set(ignored)
