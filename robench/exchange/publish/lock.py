"""One step at a time per repository: the lock a step holds, and the marked folders a step
killed mid-way left (removed by the next step, under the lock)."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import stat
import tempfile
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
    """Hold the repository's :data:`LOCK` for a step, waiting ``wait`` s; re-entrant per thread."""
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


#: The temporary folders steps make beside what they replace, by folder (relative to the
#: repository): ``validate``'s new staging folder, ``build``'s new site, the folders
#: :func:`replace_folder` moves aside, ``merge``'s work folder. A step killed hard (SIGKILL,
#: a runner that loses power) leaves them; the next step removes them under the lock.
LEFTOVERS = {".": (".staging-new-", ".site-new-", ".staging.old-", ".site.old-"),
             "published": (".merging-",)}
#: The file inside every folder robench makes with a :data:`LEFTOVERS` prefix: a folder of
#: such a name without it is someone else's, and stays.
MARKER = ".robench-temporary"


def made_folder(prefix: str, parent: Path) -> Path:
    """Make a new temporary folder in ``parent`` named ``prefix...``, marked as robench's."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (folder / MARKER).write_text("made by robench publish: removed by the next step if a "
                                 "step was killed before it removed it\n", encoding="utf-8")
    return folder


def _marked(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(os.path.join(path, MARKER)).st_mode)
    except OSError:
        return False


def clear_leftovers(repo) -> list[str]:
    """Remove the marked folders a killed step left (:data:`LEFTOVERS`); return their paths."""
    root = Path(repo).resolve()
    removed = []
    for folder, prefixes in LEFTOVERS.items():
        try:
            base = contained(root, folder)
            if not stat.S_ISDIR(os.lstat(base).st_mode):
                continue
        except (MergeError, FileNotFoundError):
            continue
        for entry in os.scandir(base):
            if (entry.name.startswith(prefixes) and entry.is_dir(follow_symlinks=False)
                    and _marked(entry.path)):
                shutil.rmtree(entry.path)
                removed.append(str(Path(entry.path).relative_to(root)))
    return removed


def replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` (from :func:`made_folder`) where ``target`` is, unmarked, at once."""
    old = None
    if os.path.lexists(target):
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        if target.is_dir() and not target.is_symlink():
            (target / MARKER).write_text("", encoding="utf-8")  # robench's to remove
        os.replace(target, old)
    os.replace(new, target)
    (target / MARKER).unlink(missing_ok=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
