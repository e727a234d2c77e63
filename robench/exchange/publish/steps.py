"""The steps of a leaderboard's pipeline: each calls robench's own functions (never its
commands), holds the repository's lock and appends its findings to ``.staging/report.md``."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from robench.errors import MergeError
from robench.escaping import markdown_cell, markdown_code, markdown_text
from robench.exchange.diff import change_text, number_text, versioned_scores
from robench.exchange.merge import copy_database, insert_row, merge_databases
from robench.exchange.publish.common import (ACCEPTED, PUBLISHED, STAGING, VERIFIED, StepResult,
                                             append_report, contained, journal_delete,
                                             read_json, repository_root, write_json)
from robench.exchange.publish.lock import locked, made_folder, replace_folder
from robench.exchange.publish.repository import (accepted, changes_outside_contributions,
                                                 contribution_sha256, contributions, settings)
from robench.exchange.publish.scaffold import pinned_plugins
from robench.exchange.verify import (REMEDY, data_inconsistencies, default_sample,
                                     difference_text, missing, provider,
                                     verify as verify_trials)
from robench.plugins import get_registry
from robench.stats.diff import diff_scores
from robench.storage.cells import decoded
from robench.storage.store import Store
from robench.storage.verification import PIPELINE, verifications


def _fresh_staging(repo: Path) -> Path:
    """Replace .staging with a new folder holding a copy of the published database."""
    staging = contained(repo, STAGING)
    new = made_folder(".staging-new-", repo)
    try:
        (new / "report.md").write_text("## robench leaderboard check\n", encoding="utf-8")
        published = contained(repo, PUBLISHED)
        if published.is_file():
            copy_database(published, new / "robench.db")
        replace_folder(new, staging)
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
        problems.append(
            f"{len(recomputed)} score(s) are not what robench recomputes from the "
            "contribution's own trials: " + "; ".join(f"{c['label']}: " + ", ".join(
                f"{col} claimed {c['incoming'][col]}, recomputed {c['stored'][col]}"
                for col in c["columns"]) for c in recomputed[:5]))
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
    try:
        report = merge_databases([path], target, [path.stem], registry=registry)
    except (MergeError, ValueError, OSError, sqlite3.DatabaseError) as exc:
        return None, [f"it cannot be merged: {exc}"]
    return report, _problems(report)


def _against_data(path: Path, registry) -> list:
    """Return what a contribution's trials contradict in the data installed here, as problems."""
    with Store(path, readonly=True) as store:
        rows = store.trials(status="ok")
    found = data_inconsistencies(rows, registry)
    return [f"{len(found)} trial(s) contradict the data they name: " + "; ".join(
        f"{_label(t)}: {why}" for t, why in found[:5])] if found else []


#: The kinds of component a contribution names, by the trial or score-group column naming them.
_NAMED = (("protocols", "protocol", "trials"), ("datasets", "dataset", "trials"),
          ("clusterers", "clusterer", "trials"), ("models", "model", "score_groups"),
          ("metrics", "metric", "score_groups"))


def unloadable(path: Path, registry, allow: dict, pins: Optional[dict] = None) -> Optional[str]:
    """Return why this board's runner cannot load what a contribution names, or None."""
    named, recorded, plugins, distributions = _named(path)
    by_provider: dict = {}
    for kind, names in named.items():
        allowed = allow.get(kind, ()) if kind in ("datasets", "models") else ()
        have = set(registry.names(kind))
        for n in names:
            if n and ":" not in n and n not in have and n not in allowed:
                where = provider(recorded.get((kind, n)), plugins, registry, pins, distributions)
                by_provider.setdefault(where, []).append(f"{kind[:-1]} '{n}'")
    if not by_provider:
        return None
    found = "; ".join(", ".join(what[:5]) + (f" and {len(what) - 5} more" if len(what) > 5 else "")
                      + f" {where}" for where, what in list(by_provider.items())[:3])
    return (f"it names what this board's runner cannot load (not installed here): {found}; "
            f"{REMEDY}, then the check runs again (robench's CONTRIBUTING.md, 'From a plugin "
            "to a leaderboard')")


def _named(path: Path) -> tuple[dict, dict, dict, dict]:
    """Return what a contribution names, the versions its trials recorded, its plugins, dists."""
    with Store(path, readonly=True) as store:
        conn = store.db.conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table'")}
        named = {kind: sorted({r[0] for r in conn.execute(
            f'SELECT DISTINCT "{column}" FROM "{table}"') if isinstance(r[0], str)})
            for kind, column, table in _NAMED if table in tables}
        recorded = {}  # (kind, name) -> the PLUGIN-VERSION/COMPONENT-VERSION a trial recorded
        if "trials" in tables:
            for *names, versions in conn.execute(
                    "SELECT DISTINCT dataset, model, clusterer, versions FROM trials"):
                versions = decoded(versions)
                versions = versions if isinstance(versions, dict) else {}
                for kind, name in zip(("datasets", "models", "clusterers"), names):
                    recorded.setdefault((kind, name), versions.get(kind[:-1]))
        runs = store.runs()
    plugins, distributions = ({k: v for run in runs if isinstance(run.get(c), dict)
                               for k, v in run[c].items()}
                              for c in ("plugin_versions", "plugin_distributions"))
    return named, recorded, plugins, distributions


@locked
def validate(repo, registry=None, base: Optional[str] = None) -> StepResult:
    """Merge each pending contribution into a fresh staging copy of the published database."""
    repo = repository_root(repo)
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
        return append_report(repo, result)
    conf = settings(repo)  # every JSON file checked before anything is written
    try:
        pins = {plugin: (version, line) for plugin, version, line in pinned_plugins(repo)}
    except (OSError, UnicodeDecodeError):
        pins = {}
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
            # what the runner cannot load, named with its remedy, before any re-run (the
            # scores of a metric not installed here are among the merge's problems too)
            try:
                why = None if report is None else unloadable(
                    path, registry or get_registry(), conf["verify_allow"], pins)
            except (sqlite3.DatabaseError, ValueError, OSError):
                why = None  # what the merge took but this cannot read: verify says why
            if why is not None:
                problems = [why]
            if not problems:
                problems = _against_data(path, registry or get_registry())
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
        journal_delete(target)
    return append_report(repo, result)


def _verified(repo) -> dict:
    found = read_json(repo, VERIFIED, "the verify step's findings")
    return found if isinstance(found, dict) else {}


def _allowed(entry: dict, allow: dict) -> bool:
    """Whether a refused trial's data set or model is one the maintainer allows unverified."""
    return (entry.get("dataset") in allow.get("datasets", ())
            or entry.get("model") in allow.get("models", ()))


def _unrunnable(rows: list, allow: dict, registry, runs: dict) -> tuple[list, list]:
    """Return ([(trial, why)] not re-runnable here, [(trial, why)] allowed so) of every trial."""
    against, allowed = [], []
    for row in rows:
        spec = row.get("spec")
        plugins = (runs.get(row.get("run_id")) or {}).get("plugin_versions") or {}
        why = "no stored spec" if not isinstance(spec, dict) else missing(spec, registry, plugins)
        if why is not None:
            (allowed if _allowed(row, allow) else against).append((row, why))
    return against, allowed


def _drop_verifications(copy: Path) -> None:
    """Delete a contribution's own verification records from the verifier's copy."""
    with closing(sqlite3.connect(copy)) as conn, conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                        "'verifications'").fetchone():
            conn.execute("DELETE FROM verifications")


@locked
def verify(repo, registry=None, seed: Optional[int] = None) -> StepResult:
    """Re-run a sample of each pending contribution's trials here and record what was found."""
    repo = repository_root(repo)
    registry = registry or get_registry()
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
                runs = {r["id"]: r for r in store.runs()}
            against, allowed = _unrunnable(rows, allow, registry, runs)
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
        journal_delete(copy)
        accepted = _judged(result, path.name, check, record, total, seed, allow)
        if accepted is not None:
            found[sha] = {"file": path.name, "ok": True, "record": accepted}
        for t, why in allowed[:5]:
            result.lines.append(f"- {markdown_code(path.name)}: "
                                f"{markdown_text(_label(t))} cannot be re-run here "
                                f"({markdown_text(why)}); allowed by verify_allow")
    write_json(contained(repo, VERIFIED), found)
    return append_report(repo, result)


def _judged(result: StepResult, name: str, check, record: dict, total: int, seed: int,
            allow: dict) -> Optional[dict]:
    """Reject ``name`` for what ``check`` found, or say it verified and return ``record``."""
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
        result.reject(name, f"{len(mismatched)} of {len(trials)} sampled trial(s) do not "
                      f"reproduce here ({summary}): " + "; ".join(
                          f"{t['key'][:16]} ({_label(t)}): "
                          + "; ".join(difference_text(d) for d in t["differences"][:3])
                          for t in mismatched[:5]))
        return None
    if counted:
        result.reject(name, f"{len(counted)} of {len(trials)} sampled trial(s) could not be "
                      "re-run here: " + "; ".join(
                          f"{_label(t)}: {t.get('reason')}" for t in counted[:5]))
        return None
    note = f"; {len(refused)} refused but allowed by verify_allow" if refused else ""
    result.lines.append(
        f"- {markdown_code(name)}: {markdown_text(summary)}: verified {matched} "
        f"of {len(trials)} sampled trial(s) of {total} ({len(trials) / total:.0%}, "
        f"every model, protocol and partition kind; drawn by influence, seed {seed})"
        f"{markdown_text(note)}")
    return {k: v for k, v in record.items() if k != "id"}


@locked
def diff(repo) -> StepResult:
    """Compare the published scores with the staging ones; list only what changes."""
    repo = repository_root(repo)
    result = StepResult("diff")
    staging = contained(repo, STAGING / "robench.db")
    published = contained(repo, PUBLISHED)
    if not staging.is_file():
        result.ok = False
        result.lines.append("- no staging database: run `robench publish validate` first")
        return append_report(repo, result)
    if not published.is_file():
        result.lines.append("- nothing published yet: every score is new")
        return append_report(repo, result)
    with Store(published, readonly=True) as a, Store(staging, readonly=True) as b:
        before, after = versioned_scores(a), versioned_scores(b)
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
            decision = c["decision"] + (f" ({c['reason']})" if c.get("reason") else "")
            # names come from the contributions: code spans; numbers and decisions are ours
            names = [markdown_cell(v) for v in (c["dataset"], c["model"], c["clusterer"],
                                                 c["metric"], c["score"])]
            numbers = [number_text(c["a"]), number_text(c["b"]), change_text(c),
                       markdown_text(decision).replace("|", "\\|")]
            result.lines.append("| " + " | ".join(names + numbers) + " |")
    if any(c["decision"] == "worse" for c in changed):
        result.ok = False
        result.lines.append("- **a published score got worse beyond its interval** (rows marked "
                            "worse above)")
    return append_report(repo, result)


def _add_verification(target: Path, record: dict, contributor: str, source: str) -> None:
    """Insert the pipeline's verification of one contribution into ``target``."""
    row = dict(record, contributor=contributor,
               recorded_in=f"{PIPELINE}: publish verify of {source}")
    with closing(sqlite3.connect(target)) as conn, conn:
        present = {r[1] for r in conn.execute('PRAGMA table_info("verifications")')}
        insert_row(conn, "verifications", {k: json.dumps(v) if isinstance(v, (dict, list))
                                           else v for k, v in row.items() if k in present},
                   "INSERT OR IGNORE")


@locked
def merge(repo, registry=None) -> StepResult:
    """Merge the pending contributions, all or nothing: each merged cleanly and verified."""
    repo = repository_root(repo)
    result = StepResult("merge")
    record = accepted(repo)  # every JSON file's shape checked before anything is written
    settings(repo)
    published = contained(repo, PUBLISHED)
    record_path = contained(repo, ACCEPTED)
    todo, refused = contributions(repo)
    for name, why in refused.items():
        result.reject(name, why)
    if not todo and result.ok:
        return append_report(repo, result)
    checked = _verified(repo)
    published.parent.mkdir(exist_ok=True)
    work = made_folder(".merging-", published.parent)
    try:
        candidate = work / "robench.db"
        if published.is_file():
            copy_database(published, candidate)
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
            return append_report(repo, result)
        journal_delete(candidate)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for path, sha in merged:
            record[sha] = {"file": path.name, "contributor": path.stem, "accepted": now}
            result.lines.append(f"- {markdown_code(path.name)}: merged as "
                                f"{markdown_code(path.stem)}, with the pipeline's verification")
        (work / "accepted.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(candidate, published)
        os.replace(work / "accepted.json", record_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return append_report(repo, result)


@locked
def build(repo) -> StepResult:
    """Rebuild the site from the published database into a new folder that replaces site/."""
    from robench.present.site import build_site  # jinja2: only the build step needs it

    repo = repository_root(repo)
    result = StepResult("build")
    published = contained(repo, PUBLISHED)
    site = contained(repo, "site")
    if not published.is_file():
        published.parent.mkdir(exist_ok=True)
        Store(published).close()  # an empty leaderboard is still a page
        journal_delete(published)
    new = made_folder(".site-new-", repo)
    try:
        try:
            with Store(published, readonly=True) as store:  # the board's title is the site's
                index = Path(build_site(store, new, title=settings(repo).get("title")))
        except Exception as exc:  # noqa: BLE001 - reported as the step's failure
            result.ok = False
            result.lines.append(f"- the site did not build: "
                                f"{markdown_text(f'{type(exc).__name__}: {exc}')}")
        else:
            pages = len(list(new.rglob("*.html")))
            replace_folder(new, site)
            shown = Path("site") / index.relative_to(new)
            result.lines.append(f"- wrote {markdown_code(shown)} ({pages} pages)")
    finally:
        shutil.rmtree(new, ignore_errors=True)
    return append_report(repo, result)


@locked
def deploy(repo, to) -> StepResult:
    """Copy the built site to ``to`` (a gh-pages checkout, a web root)."""
    repo = repository_root(repo)
    result = StepResult("deploy")
    site = contained(repo, "site")
    if not (site / "index.html").is_file():
        result.ok = False
        result.lines.append("- no site to deploy: run `robench publish build` first")
        return append_report(repo, result)
    links = [p for p in site.rglob("*") if p.is_symlink()]
    if links:
        raise MergeError(f"{links[0].relative_to(repo)} is a symbolic link; the site holds "
                         "only files robench wrote: run `robench publish build` again")
    shutil.copytree(site, to, dirs_exist_ok=True)
    result.lines.append(f"- copied {markdown_code(site)} to {markdown_code(to)}")
    return append_report(repo, result)


#: The steps ``robench publish check`` runs (a pull request's), in order.
CHECK = ("validate", "verify", "diff")
#: The steps ``robench publish run`` runs (the main branch's), in order.
RUN = CHECK + ("merge", "build")
