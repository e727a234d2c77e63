"""A leaderboard repository that runs itself: contributions in, checked, merged, published.

``robench init-leaderboard DIR`` writes the repository (:func:`init_repository`) from the
templates in ``robench/exchange/templates/`` (package data); ``robench publish STEP DIR`` runs
one step of its pipeline, the same in CI and on a laptop. Each step is a function here that
calls robench's own functions (merge, verify, diff, the site builder) and reads what they
return; none runs a robench command or reads its printed output.

``validate``  every pending contribution (a regular ``contributions/*.db`` file under the size
              cap whose content is not yet accepted) is merged into a staging copy of the
              published database: the source must fit the schema whole, every trial must agree
              with itself (and with the data set's labels where the data is installed here with
              the same content), every score must come with its trials and be what this
              installation's metric code recomputes from them, and nothing may conflict with
              what is published or with another pending contribution. Each rejection says
              which of these failed.
``verify``    every trial of each pending contribution must be re-runnable here (unless
              ``verify_allow`` names its data set or model); a sample of them, drawn from a seed
              drawn by the check itself, covering every (model, protocol, kind) stratum and
              weighted by influence, is re-run (:func:`robench.exchange.verify.verify` on a copy
              whose own verification records are dropped), each with the thread count it ran
              with, under its time limit and a total budget. A trial that does not reproduce,
              or cannot be re-run, rejects the contribution. What it found is kept in
              ``.staging/verified.json`` for ``merge``.
``diff``      the published scores are compared with the staging ones
              (:func:`robench.stats.diff.diff_scores`): a score that got worse beyond its
              interval fails the check. The report lists only the scores that change.
``merge``     each pending contribution that merges cleanly *and* passed ``verify`` on this
              content is merged into the published database, all or nothing: the merge runs
              on a copy that replaces the published file only when every contribution passed;
              the pipeline's verification records go in with it, and the contributions are
              recorded in ``published/accepted.json``. A rejected contribution changes nothing.
``build``     the site is rebuilt from the published database into a new folder that replaces
              ``site/`` when it is complete.
``deploy``    the site is copied to a folder (``--to``; the GitHub workflow hands ``site/`` to
              GitHub Pages instead).

``check`` runs validate, verify and diff (what a pull request runs); ``run`` runs check, merge and
build (what the main branch runs). Every step appends its findings to ``.staging/report.md``
(the job summary; Markdown with every name from a contribution escaped, capped under
:data:`REPORT_LIMIT` characters). A contribution is named after its file
(``contributions/alice.db`` is alice's); provenance is the file's name, never what the database
says about itself.

Every step holds a lock on the repository (:func:`repository_lock`), checks the shape of the
repository's JSON files before it writes anything, and writes only inside the repository
(:func:`contained`: no path through a symbolic link).

The site builder lives in a room above this one (:mod:`robench.present.site`), so
:func:`build` takes it as an argument; :func:`robench.cli.publish.steps` binds it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import stat
import string
import subprocess
import sys
import tempfile
import time
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

from robench.errors import MergeError
from robench.escaping import markdown_cell, markdown_code, markdown_text
from robench.storage.verification import PIPELINE, verifications
from robench.exchange.merge import merge_databases
from robench.exchange.verify import (data_inconsistencies, default_sample, difference_text,
                                     missing, verify as verify_trials)
from robench.plugins import get_registry
from robench.stats.diff import diff_scores
from robench.storage.readonly import readonly_uri
from robench.storage.store import Store
import robench

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
                    "verify_exact": False, "max_contribution_mb": 512}
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


def _root(repo) -> Path:
    repo = Path(repo)
    if not (repo / SETTINGS).is_file() or not (repo / "contributions").is_dir():
        raise MergeError(f"{repo} is not a leaderboard repository (no {SETTINGS} or "
                         "contributions/); create one with `robench init-leaderboard DIR`")
    return repo


def _read_json(repo, rel: Path, what: str):
    """Return a JSON file of the repository, read as a regular file inside it (one line if
    it is not JSON)."""
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


_SETTING_TYPES = {"title": (str,), "verify_sample": (int,), "verify_fraction": (int, float),
                  "verify_trial_timeout": (int, float), "verify_budget": (int, float),
                  "verify_allow": (dict,), "verify_exact": (bool,),
                  "max_contribution_mb": (int, float)}


def settings(repo) -> dict:
    """Return the repository's settings (leaderboard.json over the defaults), checked.

    There is no sample seed among them: the verify step draws its own (a seed in a file of
    the repository is one a pull request can read and change).
    """
    found = _read_json(repo, Path(SETTINGS), "the leaderboard's settings")
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
    found = _read_json(repo, ACCEPTED, "the record of accepted contributions")
    if found is None:
        return {}
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise MergeError(f"{ACCEPTED} must hold a JSON object {{sha256: record}}, found "
                         f"{type(found).__name__}; restore it from git")
    return found


def contained(repo, rel) -> Path:
    """Return ``repo / rel``, refusing a path that leaves the repository.

    Every existing part of it below the repository must be a real folder or file, never a
    symbolic link (git stores links: a committed ``site`` or ``.staging`` link would make a
    step write wherever it points), and the path must resolve inside the repository.
    """
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
    import hashlib

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
    repo = _root(repo)
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


#: The repositories this thread holds the lock of, with how deep (re-entrant per thread).
_HELD = threading.local()


def _locked(step):
    """Run a pipeline step holding the repository's lock (:func:`repository_lock`)."""
    import functools

    @functools.wraps(step)
    def locked(repo, *args, **kwargs):
        with repository_lock(repo):
            return step(repo, *args, **kwargs)

    return locked


@contextmanager
def repository_lock(repo, wait: float = 0.0):
    """Hold the repository's lock (``fcntl.flock`` on :data:`LOCK`) for a step.

    A second ``robench publish`` on the same repository waits up to ``wait`` seconds, then
    refuses in one line; within one process the lock is re-entrant (``check`` holds it over
    its three steps).
    """
    import fcntl

    root = _root(repo).resolve()
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
#: :func:`_replace_folder` moves aside, ``merge``'s work folder. A step killed hard (SIGKILL,
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


def _replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` where ``target`` is (both inside the repository), at once."""
    old = None
    if os.path.lexists(target):
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _report(repo, result: StepResult) -> StepResult:
    """Append a step's findings to .staging/report.md, keeping it under REPORT_LIMIT."""
    path = contained(repo, STAGING / "report.md")
    path.parent.mkdir(exist_ok=True)
    mark = "passed" if result.ok else "failed"
    text = f"\n### {result.step}: {mark}\n\n" + "\n".join(result.lines or ["- nothing to do"])
    text += "\n"
    used = path.stat().st_size if path.is_file() else 0
    room = REPORT_LIMIT - used
    if len(text) > room:
        cut = f"\n\n(report cut at {REPORT_LIMIT:,} characters: run `robench publish " \
              f"{result.step} .` for the rest)\n"
        text = text[:max(0, room - len(cut))] + cut if room > len(cut) else ""
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return result


def _journal_delete(path: Path) -> None:
    """Leave the database at ``path`` in rollback-journal mode: one self-contained file.

    Robench writes in WAL mode; a WAL database opened read-only leaves ``-shm`` and ``-wal``
    files beside it. The pipeline's databases are committed and read by others, so they are
    left in DELETE mode, whose readers leave nothing.
    """
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = DELETE").fetchone()
    finally:
        conn.close()


def _copy_database(source: Path, target: Path) -> None:
    """Copy an SQLite database consistently (backup API: its WAL included), read-only."""

    src = sqlite3.connect(readonly_uri(source), uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def _fresh_staging(repo: Path) -> Path:
    """Replace .staging with a new folder holding a copy of the published database."""
    staging = contained(repo, STAGING)
    new = Path(tempfile.mkdtemp(prefix=".staging-new-", dir=repo))
    try:
        (new / "report.md").write_text("## robench leaderboard check\n", encoding="utf-8")
        published = contained(repo, PUBLISHED)
        if published.is_file():
            _copy_database(published, new / "robench.db")
        _replace_folder(new, staging)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return staging


def _label(t: dict) -> str:
    return " ".join(str(t.get(c)) for c in ("dataset", "model", "clusterer", "protocol", "kind",
                                             "repeat") if t.get(c) not in (None, ""))


def _problems(report) -> list[str]:
    """Return why a contribution's merge (a MergeReport of it alone) rejects it, truthfully."""
    counts = report.sources[0] if report.sources else {}
    problems = []
    recomputed = [c for c in report.conflicts if c.get("recomputed")]
    stored = [c for c in report.conflicts if not c.get("recomputed")]
    if recomputed:
        def claimed(c):
            return ", ".join(f"{col} claimed {c['incoming'][col]}, recomputed "
                             f"{c['stored'][col]}" for col in c["columns"])

        problems.append(
            f"{len(recomputed)} score(s) are not what robench recomputes from the "
            "contribution's own trials: "
            + "; ".join(f"{c['label']}: {claimed(c)}" for c in recomputed[:5]))
    if stored:
        problems.append(
            f"{len(stored)} row(s) conflict with rows already there (same identity, different "
            "content): " + "; ".join(
                f"{c['kind'].replace('_', ' ')} {c['label']} differs in "
                f"{', '.join(c['columns'])} from {c['kept']}" for c in stored[:5]))
    if counts.get("scores_without_trials"):
        problems.append(f"{counts['scores_without_trials']} score(s) without the trials "
                        "they were computed from")
    for u in report.unchecked:
        problems.append(f"{u['n']} score(s) of metric '{u['metric']}' {u['version']} "
                        f"cannot be recomputed here ({u['why']})")
    return problems


def _merge_checked(path: Path, target: Path, registry=None):
    """Merge one contribution into ``target``; return (MergeReport or None, problems).

    ``merge_databases`` refuses a trial that contradicts itself (its accuracy against its own
    correct bits, per-class accuracies and test class counts) before it copies anything.
    """

    try:
        report = merge_databases([path], target, [path.stem], registry=registry)
    except (MergeError, ValueError, OSError, sqlite3.DatabaseError) as exc:
        return None, [f"it cannot be merged: {exc}"]
    return report, _problems(report)


def _against_data(path: Path, registry) -> list:
    """Return what a contribution's trials contradict in the data installed here (their
    correct bits against the labels on their partition's test rows), as problems."""

    with Store(path, readonly=True) as store:
        rows = store.trials(status="ok")
    found = data_inconsistencies(rows, registry)
    return [f"{len(found)} trial(s) contradict the data they name: " + "; ".join(
        f"{_label(t)}: {why}" for t, why in found[:5])] if found else []


def _registry(registry):
    return registry if registry is not None else get_registry()


def changes_outside_contributions(repo, base: str) -> list[str]:
    """Return the paths a pull request changes outside ``contributions/``, against ``base``.

    ``base`` is the commit the pull request goes into (the workflow passes the base branch's
    commit); the pull request's own changes are ``git diff base...HEAD`` (from where it left
    the base to what is checked out), renames as a removal and an addition. Settings
    (``leaderboard.json``: ``verify_fraction``, ``verify_allow``, ...), ``requirements.txt``,
    the workflow and the published files govern the check, so a pull request that changes
    them must not be checked under its own rules.
    """
    root = _root(repo).resolve()
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


@_locked
def validate(repo, registry=None, base: Optional[str] = None) -> StepResult:
    """Merge every pending contribution into a fresh staging copy of the published database.

    With ``base`` (a pull request's check: the commit it goes into), a pull request that
    changes anything outside ``contributions/`` is refused first, before its settings are
    read (:func:`changes_outside_contributions`).
    """
    repo = _root(repo)
    outside = [] if base is None else changes_outside_contributions(repo, base)
    if outside:
        _fresh_staging(repo)
        result = StepResult("validate", ok=False)
        shown = ", ".join(markdown_code(p) for p in outside[:5]) + (
            f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        result.lines.append(
            f"- **refused: this pull request changes {len(outside)} path(s) outside "
            f"contributions/** ({shown}); a pull request may add or change only "
            "contributions: settings, requirements, the workflow and the published files "
            "change by a maintainer's own push to main")
        return _report(repo, result)
    settings(repo)  # every JSON file of the repository checked before anything is written
    todo, refused = contributions(repo)
    staging = _fresh_staging(repo)
    result = StepResult("validate")
    if base is not None:
        result.lines.append(f"- only contributions/ changed since {markdown_code(base)}")
    for name, why in refused.items():
        result.reject(name, why)
    target = staging / "robench.db"
    for path in todo:
        # each on its own copy first: a contribution rejected for itself never reaches the
        # staging database, so the next one is not blamed for conflicting with it
        with tempfile.TemporaryDirectory(prefix="robench-validate-") as tmp:
            alone = Path(tmp) / "robench.db"
            if target.is_file():
                shutil.copyfile(target, alone)
            report, problems = _merge_checked(path, alone, registry)
            if not problems:
                problems = _against_data(path, _registry(registry))
            if not problems:
                shutil.copyfile(alone, target)
        if problems:
            result.reject(path.name, "; ".join(problems))
            continue
        counts = report.sources[0] if report.sources else {}
        result.lines.append(f"- {markdown_code(path.name)} ({markdown_code(path.stem)}): "
                            f"merges cleanly: {counts.get('trials', 0)} trial(s), "
                            f"{counts.get('scores', 0)} score(s) new, "
                            f"{counts.get('trials_duplicate', 0)} trial(s) already published")
    if target.is_file():
        _journal_delete(target)
    return _report(repo, result)


def _verified(repo) -> dict:
    found = _read_json(repo, VERIFIED, "the verify step's findings")
    return found if isinstance(found, dict) else {}


def _allowed(entry: dict, allow: dict) -> bool:
    """Whether a refused trial's data set or model is one the maintainer allows unverified."""
    return (entry.get("dataset") in allow.get("datasets", ())
            or entry.get("model") in allow.get("models", ()))


def _unrunnable(rows: list, allow: dict, registry) -> tuple[list, list]:
    """Return ([(trial, why)] not re-runnable here, [(trial, why)] allowed so).

    Every trial of the contribution is looked at, not only the sample: a trial on data (or
    with a protocol or clusterer) that is not installed here can never be checked. (A trial
    whose model is not installed is refused by the re-run itself, and counts the same way.)
    """

    against, allowed = [], []
    for row in rows:
        spec = row.get("spec")
        why = "no stored spec" if not isinstance(spec, dict) else missing(spec, registry)
        if why is not None:
            (allowed if _allowed(row, allow) else against).append((row, why))
    return against, allowed


def _drop_verifications(copy: Path) -> None:
    """Delete the verification records a contribution brought from the verifier's copy: the
    record the check reads back must be the one it wrote."""
    conn = sqlite3.connect(copy)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'verifications'").fetchone():
            with conn:
                conn.execute("DELETE FROM verifications")
    finally:
        conn.close()


@_locked
def verify(repo, registry=None, seed: Optional[int] = None) -> StepResult:
    """Re-run a sample of each pending contribution's trials here and record what was found.

    The sample's seed is drawn here (``secrets``) unless ``seed`` is given (tests): nobody can
    know before the check which trials it re-runs; it is recorded in each verification. The
    sample covers every (model, protocol, kind) stratum, is drawn by influence, and is as large
    as ``verify_sample`` / ``verify_fraction`` of leaderboard.json say. Each re-run has its
    run's time limit (at most ``verify_trial_timeout``), all of them ``verify_budget``. A trial
    that cannot be re-run here (its data, model, protocol or clusterer is not installed, or it
    does not finish in time) rejects the contribution unless its data set or model is named in
    ``verify_allow``.
    """

    repo = _root(repo)
    registry = _registry(registry)
    conf = settings(repo)
    todo, _ = contributions(repo)
    result = StepResult("verify")
    seed = secrets.randbits(32) if seed is None else int(seed)
    result.lines.append(f"- sample seed {seed} (drawn by this check, recorded in each "
                        "verification)")
    work = contained(repo, STAGING / "verify")
    work.mkdir(parents=True, exist_ok=True)
    found = _verified(repo)
    allow = conf["verify_allow"]
    began = time.monotonic()  # one budget for the whole check, not one per contribution
    for path in todo:
        sha = contribution_sha256(path)
        found[sha] = {"file": path.name, "ok": False}
        copy = work / path.name  # verify records what it checked: never in the contribution
        shutil.copyfile(path, copy)
        try:
            _drop_verifications(copy)
            with Store(copy, readonly=True) as store:
                rows = store.trials(status="ok")
            against, allowed = _unrunnable(rows, allow, registry)
        except Exception as exc:  # noqa: BLE001 - a database validate did not refuse
            result.reject(path.name, f"it cannot be verified: {type(exc).__name__}: {exc}")
            continue
        total = len(rows)
        if against:
            result.reject(path.name, f"{len(against)} of its {total} trial(s) cannot be "
                          "re-run here, so they count for nothing: " + "; ".join(
                              f"{_label(t)}: {why}" for t, why in against[:5])
                          + " (a maintainer can allow a data set or model by name: "
                          "verify_allow in leaderboard.json)")
            continue
        if not total:
            result.lines.append(f"- {markdown_code(path.name)}: no trial to verify")
            continue
        n = default_sample(rows, conf["verify_fraction"], conf["verify_sample"])
        try:
            with Store(copy) as store:
                check = verify_trials(store, registry, sample=n, seed=seed, weighted=True,
                                      trial_timeout=conf["verify_trial_timeout"],
                                      budget=max(0.0, conf["verify_budget"]
                                                 - (time.monotonic() - began)),
                                      exact_only=conf["verify_exact"])
                record = next(r for r in verifications(store) if r["id"] == check.record_id)
        except Exception as exc:  # noqa: BLE001 - any failure rejects, with its reason
            result.reject(path.name, f"it cannot be verified: {type(exc).__name__}: {exc}")
            continue
        _journal_delete(copy)
        trials = check.trials
        mismatched = [t for t in trials if t["outcome"] == "mismatch"]
        refused = [t for t in trials if t["outcome"] == "refused"]
        counted = [t for t in refused if t.get("timed_out") or not _allowed(t, allow)]
        matched = check.count("match")
        loose = sum(t.get("mode") == "tolerance" for t in trials)
        summary = (f"verified {matched} of {matched + len(mismatched)} re-run trial(s) on "
                   f"{check.host} ({check.device}); {len(refused)} refused; "
                   f"{len(trials) - len(refused) - loose} compared exactly, {loose} within the "
                   "tolerance (their runs name another device, torch or CPU)")
        if mismatched:
            result.reject(path.name, f"{len(mismatched)} of {len(trials)} sampled trial(s) do "
                          f"not reproduce here ({summary}): " + "; ".join(
                              f"{t['key'][:16]} ({_label(t)}): "
                              + "; ".join(difference_text(d) for d in t["differences"][:3])
                              for t in mismatched[:5]))
        elif counted:
            result.reject(path.name, f"{len(counted)} of {len(trials)} sampled trial(s) could "
                          "not be re-run here: " + "; ".join(
                              f"{_label(t)}: {t.get('reason')}" for t in counted[:5]))
        else:
            note = (f"; {len(refused)} refused but allowed by verify_allow"
                    if refused else "")
            result.lines.append(
                f"- {markdown_code(path.name)}: {markdown_text(summary)}: verified {matched} "
                f"of {len(trials)} sampled trial(s) of {total} ({len(trials) / total:.0%}, "
                f"every model, protocol and partition kind; drawn by influence, seed {seed})"
                f"{markdown_text(note)}")
            record = {k: v for k, v in record.items() if k != "id"}
            found[sha] = {"file": path.name, "ok": True, "record": record}
        for t, why in allowed[:5]:
            result.lines.append(f"- {markdown_code(path.name)}: "
                                f"{markdown_text(_label(t))} cannot be re-run here "
                                f"({markdown_text(why)}); allowed by verify_allow")
    _write_json(contained(repo, VERIFIED), found)
    return _report(repo, result)


def _scores(path: Path) -> list:
    with Store(path, readonly=True) as store:
        rows = store.scores()
        for row, versions in zip(rows, store.score_versions(rows)):
            row["versions"] = versions
    return rows


@_locked
def diff(repo) -> StepResult:
    """Compare the published scores with the staging ones; list only what changes."""

    repo = _root(repo)
    result = StepResult("diff")
    staging = contained(repo, STAGING / "robench.db")
    published = contained(repo, PUBLISHED)
    if not staging.is_file():
        result.ok = False
        result.lines.append("- no staging database: run `robench publish validate` first")
        return _report(repo, result)
    if not published.is_file():
        result.lines.append("- nothing published yet: every score is new")
        return _report(repo, result)
    before, after = _scores(published), _scores(staging)
    compared = diff_scores(before, after)
    changed = [c for c in compared if c["a"] != c["b"] or c["decision"] == "not comparable"]
    new = len(after) - len(compared)
    result.lines.append(f"- {len(compared) - len(changed)} published score(s) unchanged by "
                        f"the contribution(s), {len(changed)} changed, {max(new, 0)} new")
    if changed:
        result.lines += ["", "| data set | model | clusterer | metric | score | published | "
                         "with the contribution(s) | change [interval] | decision |",
                         "|---|---|---|---|---|---|---|---|---|"]
        for c in changed:
            change = ("" if c["change"] is None else
                      f"{c['change']:+.4g} [{c['low']:+.4g}, {c['high']:+.4g}]")
            decision = c["decision"] + (f" ({c['reason']})" if c.get("reason") else "")
            # names come from the contributions: code spans; numbers and decisions are ours
            names = [markdown_cell(v) for v in (c["dataset"], c["model"], c["clusterer"],
                                                 c["metric"], c["score"])]
            numbers = ["" if c["a"] is None else f"{c['a']:.4g}",
                       "" if c["b"] is None else f"{c['b']:.4g}", change,
                       markdown_text(decision).replace("|", "\\|")]
            result.lines.append("| " + " | ".join(names + numbers) + " |")
    if any(c["decision"] == "worse" for c in changed):
        result.ok = False
        result.lines.append("- **a published score got worse beyond its interval** (rows marked "
                            "worse above)")
    return _report(repo, result)


def _write_json(path: Path, value) -> None:
    """Write JSON to ``path`` by renaming a finished temporary file over it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def _add_verification(target: Path, record: dict, contributor: str, source: str) -> None:
    """Insert the pipeline's verification of one contribution into ``target``.

    Its ``recorded_in`` says it is the pipeline's (:func:`robench.storage.verification.
    pipeline_record`); a contribution's own records were marked as its contributor's by the
    merge, so a page never takes one of those for the leaderboard's.
    """
    row = dict(record, contributor=contributor,
               recorded_in=f"{PIPELINE}: publish verify of {source}")
    conn = sqlite3.connect(target)
    try:
        present = {r[1] for r in conn.execute('PRAGMA table_info("verifications")')}
        row = {k: v for k, v in row.items() if k in present}
        row = {k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()}
        with conn:
            conn.execute(f'INSERT OR IGNORE INTO verifications ({", ".join(row)}) '
                         f'VALUES ({", ".join("?" * len(row))})', list(row.values()))
    finally:
        conn.close()


@_locked
def merge(repo, registry=None) -> StepResult:
    """Merge the pending contributions into the published database, all or nothing.

    A contribution is merged only when it merges cleanly (what ``validate`` checks, checked
    again here) and ``verify`` passed on exactly this content (``.staging/verified.json``).
    The merge runs on a copy of the published database; only when every pending contribution
    passed does the copy replace it and ``accepted.json`` record them. Otherwise nothing
    published changes and nothing is recorded as accepted.
    """
    repo = _root(repo)
    result = StepResult("merge")
    record = accepted(repo)  # every JSON file's shape checked before anything is written
    settings(repo)
    published = contained(repo, PUBLISHED)
    record_path = contained(repo, ACCEPTED)
    todo, refused = contributions(repo)
    for name, why in refused.items():
        result.reject(name, why)
    if not todo and result.ok:
        return _report(repo, result)
    checked = _verified(repo)
    published.parent.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".merging-", dir=published.parent))
    try:
        candidate = work / "robench.db"
        if published.is_file():
            _copy_database(published, candidate)
        merged = []
        for path in todo:
            sha = contribution_sha256(path)
            verified = checked.get(sha) or {}
            if not verified.get("ok"):
                result.reject(path.name, "its trials were not verified here"
                              if not verified else "its verification failed (see verify)")
                continue
            report, problems = _merge_checked(path, candidate, registry)
            if problems:
                result.reject(path.name, "; ".join(problems))
                continue
            _add_verification(candidate, verified["record"], path.stem, path.name)
            merged.append((path, sha))
        if not result.ok:
            result.lines.append("- nothing merged: the published database and accepted.json "
                                "are unchanged (run `robench publish check .` for the reasons)")
            return _report(repo, result)
        _journal_delete(candidate)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for path, sha in merged:
            record[sha] = {"file": path.name, "contributor": path.stem, "accepted": now}
            result.lines.append(f"- {markdown_code(path.name)}: merged as "
                                f"{markdown_code(path.stem)}, with the pipeline's verification")
        (work / "accepted.json").write_text(json.dumps(record, indent=2, sort_keys=True)
                                            + "\n")
        os.replace(candidate, published)
        os.replace(work / "accepted.json", record_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _report(repo, result)


@_locked
def build(repo, builder: Callable) -> StepResult:
    """Rebuild the site from the published database with ``builder(store, out_dir)``, into a
    new folder that replaces ``site/`` when it is complete."""

    repo = _root(repo)
    result = StepResult("build")
    published = contained(repo, PUBLISHED)
    site = contained(repo, "site")
    if not published.is_file():
        published.parent.mkdir(exist_ok=True)
        Store(published).close()  # an empty leaderboard is still a page
        _journal_delete(published)
    new = Path(tempfile.mkdtemp(prefix=".site-new-", dir=repo))
    try:
        try:
            with Store(published, readonly=True) as store:
                index = Path(builder(store, new))
        except Exception as exc:  # noqa: BLE001 - reported as the step's failure
            result.ok = False
            result.lines.append(f"- the site did not build: "
                                f"{markdown_text(f'{type(exc).__name__}: {exc}')}")
        else:
            pages = len(list(new.rglob("*.html")))
            _replace_folder(new, site)
            shown = Path("site") / index.relative_to(new)
            result.lines.append(f"- wrote {markdown_code(shown)} ({pages} pages)")
    finally:
        shutil.rmtree(new, ignore_errors=True)
    return _report(repo, result)


@_locked
def deploy(repo, to) -> StepResult:
    """Copy the built site to ``to`` (a gh-pages checkout, a web root)."""
    repo = _root(repo)
    result = StepResult("deploy")
    site = contained(repo, "site")
    if not (site / "index.html").is_file():
        result.ok = False
        result.lines.append("- no site to deploy: run `robench publish build` first")
        return _report(repo, result)
    links = [p for p in site.rglob("*") if p.is_symlink()]
    if links:
        raise MergeError(f"{links[0].relative_to(repo)} is a symbolic link; the site holds "
                         "only files robench wrote: run `robench publish build` again")
    shutil.copytree(site, to, dirs_exist_ok=True)
    result.lines.append(f"- copied {markdown_code(site)} to {markdown_code(to)}")
    return _report(repo, result)


CHECK = ("validate", "verify", "diff")
RUN = CHECK + ("merge", "build")
# ------------------------------------------------------------------ the repository skeleton


def template(name: str) -> str:
    """Return the text of one template of ``robench/exchange/templates/`` (package data)."""
    return resources.files("robench.exchange").joinpath("templates", name).read_text("utf-8")


def _distribution_requirement(dist, source: Optional[Path], wheels: Path) -> str:
    """Return a requirement line that installs exactly ``dist`` on a fresh runner.

    From a source tree (``source``, or the folder an editable or local-folder install points
    at) a wheel is built into ``wheels`` and named by its path; an installed wheel file still
    on disk is copied there; a git install is named by its URL and commit; anything else by
    ``name==version`` (a registry must serve it).
    """
    name, version = dist.metadata["Name"], dist.version
    info = {}
    try:
        info = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        pass
    url = str(info.get("url") or "")
    if source is None and "dir_info" in info and url.startswith("file://"):
        source = Path(url[len("file://"):])
    if source is not None and (source / "pyproject.toml").is_file():
        return _build_wheel(source, wheels)
    if "vcs_info" in info:
        return f"{name} @ {info['vcs_info'].get('vcs', 'git')}+{url}@" \
               f"{info['vcs_info'].get('commit_id')}"
    if "archive_info" in info and url.startswith("file://") and url.endswith(".whl"):
        wheel = Path(url[len("file://"):])
        if wheel.is_file():
            wheels.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wheel, wheels / wheel.name)
            return f"./{WHEELS}/{wheel.name}"
    if url and not url.startswith("file://"):
        return f"{name} @ {url}"
    return f"{name}=={version}"


def _build_wheel(source: Path, wheels: Path) -> str:
    wheels.mkdir(parents=True, exist_ok=True)
    before = set(wheels.glob("*.whl"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(wheels),
                           str(source)], capture_output=True, text=True)
    built = sorted(set(wheels.glob("*.whl")) - before) or sorted(wheels.glob("*.whl"))
    if proc.returncode != 0 or not built:
        tail = (proc.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise MergeError(f"could not build a wheel of {source} for the runner ({tail}); "
                         "pass --requirement with what the runner should install")
    return f"./{WHEELS}/{built[-1].name}"


def requirements(repo, requirement: Optional[str] = None) -> str:
    """Return requirements.txt for the runner: robench, torch's CPU build, the plugins.

    ``requirement`` (``init-leaderboard --requirement``) replaces the robench line; by default
    it is the robench running now (a wheel built from its source tree, or its git URL), so the
    runner verifies with the code the maintainer verifies with. Every installed plugin
    distribution (entry point group ``robench``) is listed the same way, with its version.
    """
    import importlib.metadata as metadata


    wheels = Path(repo) / WHEELS
    lines = ["# What the leaderboard's runner installs (written by robench init-leaderboard).",
             "# torch's CPU build: a CPU runner needs none of the CUDA libraries.",
             f"--extra-index-url {TORCH_CPU_INDEX}"]
    try:
        import torch

        lines.append(f"torch=={torch.__version__.partition('+')[0]}")
    except ImportError:
        lines.append("torch")
    if requirement:
        lines.append(requirement)
    else:
        here = Path(robench.__file__).resolve().parents[1]
        source = here if (here / "pyproject.toml").is_file() else None
        try:
            dist = metadata.distribution("robench")
        except metadata.PackageNotFoundError:
            dist = None
        if dist is None and source is None:
            raise MergeError("cannot tell where a runner gets this robench from (no "
                             "installed distribution, no source tree): pass --requirement")
        lines.append(_build_wheel(source, wheels) if dist is None
                     else _distribution_requirement(dist, source, wheels))
    seen = set()
    for ep in metadata.entry_points(group="robench"):
        dist = getattr(ep, "dist", None)
        if dist is None or dist.metadata["Name"] in seen:
            continue
        seen.add(dist.metadata["Name"])
        lines.append(f"# plugin {ep.name} {dist.version}")
        lines.append(_distribution_requirement(dist, None, wheels))
    return "\n".join(lines) + "\n"


def init_repository(path, title: str = DEFAULT_SETTINGS["title"],
                    requirement: Optional[str] = None,
                    then: Optional[Callable[[Path], None]] = None) -> list:
    """Write a leaderboard repository at ``path`` (refusing one that is not empty); return the
    files written.

    Everything is written into a new folder beside ``path`` and moved into place at the end
    (``then(folder)``, if given, runs before the move: the example contribution): a failure
    leaves nothing behind, and the same command can be run again.
    """
    final = Path(path)
    if os.path.lexists(final) and (not final.is_dir() or final.is_symlink()
                                   or any(final.iterdir())):
        raise MergeError(f"{final} is not empty; pick a new folder for the leaderboard")
    final.absolute().parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.absolute().parent))
    try:
        written = _write_repository(work, title, requirement)
        if then is not None:
            then(work)
        if os.path.lexists(final):
            final.rmdir()  # empty (checked above); an entry added since makes this fail
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return written


def _write_repository(path: Path, title: str, requirement: Optional[str]) -> list:
    files = {
        "README.md": string.Template(template("README.md")).safe_substitute(title=title),
        SETTINGS: json.dumps({**DEFAULT_SETTINGS, "title": title}, indent=2) + "\n",
        "requirements.txt": requirements(path, requirement),
        ".gitignore": template("gitignore"),
        str(WORKFLOW): template("workflow.yml"),
        "contributions/.gitkeep": "",
        "published/accepted.json": "{}\n",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    Store(path / PUBLISHED).close()
    _journal_delete(path / PUBLISHED)
    wheels = sorted(str(p.relative_to(path)) for p in (path / WHEELS).glob("*.whl"))
    return sorted(files) + [str(PUBLISHED)] + wheels
