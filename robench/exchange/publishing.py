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
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from robench.errors import MergeError
from robench.escaping import markdown_code, markdown_text
from robench.exchange.merge import file_sha256

PUBLISHED = Path("published") / "robench.db"
ACCEPTED = Path("published") / "accepted.json"
STAGING = Path(".staging")
SETTINGS = "leaderboard.json"
DEFAULT_SETTINGS = {"title": "robench leaderboard", "verify_sample": 10, "verify_seed": 0}


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


def robench_command(*args, cwd=None) -> subprocess.CompletedProcess:
    """Run one robench command in a child process (each step is what a person would type)."""
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def _tail(text: str, n: int = 12) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def _report(repo, result: StepResult) -> StepResult:
    """Append a step's findings to .staging/report.md (the pull-request comment)."""
    path = Path(repo) / STAGING / "report.md"
    path.parent.mkdir(exist_ok=True)
    mark = "passed" if result.ok else "failed"
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"\n### {result.step}: {mark}\n\n" + "\n".join(result.lines or ["- nothing to do"])
                + "\n")
    return result


def validate(repo) -> StepResult:
    """Merge every pending contribution into a fresh staging copy of the published database."""
    from robench.exchange.merge import merge_databases

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
        if problems:
            result.reject(path.name, "; ".join(problems))
        else:
            result.lines.append(f"- {markdown_code(path.name)}: merges cleanly: "
                                f"{counts.get('trials', 0)} trial(s), {counts.get('scores', 0)} "
                                f"score(s) new, {counts.get('trials_duplicate', 0)} trial(s) "
                                "already published")
    return _report(repo, result)


def verify(repo) -> StepResult:
    """Re-run a sample of each pending contribution's trials here (``robench verify``)."""
    repo = _root(repo)
    conf = settings(repo)
    result = StepResult("verify")
    work = repo / STAGING / "verify"
    work.mkdir(parents=True, exist_ok=True)
    for path in pending(repo):
        copy = work / path.name  # verify records what it checked: never in the contribution
        shutil.copyfile(path, copy)
        proc = robench_command("verify", "--db", copy, "--sample", conf["verify_sample"],
                        "--seed", conf["verify_seed"])
        if proc.returncode == 0:
            result.lines.append(f"- {markdown_code(path.name)}: "
                                f"{markdown_text(_tail(proc.stdout, 1))}")
        elif proc.returncode == 1:
            mismatches = [line.strip() for line in proc.stdout.splitlines() if "MISMATCH" in line]
            result.reject(path.name, "its trials do not reproduce here: "
                          + "; ".join(mismatches[:5]))
        else:
            result.reject(path.name, f"it cannot be verified: {_tail(proc.stderr, 3)}")
    return _report(repo, result)


def diff(repo) -> StepResult:
    """Compare the published database with the staging one (``robench diff``)."""
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
    proc = robench_command("diff", repo / PUBLISHED, staging, "--format", "markdown")
    table = proc.stdout.strip()
    common = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    result.lines.append(table if common else "- no published score is changed by the "
                        "contribution(s): every score is new")
    if proc.returncode == 1:
        result.ok = False
        result.lines.append("- **a published score got worse beyond its interval** (rows marked "
                            "worse above)")
    elif proc.returncode != 0:
        result.ok = False
        result.lines.append(f"- robench diff failed: {markdown_text(_tail(proc.stderr, 3))}")
    return _report(repo, result)


def merge(repo) -> StepResult:
    """Merge the pending contributions into the published database and record them."""
    from robench.exchange.merge import merge_databases

    repo = _root(repo)
    result = StepResult("merge")
    todo = pending(repo)
    if not todo:
        return _report(repo, result)
    (repo / PUBLISHED).parent.mkdir(exist_ok=True)
    report = merge_databases(todo, repo / PUBLISHED, [p.stem for p in todo])
    if report.conflicts:  # `check` refuses these; merging anyway never overwrites (kept apart)
        result.ok = False
        result.lines.append(f"- {len(report.conflicts)} conflict(s) kept apart in the conflicts "
                            "table; run `robench publish check` before merging")
    record = accepted(repo)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for path in todo:
        record[file_sha256(path)] = {"file": path.name, "contributor": path.stem, "accepted": now}
        result.lines.append(f"- {markdown_code(path.name)}: merged as "
                            f"{markdown_code(path.stem)}")
    (repo / ACCEPTED).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return _report(repo, result)


def build(repo) -> StepResult:
    """Rebuild the site from the published database (``robench leaderboard``)."""
    repo = _root(repo)
    result = StepResult("build")
    if not (repo / PUBLISHED).is_file():
        from robench.storage.store import Store

        (repo / PUBLISHED).parent.mkdir(exist_ok=True)
        Store(repo / PUBLISHED).close()  # an empty leaderboard is still a page
    proc = robench_command("leaderboard", "--db", repo / PUBLISHED, "--out", repo / "site")
    if proc.returncode != 0:
        result.ok = False
        result.lines.append(f"- the site did not build: {markdown_text(_tail(proc.stderr, 3))}")
    else:
        result.lines.append(f"- {markdown_text(_tail(proc.stdout, 1))}")
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

GITIGNORE = ".staging/\nsite/\n"


def init_repository(path, title: str = DEFAULT_SETTINGS["title"], requirement: str = "") -> list:
    """Write a leaderboard repository at ``path`` (refusing one that is not empty); return the
    files written."""
    import robench

    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise MergeError(f"{path} is not empty; pick a new folder for the leaderboard")
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
