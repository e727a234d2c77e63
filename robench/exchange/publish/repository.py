"""A leaderboard repository's settings and contributions: ``leaderboard.json`` checked, the
record of accepted contributions, which contribution files are pending (regular files under the
size cap whose content is not yet accepted), and what a pull request changes outside
``contributions/``."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Optional

from robench.errors import MergeError
from robench.exchange.publish.common import (ACCEPTED, DEFAULT_SETTINGS, SETTINGS, contained,
                                             read_json, repository_root)

_SETTING_TYPES = {"title": (str,), "verify_sample": (int,), "verify_fraction": (int, float),
                  "verify_trial_timeout": (int, float), "verify_budget": (int, float),
                  "verify_allow": (dict,), "verify_exact": (bool,),
                  "max_contribution_mb": (int, float)}


def settings(repo) -> dict:
    """Return the repository's settings (leaderboard.json over the defaults), checked.

    There is no sample seed among them: the verify step draws its own (a seed in a file of
    the repository is one a pull request can read and change).
    """
    found = read_json(repo, Path(SETTINGS), "the leaderboard's settings")
    if not isinstance(found, dict):
        raise MergeError(f"{SETTINGS} must hold a JSON object of settings, found "
                         f"{type(found).__name__}; e.g. {json.dumps(DEFAULT_SETTINGS)}")
    conf = {**DEFAULT_SETTINGS, **found}
    for key, types in _SETTING_TYPES.items():
        value = conf[key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise MergeError(f"{SETTINGS}: {key} must be {' or '.join(t.__name__ for t in types)}"
                             f", found {json.dumps(value)}")
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
                and not 0 < value < float("inf")):
            raise MergeError(f"{SETTINGS}: {key} must be above 0, found {value}")
    if conf["verify_fraction"] > 1:
        raise MergeError(f"{SETTINGS}: verify_fraction is a share of the trials (0-1], found "
                         f"{conf['verify_fraction']}")
    allow = conf["verify_allow"]
    if set(allow) - {"datasets", "models"} or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in allow.values()):
        raise MergeError(f"{SETTINGS}: verify_allow must be {{\"datasets\": [names], "
                         "\"models\": [names]}")
    return conf


def accepted(repo) -> dict:
    """Return {sha256: record} of the contributions merged into the published database."""
    found = read_json(repo, ACCEPTED, "the record of accepted contributions")
    if found is None:
        return {}
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise MergeError(f"{ACCEPTED} must hold a JSON object {{sha256: record}}, found "
                         f"{type(found).__name__}; restore it from git")
    return found


def contribution_problem(path: Path, limit_mb: float) -> Optional[str]:
    """Return why a contribution file cannot be taken (not a regular file, too big), or None.

    Decided on the entry itself (``lstat``: a link, a FIFO or a device is never opened).
    """
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link; a contribution is a database file in contributions/"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file (a FIFO, device or folder)"
    if info.st_size > limit_mb * 1e6:
        return (f"it is {info.st_size / 1e6:.0f} MB, more than the {limit_mb:g} MB the "
                "leaderboard takes (max_contribution_mb in leaderboard.json)")
    if info.st_size == 0:
        return "it is empty (0 bytes)"
    return None


def contribution_sha256(path: Path) -> str:
    """Return the sha256 of a contribution, opened without following a link or blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped since it was looked at
            raise MergeError(f"{path.name} is not a regular file")
        h = hashlib.sha256()
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def contributions(repo) -> tuple[list[Path], dict]:
    """Return (pending regular contribution files, {name: why refused} of the others)."""
    repo = repository_root(repo)
    limit = settings(repo)["max_contribution_mb"]
    folder = contained(repo, "contributions")
    done = accepted(repo)
    ok, refused = [], {}
    for entry in sorted(folder.iterdir()):
        if not entry.name.endswith(".db"):
            continue
        why = contribution_problem(entry, limit)
        if why is not None:
            refused[entry.name] = why
        elif contribution_sha256(entry) not in done:
            ok.append(entry)
    return ok, refused


def pending(repo) -> list[Path]:
    """Return the contribution files whose content has not been accepted yet, by name (regular
    files only: :func:`contributions` says why another entry is refused)."""
    return contributions(repo)[0]



def changes_outside_contributions(repo, base: str) -> list[str]:
    """Return the paths a pull request changes outside ``contributions/``, against ``base``.

    ``base`` is the commit the pull request goes into (the workflow passes the base branch's
    commit); the pull request's own changes are ``git diff base...HEAD`` (from where it left
    the base to what is checked out), renames as a removal and an addition. Settings
    (``leaderboard.json``: ``verify_fraction``, ``verify_allow``, ...), ``requirements.txt``,
    the workflow and the published files govern the check, so a pull request that changes
    them must not be checked under its own rules.
    """
    root = repository_root(repo).resolve()
    if not base or base.startswith("-") or any(c.isspace() or not c.isprintable()
                                                for c in base):
        raise MergeError(f"--base must name a git commit or branch, found {base!r}")
    try:
        proc = subprocess.run(["git", "-C", str(root), "diff", "--name-only", "-z",
                               "--no-renames", "--relative", f"{base}...HEAD", "--"],
                              capture_output=True, timeout=300)
    except FileNotFoundError:
        raise MergeError("--base compares commits with git, which is not installed") from None
    if proc.returncode != 0:
        why = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])
        raise MergeError(f"--base {base}: git cannot compare it with HEAD ({why[-1]}); fetch "
                         "the base commit (actions/checkout with fetch-depth: 0)")
    paths = [p for p in proc.stdout.decode("utf-8", "replace").split("\0") if p]
    return sorted(p for p in paths if not p.startswith("contributions/"))
