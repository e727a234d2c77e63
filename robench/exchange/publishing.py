"""A leaderboard repository that runs itself: contributions in, checked, merged, published.

``robench init-leaderboard DIR`` writes the repository (:func:`init_repository`); ``robench
publish STEP DIR`` runs one step of its pipeline, the same command in CI and on a laptop:

``validate``  every pending contribution (a ``contributions/*.db`` file whose content is not yet
              accepted) is merged into a staging copy of the published database: the source
              must fit the schema whole, every score must come with its trials and be what this
              installation's metric code recomputes from them, and nothing may conflict with
              what is published or with another pending contribution.
``verify``    a sample of each pending contribution's trials is re-run here (``robench verify``
              on a copy); a trial that does not reproduce rejects the contribution.
``diff``      ``robench diff`` of the published database against the staging one: a score that
              got worse beyond its interval fails the check.
``merge``     the pending contributions are merged into the published database for real and
              recorded in ``published/accepted.json`` (file, sha256, contributor, when).
``build``     the site is rebuilt from the published database into ``site/``.
``deploy``    the site is copied to a folder (``--to``; the GitHub workflow hands ``site/`` to
              GitHub Pages instead).

``check`` runs validate, verify and diff (what a pull request runs); ``run`` runs check, merge and
build (what the main branch runs). Every step appends its findings to
``.staging/report.md``, written for a pull-request comment. A contribution is named after its
file (``contributions/alice.db`` is alice's); provenance is the file's name, never what the
database says about itself.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from robench.errors import MergeError
from robench.escaping import markdown_code, markdown_text

PUBLISHED = Path("published") / "robench.db"
ACCEPTED = Path("published") / "accepted.json"
STAGING = Path(".staging")
SETTINGS = "leaderboard.json"
DEFAULT_SETTINGS = {"title": "robench leaderboard", "verify_sample": 10,
                    "verify_fraction": 0.10, "verify_trial_timeout": 900,
                    "verify_budget": 3600, "verify_allow": {"datasets": [], "models": []},
                    "max_contribution_mb": 512}
#: The lock file a step holds while it runs (one step at a time per repository).
LOCK = ".robench-publish.lock"
#: Seconds the verify step's child may run beyond its budget before it is ended.
_VERIFY_GRACE = 120


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
        # the report is Markdown for a pull-request comment: a name is a code span, a reason
        # (which quotes names and values from the contribution) escaped prose, each one line
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
                  "verify_allow": (dict,), "max_contribution_mb": (int, float)}


def settings(repo) -> dict:
    """Return the repository's settings (leaderboard.json over the defaults), checked."""
    found = _read_json(repo, Path(SETTINGS), "the leaderboard's settings")
    if not isinstance(found, dict):
        raise MergeError(f"{SETTINGS} must hold a JSON object of settings, found "
                         f"{type(found).__name__}; e.g. {json.dumps(DEFAULT_SETTINGS)}")
    conf = {**DEFAULT_SETTINGS, **found}
    for key, types in _SETTING_TYPES.items():
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise MergeError(f"{SETTINGS}: {key} must be {' or '.join(t.__name__ for t in types)}"
                             f", found {json.dumps(value)}")
        if isinstance(value, (int, float)) and not 0 < value < float("inf"):
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


def contribution_problem(path: Path, limit_mb: float) -> str | None:
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
    import time

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
            yield
        finally:
            held.pop(root, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` where ``target`` is (both inside the repository), at once."""
    old = None
    if os.path.lexists(target):
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def robench_command(*args, cwd=None, timeout=None) -> subprocess.CompletedProcess:
    """Run one robench command in a child process (each step is what a person would type)."""
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _tail(text: str, n: int = 12) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def _report(repo, result: StepResult) -> StepResult:
    """Append a step's findings to .staging/report.md (the pull-request comment)."""
    path = contained(repo, STAGING / "report.md")
    path.parent.mkdir(exist_ok=True)
    mark = "passed" if result.ok else "failed"
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"\n### {result.step}: {mark}\n\n" + "\n".join(result.lines or ["- nothing to do"])
                + "\n")
    return result


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


def _copy_database(source: Path, target: Path) -> None:
    """Copy an SQLite database consistently (backup API: its WAL included), read-only."""
    import sqlite3

    from robench.storage.readonly import readonly_uri

    src = sqlite3.connect(readonly_uri(source), uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


@_locked
def validate(repo) -> StepResult:
    """Merge every pending contribution into a fresh staging copy of the published database."""
    from robench.exchange.merge import merge_databases

    repo = _root(repo)
    settings(repo)  # every JSON file of the repository checked before anything is written
    todo, refused = contributions(repo)
    staging = _fresh_staging(repo)
    result = StepResult("validate")
    for name, why in refused.items():
        result.reject(name, why)
    target = staging / "robench.db"
    for path in todo:
        try:
            report = merge_databases([path], target, [path.stem])
        except (MergeError, ValueError, OSError) as exc:
            result.reject(path.name, f"it cannot be merged: {exc}")
            continue
        counts = report.sources[0] if report.sources else {}
        problems = []
        if report.conflicts:
            problems.append(f"{len(report.conflicts)} conflict(s) with what is published or "
                            "pending: " + "; ".join(
                                f"{c['kind'].replace('_', ' ')} {c['label']} differs in "
                                f"{', '.join(c['columns'])}" for c in report.conflicts[:5]))
        if counts.get("scores_without_trials"):
            problems.append(f"{counts['scores_without_trials']} score(s) without the trials "
                            "they were computed from")
        for u in report.unchecked:
            problems.append(f"{u['n']} score(s) of metric '{u['metric']}' {u['version']} "
                            f"cannot be recomputed here ({u['why']})")
        if not problems:
            problems += _against_data(path)
        if problems:
            result.reject(path.name, "; ".join(problems))
        else:
            result.lines.append(f"- {markdown_code(path.name)}: merges cleanly: "
                                f"{counts.get('trials', 0)} trial(s), {counts.get('scores', 0)} "
                                f"score(s) new, {counts.get('trials_duplicate', 0)} trial(s) "
                                "already published")
    return _report(repo, result)


def _against_data(path: Path) -> list:
    """Return what a contribution's trials contradict in the data installed here (their
    correct bits against the labels on their partition's test rows), as problems."""
    from robench.exchange.verify import data_inconsistencies
    from robench.plugins import get_registry
    from robench.storage.store import Store

    with Store(path, readonly=True) as store:
        rows = store.trials(status="ok")
    found = data_inconsistencies(rows, get_registry())
    return [f"{len(found)} trial(s) contradict the data they name: " + "; ".join(
        f"{_label(t)}: {why}" for t, why in found[:5])] if found else []


def _allowed(entry: dict, allow: dict) -> bool:
    """Whether a refused trial's data set or model is one the maintainer allows unverified."""
    return (entry.get("dataset") in allow.get("datasets", ())
            or entry.get("model") in allow.get("models", ()))


def _unrunnable(copy: Path, allow: dict) -> tuple[int, list, list]:
    """Return (ok trials, [(trial, why)] not re-runnable here, [(trial, why)] allowed so).

    Every trial of the contribution is looked at, not only the sample: a trial on data (or
    with a protocol or clusterer) that is not installed here can never be checked.
    """
    from robench.exchange.verify import missing
    from robench.plugins import get_registry
    from robench.storage.store import Store

    registry = get_registry()
    against, allowed = [], []
    with Store(copy, readonly=True) as store:
        rows = store.trials(status="ok")
    for row in rows:
        spec = row.get("spec")
        why = "no stored spec" if not isinstance(spec, dict) else missing(spec, registry)
        if why is not None:
            (allowed if _allowed(row, allow) else against).append((row, why))
    return len(rows), against, allowed


def _drop_verifications(copy: Path) -> None:
    """Delete the verification records a contribution brought from the verifier's copy: the
    record read back after ``robench verify`` must be the one it wrote."""
    import sqlite3

    conn = sqlite3.connect(copy)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'verifications'").fetchone():
            with conn:
                conn.execute("DELETE FROM verifications")
    finally:
        conn.close()


def _last_verification(copy: Path) -> dict:
    """Return the record ``robench verify`` wrote into the copy (the newest by id), or {}."""
    from robench.storage.store import Store
    from robench.storage.verification import verifications

    with Store(copy, readonly=True) as store:
        records = verifications(store)
    return max(records, key=lambda r: r.get("id") or 0) if records else {}


def _label(t: dict) -> str:
    return " ".join(str(t.get(c)) for c in ("dataset", "model", "clusterer", "protocol", "kind",
                                             "repeat") if t.get(c) not in (None, ""))


@_locked
def verify(repo, seed: int | None = None) -> StepResult:
    """Re-run a sample of each pending contribution's trials here (``robench verify``).

    The sample's seed is drawn here (``secrets``) unless ``seed`` is given (tests): nobody can
    know before the check which trials it re-runs. It covers every (model, protocol, kind)
    stratum, is drawn by influence, and is as large as ``verify_sample`` / ``verify_fraction``
    of leaderboard.json say. A trial that cannot be re-run here (its data, model, protocol or
    clusterer is not installed, or it does not finish in time) rejects the contribution unless
    its data set or model is named in ``verify_allow``.
    """
    from robench.exchange.verify import default_sample

    repo = _root(repo)
    conf = settings(repo)
    todo, _ = contributions(repo)
    result = StepResult("verify")
    seed = secrets.randbits(32) if seed is None else int(seed)
    result.lines.append(f"- sample seed {seed} (drawn by this check, recorded in each "
                        "verification)")
    work = contained(repo, STAGING / "verify")
    work.mkdir(parents=True, exist_ok=True)
    allow = conf["verify_allow"]
    for path in todo:
        copy = work / path.name  # verify records what it checked: never in the contribution
        shutil.copyfile(path, copy)
        try:
            _drop_verifications(copy)
            total, against, allowed = _unrunnable(copy, allow)
        except Exception as exc:  # noqa: BLE001 - a database validate did not refuse
            result.reject(path.name, f"it cannot be verified: {exc}")
            continue
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
        from robench.storage.store import Store

        with Store(copy, readonly=True) as store:
            rows = store.trials(status="ok")
        n = default_sample(rows, conf["verify_fraction"], conf["verify_sample"])
        budget = conf["verify_budget"]
        try:
            proc = robench_command(
                "verify", "--db", copy, "--sample", n, "--seed", seed, "--by-influence",
                "--trial-timeout", conf["verify_trial_timeout"], "--budget", budget,
                timeout=budget + _VERIFY_GRACE)
        except subprocess.TimeoutExpired:
            result.reject(path.name, f"its verification ran past its budget of {budget:g} s "
                          "(verify_budget in leaderboard.json) and was ended")
            continue
        record = _last_verification(copy)  # the only record in the copy: verify's own
        trials = record.get("trials") or []
        mismatched = [t for t in trials if t.get("outcome") == "mismatch"]
        refused = [t for t in trials if t.get("outcome") == "refused"]
        counted = [t for t in refused if t.get("timed_out") or not _allowed(t, allow)]
        matched = sum(t.get("outcome") == "match" for t in trials)
        if mismatched:
            result.reject(path.name, f"{len(mismatched)} of {len(trials)} sampled trial(s) do "
                          "not reproduce here: " + "; ".join(
                              f"{_label(t)}: " + ", ".join(
                                  f"{d.get('column')} stored {d.get('stored')}, re-run "
                                  f"{d.get('rerun')}" for d in (t.get("differences") or [])[:3])
                              for t in mismatched[:5]))
        elif counted:
            result.reject(path.name, f"{len(counted)} of {len(trials)} sampled trial(s) could "
                          "not be re-run here: " + "; ".join(
                              f"{_label(t)}: {t.get('reason')}" for t in counted[:5]))
        elif not record or proc.returncode not in (0, 2):
            result.reject(path.name, f"it cannot be verified: {_tail(proc.stderr, 3)}")
        else:
            note = (f"; {len(refused)} refused but allowed by verify_allow"
                    if refused else "")
            result.lines.append(
                f"- {markdown_code(path.name)}: verified {matched} of {len(trials)} sampled "
                f"trial(s) of {total} ({len(trials) / total:.0%}, every model, protocol and "
                f"partition kind; drawn by influence, seed {seed}){markdown_text(note)}")
        for t, why in allowed[:5]:
            result.lines.append(f"- {markdown_code(path.name)}: "
                                f"{markdown_text(_label(t))} cannot be re-run here "
                                f"({markdown_text(why)}); allowed by verify_allow")
    return _report(repo, result)


@_locked
def diff(repo) -> StepResult:
    """Compare the published database with the staging one (``robench diff``)."""
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
    proc = robench_command("diff", published, staging, "--format", "markdown")
    table = proc.stdout.strip()
    common = [line for line in table.splitlines() if line.startswith("| ")
              and "---" not in line][1:]
    result.lines.append(table if common else "- no published score is changed by the "
                        "contribution(s): every score is new")
    if proc.returncode == 1:
        result.ok = False
        result.lines.append("- **a published score got worse beyond its interval** (rows "
                            "marked worse above)")
    elif proc.returncode != 0:
        result.ok = False
        result.lines.append(f"- robench diff failed: {markdown_text(_tail(proc.stderr, 3))}")
    return _report(repo, result)


@_locked
def merge(repo) -> StepResult:
    """Merge the pending contributions into the published database and record them.

    All or nothing: the merge goes into a copy beside the published database and the record
    into a copy beside accepted.json; both replace the originals only when the merge is done.
    """
    from robench.exchange.merge import merge_databases

    repo = _root(repo)
    result = StepResult("merge")
    record = accepted(repo)  # its shape checked before anything is written
    settings(repo)
    published = contained(repo, PUBLISHED)
    record_path = contained(repo, ACCEPTED)
    todo, refused = contributions(repo)
    if refused:
        result.ok = False
        for name, why in refused.items():
            result.reject(name, why)
        result.lines.append("- nothing merged: remove the refused file(s) first")
        return _report(repo, result)
    if not todo:
        return _report(repo, result)
    published.parent.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".merging-", dir=published.parent))
    try:
        target = work / "robench.db"
        if published.is_file():
            _copy_database(published, target)
        report = merge_databases(todo, target, [p.stem for p in todo])
        if report.conflicts:  # `check` refuses these; merging anyway never overwrites
            result.ok = False
            result.lines.append(f"- {len(report.conflicts)} conflict(s) kept apart in the "
                                "conflicts table; run `robench publish check` before "
                                "merging")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for path in todo:
            record[contribution_sha256(path)] = {"file": path.name,
                                                 "contributor": path.stem, "accepted": now}
            result.lines.append(f"- {markdown_code(path.name)}: merged as "
                                f"{markdown_code(path.stem)}")
        (work / "accepted.json").write_text(json.dumps(record, indent=2, sort_keys=True)
                                            + "\n")
        os.replace(target, published)
        os.replace(work / "accepted.json", record_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _report(repo, result)


@_locked
def build(repo) -> StepResult:
    """Rebuild the site from the published database (``robench leaderboard``), into a new
    folder that replaces ``site/`` when it is complete."""
    repo = _root(repo)
    result = StepResult("build")
    published = contained(repo, PUBLISHED)
    site = contained(repo, "site")
    if not published.is_file():
        from robench.storage.store import Store

        published.parent.mkdir(exist_ok=True)
        Store(published).close()  # an empty leaderboard is still a page
    new = Path(tempfile.mkdtemp(prefix=".site-new-", dir=repo))
    try:
        proc = robench_command("leaderboard", "--db", published, "--out", new)
        if proc.returncode != 0:
            result.ok = False
            result.lines.append(f"- the site did not build: "
                                f"{markdown_text(_tail(proc.stderr, 3))}")
        else:
            _replace_folder(new, site)
            said = _tail(proc.stdout, 1).replace(str(new), str(site))
            result.lines.append(f"- {markdown_text(said)}")
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


STEPS = {"validate": validate, "verify": verify, "diff": diff, "merge": merge, "build": build}
CHECK = ("validate", "verify", "diff")
RUN = CHECK + ("merge", "build")


# ------------------------------------------------------------------ the repository skeleton


README = """# {title}

A robench leaderboard: how robust classifiers are to shift inside a data set
(https://github.com/robench/robench). The site is built from `published/robench.db`, the merge of
every accepted contribution.

## Contribute results

1. Install robench (and any plugin your model needs): `pip install -r requirements.txt`.
2. Run it on your model: `robench run -d DATASET -m YOUR-MODEL --db NAME.db`
   (`robench list` shows what is registered; `robench run --help` the options).
3. Add `NAME.db` under `contributions/` (the file's name is the contributor's name) and open a
   pull request.

The pull request's check runs the same pipeline you can run locally:

```bash
robench publish check .     # validate (schema, scores recomputed from trials, conflicts),
                            # verify (a sample of your trials re-run), diff (nothing published got worse)
```

A contribution is accepted when every score comes with its trials and is what robench
recomputes from them, nothing conflicts with what is published, a random sample of its trials
reproduces, and no published score gets worse. The check's report is posted on the pull request.

## Maintain it

- `robench publish run .` on the main branch merges accepted contributions into
  `published/robench.db`, records them in `published/accepted.json` and rebuilds `site/`.
- `robench publish deploy . --to DIR` copies the site to a folder; the GitHub workflow
  (`.github/workflows/leaderboard.yml`) deploys it to GitHub Pages.
- Settings (title, how many trials `verify` re-runs) are in `leaderboard.json`.
"""

WORKFLOW = """# The leaderboard's pipeline: every step is one `robench publish` command, so the same
# checks run locally (`robench publish check .`). Written by `robench init-leaderboard`.
name: leaderboard
on:
  pull_request:
    paths: ["contributions/**"]
  push:
    branches: [main]
  workflow_dispatch:
permissions:
  contents: write
  pages: write
  id-token: write
  pull-requests: write
concurrency:
  group: leaderboard-${{{{ github.ref }}}}
  cancel-in-progress: false
jobs:
  check:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -r requirements.txt
      - run: robench publish validate .
      - run: robench publish verify .
      - run: robench publish diff .
      - name: Post the report on the pull request
        if: always()
        env:
          GH_TOKEN: ${{{{ github.token }}}}
        run: gh pr comment ${{{{ github.event.pull_request.number }}}} --body-file .staging/report.md
  publish:
    if: github.event_name != 'pull_request'
    runs-on: ubuntu-latest
    environment:
      name: github-pages
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -r requirements.txt
      - run: robench publish check .
      - run: robench publish merge .
      - run: robench publish build .
      - name: Commit the published database
        run: |
          git config user.name "robench leaderboard"
          git config user.email "leaderboard@users.noreply.github.com"
          git add published
          git diff --cached --quiet || git commit -m "Publish accepted contributions"
          git push
      - uses: actions/upload-pages-artifact@v3
        with:
          path: site
      - uses: actions/deploy-pages@v4
"""

GITIGNORE = ".staging/\nsite/\n.robench-publish.lock\n"


def init_repository(path, title: str = DEFAULT_SETTINGS["title"], requirement: str = "",
                    then=None) -> list:
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


def _write_repository(path: Path, title: str, requirement: str) -> list:
    import robench

    files = {
        "README.md": README.format(title=title),
        SETTINGS: json.dumps({**DEFAULT_SETTINGS, "title": title}, indent=2) + "\n",
        "requirements.txt": (requirement or f"robench=={robench.__version__}") + "\n",
        ".gitignore": GITIGNORE,
        ".github/workflows/leaderboard.yml": WORKFLOW.format(),
        "contributions/.gitkeep": "",
        "published/accepted.json": "{}\n",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    from robench.storage.store import Store

    Store(path / PUBLISHED).close()
    return sorted(files) + [str(PUBLISHED)]
