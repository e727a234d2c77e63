"""One step at a time per repository: the lock a step holds, and what a step killed mid-way
left beside what it replaces (removed by the next step, under the lock)."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from robench.errors import MergeError
from robench.exchange.publish.common import LOCK, contained, repository_root

#: The repositories this thread holds the lock of, with how deep (re-entrant per thread).
_HELD = threading.local()


def locked(step):
    """Run a pipeline step holding the repository's lock (:func:`repository_lock`)."""

    @functools.wraps(step)
    def held(repo, *args, **kwargs):
        with repository_lock(repo):
            return step(repo, *args, **kwargs)

    return held


@contextmanager
def repository_lock(repo, wait: float = 0.0):
    """Hold the repository's lock (``fcntl.flock`` on :data:`LOCK`) for a step.

    A second ``robench publish`` on the same repository waits up to ``wait`` seconds, then
    refuses in one line; within one process the lock is re-entrant (``check`` holds it over
    its three steps).
    """
    root = repository_root(repo).resolve()
    held = _HELD.__dict__.setdefault("roots", {})
    if held.get(root):
        held[root] += 1
        try:
            yield
        finally:
            held[root] -= 1
        return
    path = contained(root, LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise MergeError(f"another robench publish is running on {repo} (it holds "
                                     f"{LOCK}); wait for it to finish, or pass --wait "
                                     "SECONDS") from None
                time.sleep(0.2)
        held[root] = 1
        try:
            clear_leftovers(root)  # no other step runs now: what a killed one left is stale
            yield
        finally:
            held.pop(root, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


#: The temporary entries steps make beside what they replace, by folder (relative to the
#: repository): ``validate``'s new staging folder, ``build``'s new site, the folders
#: :func:`replace_folder` moves aside, ``merge``'s work folder. A step killed hard (SIGKILL,
#: a runner that loses power) leaves them; the next step removes them under the lock.
LEFTOVERS = {".": (".staging-new-", ".site-new-", ".staging.old-", ".site.old-"),
             "published": (".merging-",)}


def clear_leftovers(repo) -> list[str]:
    """Remove what a step killed mid-way left (:data:`LEFTOVERS`); return their paths.

    Called with the repository's lock held, so no step that made them is still running. An
    entry is removed as what it is (a link is unlinked, never followed); a folder that is
    itself a link (a committed ``published`` link) is left for the steps to refuse.
    """
    root = Path(repo).resolve()
    removed = []
    for folder, prefixes in LEFTOVERS.items():
        base = root if folder == "." else root / folder
        try:
            if folder != ".":
                contained(root, folder)
            if not stat.S_ISDIR(os.lstat(base).st_mode):
                continue
        except (MergeError, FileNotFoundError):
            continue
        for entry in os.scandir(base):
            if not entry.name.startswith(prefixes):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(str(Path(entry.path).relative_to(root)))
    return removed


def replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` where ``target`` is (both inside the repository), at once."""
    old = None
    if os.path.lexists(target):
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
