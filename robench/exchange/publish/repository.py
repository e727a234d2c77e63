"""A leaderboard repository's settings and contributions: a file's name is its contributor,
checked as an identity (docs/publishing.md, "Take another's file or name")."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import unicodedata
from pathlib import Path
from typing import Optional

from robench.errors import MergeError
from robench.exchange.publish.common import (ACCEPTED, DEFAULT_SETTINGS, SETTINGS, contained,
                                             read_json, repository_root)

_SETTING_TYPES = {"title": (str,), "verify_sample": (int,), "verify_fraction": (int, float),
                  "verify_trial_timeout": (int, float), "verify_budget": (int, float),
                  "verify_allow": (dict,), "verify_exact": (bool,),
                  "max_contribution_mb": (int, float), "allow_replace": (list,)}


def settings(repo) -> dict:
    """Return leaderboard.json over the defaults, checked (no seed: a pull request could set it)."""
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
    if not all(isinstance(x, str) for x in conf["allow_replace"]):
        raise MergeError(f"{SETTINGS}: allow_replace must be a list of contribution file names "
                         "(contributions/NAME.db a pull request may replace)")
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
    """Return why a contribution file cannot be taken (by ``lstat``: never opened), or None."""
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


#: Unicode categories no contributor name may hold: control, format (bidi controls, zero-width
#: characters), private use, surrogates, unassigned, line and paragraph separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
#: Letters of other scripts a reader takes for Latin ones, and digits for letters, mapped to
#: them (from Unicode's confusables.txt; applied after case folding).
LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "н": "h", "і": "i",
    "ї": "i", "ј": "j", "к": "k", "ӏ": "l", "м": "m", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s",
    "т": "t", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w",
    "0": "o", "1": "l",
})
#: Scripts one name may mix: Japanese writes kanji, hiragana and katakana together.
_SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK"}


def skeleton(name: str) -> str:
    """Return what ``name`` looks like: NFKC, case folded, look-alike letters as Latin ones."""
    return unicodedata.normalize("NFKC", name).casefold().translate(LOOKALIKES)


def name_problem(name: str) -> Optional[str]:
    """Return why ``name`` (a contribution file's stem) cannot name a contributor, or None."""
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return (f"its name is not in Unicode normal form NFKC (it reads as {normal!r}); "
                "rename the file to that")
    bad = sorted({c for c in name if unicodedata.category(c) in REFUSED_CATEGORIES})
    if bad:
        return ("its name holds control, bidi, zero-width or unassigned characters ("
                + ", ".join(f"U+{ord(c):04X}" for c in bad[:5])
                + "): rename the file with visible characters only")
    words = (unicodedata.name(c, "UNKNOWN").split(" ")[0] for c in name if c.isalpha())
    scripts = sorted({_SCRIPT_GROUPS.get(w, w) for w in words})  # 'LATIN', 'CYRILLIC', ...
    if len(scripts) > 1:
        return (f"its name mixes scripts ({', '.join(s.lower() for s in scripts)}), which is "
                "how one name is made to look like another: rename the file in one script")
    return None


def contributions(repo) -> tuple[list[Path], dict]:
    """Return (pending contribution files, {name: why refused} of the others)."""
    repo = repository_root(repo)
    conf = settings(repo)
    folder = contained(repo, "contributions")
    done = accepted(repo)
    by_file = {r.get("file"): r for r in done.values()}
    seen = {skeleton(str(r.get("contributor"))): str(r.get("contributor")) for r in done.values()}
    ok, refused = [], {}
    for entry in sorted(folder.iterdir()):
        if not entry.name.endswith(".db"):
            continue
        why = contribution_problem(entry, conf["max_contribution_mb"])
        if why is None and contribution_sha256(entry) in done:
            continue  # accepted as it is
        name = entry.name[:-len(".db")]
        why = why or name_problem(name)
        earlier = by_file.get(entry.name)
        if why is None and earlier is not None and entry.name not in conf["allow_replace"]:
            why = (f"{entry.name} was accepted already (as {earlier.get('contributor')}'s, "
                   f"{earlier.get('accepted')}): a pull request may add contributions, never "
                   "change or replace one; send new results as a new file (a maintainer can "
                   "allow this replacement: allow_replace in leaderboard.json)")
        other = seen.get(skeleton(name))
        if why is None and other is not None and other != name:
            why = (f"its name {name!r} looks like contributor {other!r} (the same after case "
                   "folding and look-alike letters); rename the file to a name of your own")
        if why is not None:
            refused[entry.name] = why
            continue
        seen.setdefault(skeleton(name), name)
        ok.append(entry)
    return ok, refused


def pending(repo) -> list[Path]:
    """Return the pending contribution files (:func:`contributions` says why others are not)."""
    return contributions(repo)[0]


def changes_outside_contributions(repo, base: str) -> list[str]:
    """Return the paths changed outside ``contributions/`` since ``base`` (``git diff
    base...HEAD``): what governs the check must not be checked under its own rules."""
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
