"""What the publish modules share: the repository's paths and defaults, a step's result and its
report, paths confined to the repository, and the JSON and database files a step writes."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from robench.errors import MergeError
from robench.escaping import markdown_code, markdown_text

PUBLISHED = Path("published") / "robench.db"
ACCEPTED = Path("published") / "accepted.json"
STAGING = Path(".staging")
VERIFIED = STAGING / "verified.json"
SETTINGS = "leaderboard.json"
WHEELS = "wheels"
WORKFLOW = Path(".github") / "workflows" / "leaderboard.yml"
DEFAULT_SETTINGS = {"title": "robench leaderboard", "verify_sample": 10,
                    "verify_fraction": 0.10, "verify_trial_timeout": 900,
                    "verify_budget": 3600, "verify_allow": {"datasets": [], "models": []},
                    "verify_exact": False, "max_contribution_mb": 512, "allow_replace": []}
#: Characters a GitHub comment (and this report) may hold: 65,536; a margin for the last line.
REPORT_LIMIT = 65_000
#: Where the runner gets torch's CPU build (the CUDA build is gigabytes a CPU runner never uses).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The lock file a step holds while it runs (one step at a time per repository).
LOCK = ".robench-publish.lock"


@dataclass
class StepResult:
    """What one pipeline step found: ok, the report's markdown lines, rejected contributions."""

    step: str
    ok: bool = True
    lines: list = field(default_factory=list)
    rejected: dict = field(default_factory=dict)  # contribution file name -> reason

    def reject(self, name: str, reason: str) -> None:
        self.ok = False
        self.rejected[name] = reason
        # the report is Markdown for the job summary: a name is a code span, a reason (which
        # quotes names and values from the contribution) escaped prose, each one line
        self.lines.append(f"- **{markdown_code(name)}: rejected.** {markdown_text(reason)}")


def repository_root(repo) -> Path:
    """Return ``repo`` as a Path if it is a leaderboard repository (else one line why not)."""
    repo = Path(repo)
    if not (repo / SETTINGS).is_file() or not (repo / "contributions").is_dir():
        raise MergeError(f"{repo} is not a leaderboard repository (no {SETTINGS} or "
                         "contributions/); create one with `robench init-leaderboard DIR`")
    return repo


def read_json(repo, rel: Path, what: str):
    """Return a JSON file of the repository, a regular file inside it (one line if not JSON)."""
    path = contained(repo, rel)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise MergeError(f"{rel} is not a regular file; {what}")
    if info.st_size > 16 << 20:
        raise MergeError(f"{rel} is {info.st_size} bytes, more than a {what} can be")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise MergeError(f"{rel} is not JSON ({exc}); fix it or restore it from git") from None


def contained(repo, rel) -> Path:
    """Return ``repo / rel``, refusing a path that leaves the repository or passes through a
    symbolic link (git stores links: a committed ``site`` link would redirect a step)."""
    root = Path(repo).resolve()
    path = root
    for part in Path(rel).parts:
        if part in ("", ".", ".."):
            raise MergeError(f"{rel}: not a plain path inside the repository")
        path = path / part
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise MergeError(f"{path.relative_to(root)} is a symbolic link; robench "
                                 "writes only inside the repository: remove it")
        except FileNotFoundError:
            break
    full = root / rel
    if not full.resolve().is_relative_to(root):
        raise MergeError(f"{rel} resolves outside the repository; remove it")
    return full


def append_report(repo, result: StepResult) -> StepResult:
    """Append a step's findings to .staging/report.md, keeping it under REPORT_LIMIT."""
    path = contained(repo, STAGING / "report.md")
    path.parent.mkdir(exist_ok=True)
    text = (f"\n### {result.step}: {'passed' if result.ok else 'failed'}\n\n"
            + "\n".join(result.lines or ["- nothing to do"]) + "\n")
    room = REPORT_LIMIT - (path.stat().st_size if path.is_file() else 0)
    if len(text) > room:
        cut = f"\n\n(report cut at {REPORT_LIMIT:,} characters: run `robench publish " \
              f"{result.step} .` for the rest)\n"
        text = text[:max(0, room - len(cut))] + cut if room > len(cut) else ""
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return result


def journal_delete(path: Path) -> None:
    """Leave the database at ``path`` in rollback-journal mode: no ``-shm`` or ``-wal`` files."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()


def write_json(path: Path, value) -> None:
    """Write JSON to ``path`` by renaming a finished temporary file over it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
