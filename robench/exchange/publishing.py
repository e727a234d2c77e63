"""A leaderboard repository that runs itself: contributions in, checked, merged, published.

``robench init-leaderboard DIR`` writes the repository (:func:`init_repository`) from the
templates in ``robench/exchange/templates/`` (package data); ``robench publish STEP DIR`` runs
one step of its pipeline, the same in CI and on a laptop. Each step is a function here that
calls robench's own functions (merge, verify, diff, the site builder) and reads what they
return; none runs a robench command or reads its printed output.

``validate``  every pending contribution (a ``contributions/*.db`` file whose content is not yet
              accepted) is merged into a staging copy of the published database: the source
              must fit the schema whole, every score must come with its trials and be what this
              installation's metric code recomputes from them, and nothing may conflict with
              what is published or with another pending contribution. Each rejection says
              which of these failed.
``verify``    a sample of each pending contribution's trials is re-run here
              (:func:`robench.exchange.verify.verify` on a copy), each with the thread count
              it ran with; a trial that does not reproduce rejects the contribution. What it
              found is kept in ``.staging/verified.json`` for ``merge``.
``diff``      the published scores are compared with the staging ones
              (:func:`robench.stats.diff.diff_scores`): a score that got worse beyond its
              interval fails the check. The report lists only the scores that change.
``merge``     each pending contribution that merges cleanly *and* passed ``verify`` on this
              content is merged into the published database, all or nothing: the merge runs
              on a copy that replaces the published file only when every contribution passed;
              the pipeline's verification records go in with it, and the contributions are
              recorded in ``published/accepted.json``. A rejected contribution changes nothing.
``build``     the site is rebuilt from the published database into ``site/``.
``deploy``    the site is copied to a folder (``--to``; the GitHub workflow hands ``site/`` to
              GitHub Pages instead).

``check`` runs validate, verify and diff (what a pull request runs); ``run`` runs check, merge and
build (what the main branch runs). Every step appends its findings to ``.staging/report.md``
(the job summary; capped under :data:`REPORT_LIMIT` characters). A contribution is named after
its file (``contributions/alice.db`` is alice's); provenance is the file's name, never what the
database says about itself.

The site builder lives in a room above this one (:mod:`robench.present.site`), so
:func:`build` takes it as an argument; :data:`STEPS` in :mod:`robench.cli.publish` binds it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import string
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

from robench.errors import MergeError
from robench.exchange.merge import file_sha256

PUBLISHED = Path("published") / "robench.db"
ACCEPTED = Path("published") / "accepted.json"
STAGING = Path(".staging")
VERIFIED = STAGING / "verified.json"
SETTINGS = "leaderboard.json"
WHEELS = "wheels"
WORKFLOW = Path(".github") / "workflows" / "leaderboard.yml"
DEFAULT_SETTINGS = {"title": "robench leaderboard", "verify_sample": 10, "verify_seed": 0}
#: Characters a GitHub comment (and this report) may hold: 65,536; a margin for the last line.
REPORT_LIMIT = 65_000
#: What the site says a verification record came from (robench.storage.verification.status).
PIPELINE = "the leaderboard's pipeline"
#: Where the runner gets torch's CPU build (the CUDA build is gigabytes a CPU runner never uses).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


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
        self.lines.append(f"- **{name}: rejected.** {reason}")


def _root(repo) -> Path:
    repo = Path(repo)
    if not (repo / SETTINGS).is_file() or not (repo / "contributions").is_dir():
        raise MergeError(f"{repo} is not a leaderboard repository (no {SETTINGS} or "
                         "contributions/); create one with `robench init-leaderboard DIR`")
    return repo


def settings(repo) -> dict:
    return {**DEFAULT_SETTINGS, **json.loads((_root(repo) / SETTINGS).read_text())}


def accepted(repo) -> dict:
    """Return {sha256: record} of the contributions merged into the published database."""
    path = Path(repo) / ACCEPTED
    return json.loads(path.read_text()) if path.is_file() else {}


def pending(repo) -> list[Path]:
    """Return the contribution files whose content has not been accepted yet, by name."""
    done = accepted(repo)
    return [p for p in sorted((_root(repo) / "contributions").glob("*.db"))
            if file_sha256(p) not in done]


def _report(repo, result: StepResult) -> StepResult:
    """Append a step's findings to .staging/report.md, keeping it under REPORT_LIMIT."""
    path = Path(repo) / STAGING / "report.md"
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
    """Merge one contribution into ``target``; return (MergeReport or None, problems)."""
    from robench.exchange.merge import merge_databases

    try:
        report = merge_databases([path], target, [path.stem], registry=registry)
    except (MergeError, ValueError, OSError) as exc:
        return None, [f"it cannot be merged: {exc}"]
    return report, _problems(report)


def validate(repo) -> StepResult:
    """Merge every pending contribution into a fresh staging copy of the published database."""
    repo = _root(repo)
    result = StepResult("validate")
    staging = repo / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    (staging / "report.md").write_text("## robench leaderboard check\n", encoding="utf-8")
    target = staging / "robench.db"
    if (repo / PUBLISHED).is_file():
        shutil.copyfile(repo / PUBLISHED, target)
    for path in pending(repo):
        # each on its own copy first: a contribution rejected for itself never reaches the
        # staging database, so the next one is not blamed for conflicting with it
        with tempfile.TemporaryDirectory(prefix="robench-validate-") as tmp:
            alone = Path(tmp) / "robench.db"
            if target.is_file():
                shutil.copyfile(target, alone)
            report, problems = _merge_checked(path, alone)
            if not problems:
                shutil.copyfile(alone, target)
        if problems:
            result.reject(path.name, "; ".join(problems))
            continue
        counts = report.sources[0] if report.sources else {}
        result.lines.append(f"- {path.name} ({path.stem}): merges cleanly: "
                            f"{counts.get('trials', 0)} trial(s), {counts.get('scores', 0)} "
                            f"score(s) new, {counts.get('trials_duplicate', 0)} trial(s) "
                            "already published")
    if target.is_file():
        _journal_delete(target)
    return _report(repo, result)


def _verified(repo) -> dict:
    path = Path(repo) / VERIFIED
    return json.loads(path.read_text()) if path.is_file() else {}


def verify(repo, registry=None) -> StepResult:
    """Re-run a sample of each pending contribution's trials here and record what was found."""
    from robench.exchange.verify import difference_text, verify as verify_trials
    from robench.plugins import get_registry
    from robench.storage.store import Store
    from robench.storage.verification import verifications

    repo = _root(repo)
    registry = registry if registry is not None else get_registry()
    conf = settings(repo)
    result = StepResult("verify")
    work = repo / STAGING / "verify"
    work.mkdir(parents=True, exist_ok=True)
    found = _verified(repo)
    for path in pending(repo):
        sha = file_sha256(path)
        copy = work / path.name  # verify records what it checked: never in the contribution
        shutil.copyfile(path, copy)
        try:
            with Store(copy) as store:
                check = verify_trials(store, registry, sample=int(conf["verify_sample"]),
                                      seed=int(conf["verify_seed"]))
                record = next(r for r in verifications(store) if r["id"] == check.record_id)
        except Exception as exc:  # noqa: BLE001 - any failure rejects, with its reason
            result.reject(path.name, f"it cannot be verified: {type(exc).__name__}: {exc}")
            found[sha] = {"file": path.name, "ok": False}
            continue
        matched, mismatched = check.count("match"), check.count("mismatch")
        refused = check.count("refused")
        summary = (f"verified {matched} of {matched + mismatched} re-run trial(s) on "
                   f"{check.host} ({check.device}); {refused} refused")
        ok = not mismatched and matched > 0
        if mismatched:
            bad = [t for t in check.trials if t["outcome"] == "mismatch"][:5]
            result.reject(path.name, f"its trials do not reproduce here ({summary}): " + "; ".join(
                f"{t['key'][:16]} ({t['model']} {t['protocol']} {t['kind']} {t['repeat']}): "
                + "; ".join(difference_text(d) for d in t["differences"][:3]) for t in bad))
        elif not matched:
            result.reject(path.name, f"none of its {refused} sampled trial(s) can be re-run "
                          "here: " + "; ".join(sorted({t["reason"] for t in check.trials
                                                       if t.get("reason")}))[:2000])
        else:
            result.lines.append(f"- {path.name}: {summary}")
        record = {k: v for k, v in record.items() if k != "id"}
        found[sha] = {"file": path.name, "ok": ok, "record": record}
    (repo / VERIFIED).write_text(json.dumps(found, indent=1, sort_keys=True, default=str))
    return _report(repo, result)


def _md(value) -> str:
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def _scores(path: Path) -> list:
    from robench.storage.store import Store

    with Store(path, readonly=True) as store:
        rows = store.scores()
        for row, versions in zip(rows, store.score_versions(rows)):
            row["versions"] = versions
    return rows


def diff(repo) -> StepResult:
    """Compare the published scores with the staging ones; list only what changes."""
    from robench.stats.diff import diff_scores

    repo = _root(repo)
    result = StepResult("diff")
    staging = repo / STAGING / "robench.db"
    if not staging.is_file():
        result.ok = False
        result.lines.append("- no staging database: run `robench publish validate` first")
        return _report(repo, result)
    if not (repo / PUBLISHED).is_file():
        result.lines.append("- nothing published yet: every score is new")
        return _report(repo, result)
    before, after = _scores(repo / PUBLISHED), _scores(staging)
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
            result.lines.append("| " + " | ".join(_md(v) for v in (
                c["dataset"], c["model"], c["clusterer"], c["metric"], c["score"],
                "" if c["a"] is None else f"{c['a']:.4g}",
                "" if c["b"] is None else f"{c['b']:.4g}", change, decision)) + " |")
    if any(c["decision"] == "worse" for c in changed):
        result.ok = False
        result.lines.append("- **a published score got worse beyond its interval** (rows marked "
                            "worse above)")
    return _report(repo, result)


def _write_json(path: Path, value) -> None:
    """Write JSON to ``path`` by renaming a finished temporary file over it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _add_verification(target: Path, record: dict, contributor: str, source: str) -> None:
    """Insert the pipeline's verification of one contribution into ``target``."""
    row = dict(record, contributor=contributor, recorded_in=f"{PIPELINE}: publish verify of {source}")
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
    todo = pending(repo)
    if not todo:
        return _report(repo, result)
    checked = _verified(repo)
    (repo / PUBLISHED).parent.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="merge-", dir=repo / PUBLISHED.parent))
    try:
        candidate = work / "robench.db"
        if (repo / PUBLISHED).is_file():
            shutil.copyfile(repo / PUBLISHED, candidate)
        merged = []
        for path in todo:
            sha = file_sha256(path)
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
        os.replace(candidate, repo / PUBLISHED)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = accepted(repo)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for path, sha in merged:
        record[sha] = {"file": path.name, "contributor": path.stem, "accepted": now}
        result.lines.append(f"- {path.name}: merged as {path.stem}, with the pipeline's "
                            "verification")
    _write_json(repo / ACCEPTED, record)
    return _report(repo, result)


def build(repo, builder: Callable) -> StepResult:
    """Rebuild the site from the published database with ``builder(store, out_dir)``."""
    from robench.storage.store import Store

    repo = _root(repo)
    result = StepResult("build")
    if not (repo / PUBLISHED).is_file():
        (repo / PUBLISHED).parent.mkdir(exist_ok=True)
        Store(repo / PUBLISHED).close()  # an empty leaderboard is still a page
        _journal_delete(repo / PUBLISHED)
    try:
        with Store(repo / PUBLISHED, readonly=True) as store:
            index = builder(store, repo / "site")
    except Exception as exc:  # noqa: BLE001 - reported as the step's failure
        result.ok = False
        result.lines.append(f"- the site did not build: {type(exc).__name__}: {exc}")
    else:
        pages = len(list((repo / "site").rglob("*.html")))
        result.lines.append(f"- wrote {Path(index).relative_to(repo)} ({pages} pages)")
    return _report(repo, result)


def deploy(repo, to) -> StepResult:
    """Copy the built site to ``to`` (a gh-pages checkout, a web root)."""
    repo = _root(repo)
    result = StepResult("deploy")
    site = repo / "site"
    if not (site / "index.html").is_file():
        result.ok = False
        result.lines.append("- no site to deploy: run `robench publish build` first")
        return _report(repo, result)
    shutil.copytree(site, to, dirs_exist_ok=True)
    result.lines.append(f"- copied {site} to {to}")
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

    import robench

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
                    requirement: Optional[str] = None) -> list:
    """Write a leaderboard repository at ``path`` (refusing one that is not empty); return the
    files written."""
    from robench.storage.store import Store

    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise MergeError(f"{path} is not empty; pick a new folder for the leaderboard")
    path.mkdir(parents=True, exist_ok=True)
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
