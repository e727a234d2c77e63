"""`robench init-leaderboard` and `robench publish`: a leaderboard repository and its pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from robench.cli.common import echo, friendly_errors, load_registry
from robench.errors import MergeError
from robench.exchange import publish as pipeline
from robench.exchange.publish import init_repository
from robench.exchange.publish.scaffold import ADD_PLUGIN_LATER, pinned_plugins


@click.command("init-leaderboard")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--title", default="robench leaderboard", show_default=True,
              help="The leaderboard's title (README and settings).")
@click.option("--requirement", default=None, metavar="REQ",
              help="What the runner installs as robench: a pip requirement (a git URL such "
                   "as 'robench @ git+https://github.com/ORG/robench@COMMIT', a wheel path, "
                   "'robench==X.Y'). Default: the robench running now, as a wheel built from "
                   "its source tree into wheels/ (commit it), or its git URL.")
@click.option("--example/--no-example", default=True, show_default=True,
              help="Add contributions/example.db from a small real run (digits, svm, the "
                   "leaderboard's first metric, 2 repeats; about half a minute) so the "
                   "pipeline has something to check.")
@click.option("--allow-editable", is_flag=True, default=False,
              help="Pin a plugin installed in editable mode (pip install -e) as a wheel built "
                   "from its working tree as it is now; without it such a plugin is refused.")
@friendly_errors
def init_leaderboard(path, title, requirement, example, allow_editable):
    """Write a leaderboard repository: contributions/, the published database, the site
    folder, a README for contributors, requirements.txt for the runner (robench, torch's CPU
    build, every installed plugin with its version: listed when it is done; a plugin installed
    in editable mode only with --allow-editable) and a GitHub Actions workflow whose every
    step is one `robench publish` command.

    \b
    Example:
      robench init-leaderboard my-board && cd my-board
      robench publish run .          # check, merge and build the example contribution
      robench init-leaderboard board --requirement "robench @ git+https://github.com/ORG/robench@COMMIT"
      robench init-leaderboard board --allow-editable   # a plugin under development, as a wheel
    """

    def run_example(folder):
        target = folder / "contributions" / "example.db"
        click.echo("running a small example contribution into "
                   f"{Path(path) / 'contributions' / 'example.db'} ...")
        # the example is a contribution like any other: what a contributor would type, for
        # the metric the leaderboard shows first
        from robench.present.leaderboard import registered_sections  # jinja2: on use

        metric = next(iter(registered_sections(load_registry())))
        proc = subprocess.run([sys.executable, "-m", "robench", "run", "-d", "digits", "-m",
                               "svm", "--metric", metric, "-r", "2", "--db", str(target)],
                              capture_output=True, text=True)
        if proc.returncode != 0:  # nothing is left behind: the folder is moved in at the end
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise MergeError(f"the example run failed: {last}; nothing was written")

    for name in init_repository(path, title=title, requirement=requirement,
                                then=run_example if example else None,
                                allow_editable=allow_editable):
        click.echo(f"wrote {Path(path) / name}")
    if example:
        click.echo(f"wrote {Path(path) / 'contributions' / 'example.db'}")
    pinned = pinned_plugins(path)
    click.echo(f"requirements.txt pins {len(pinned)} plugin(s) for the runner"
               + (":" if pinned else " (none is installed here)"))
    for plugin, version, line in pinned:
        echo(f"  {plugin} {version}: {line}")
    click.echo(ADD_PLUGIN_LATER)
    click.echo(f"Next: cd {path} && robench publish run .   (docs/publishing.md)")


#: {step name: function(repo)} of the pipeline (deploy, which needs --to, apart).
STEPS = {"validate": pipeline.validate, "verify": pipeline.verify, "diff": pipeline.diff,
         "merge": pipeline.merge, "build": pipeline.build}


@click.command("publish")
@click.argument("step", type=click.Choice(["check", "run", "validate", "verify", "diff", "merge",
                                           "build", "deploy"]))
@click.argument("repo", type=click.Path(file_okay=False, exists=True), default=".")
@click.option("--to", "to", default=None, type=click.Path(file_okay=False),
              help="deploy: the folder the site is copied to.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True,
              metavar="SECONDS", help="Wait this long for another `robench publish` on the "
              "same repository to finish (else refuse at once).")
@click.option("--base", default=None, metavar="REF",
              help="check, run, validate: the commit a pull request goes into (its base "
              "branch); a pull request that changes anything outside contributions/ against "
              "it is refused before its settings are read (what the workflow passes).")
@friendly_errors
def publish(step, repo, to, wait, base):
    """Run one step of a leaderboard repository's pipeline (the same in CI and locally).

    \b
    check     validate + verify + diff: what a pull request runs
    run       check + merge + build: what the main branch runs
    validate  merge pending contributions into a staging copy: regular files, schema,
              trials consistent with themselves and the data, scores recomputed from
              their trials, no conflicts
    verify    re-run a sample of each pending contribution's trials here (seed drawn by
              the check, every stratum, by influence, under time limits)
    diff      no published score gets worse beyond its interval
    merge     merge pending contributions into published/robench.db, record them
    build     rebuild site/ from the published database
    deploy    copy site/ to --to
    The report of the steps is .staging/report.md (the job summary). merge merges only
    contributions that merge cleanly and passed verify on this content, and only when all
    pending ones did: otherwise nothing published changes. Exit 1 when a contribution is
    rejected or a step fails.

    \b
    Examples:
      robench publish check .
      robench publish check . --base origin/main   # a pull request: contributions/ only
      robench publish run .
      robench publish deploy . --to ../gh-pages
    """
    if step == "deploy" and not to:
        raise click.UsageError("deploy needs --to FOLDER")
    if base is not None and step not in ("check", "run", "validate"):
        raise MergeError("--base goes with check, run or validate (it is read by validate, "
                         "their first step)")
    # one pipeline at a time per repository: `check` holds the lock over its three steps
    with pipeline.repository_lock(repo, wait=wait):
        if step == "deploy":
            results = [pipeline.deploy(repo, to)]
        else:
            names = {"check": pipeline.CHECK, "run": pipeline.RUN}.get(step, (step,))
            results = []
            for name in names:  # --base is read by validate
                with_base = {"base": base} if name == "validate" and base is not None else {}
                results.append(STEPS[name](repo, **with_base))
                if not results[-1].ok:
                    break
    for r in results:
        click.echo(f"{r.step}: {'ok' if r.ok else 'FAILED'}")
        for line in r.lines:
            echo(f"  {line}")
    if not all(r.ok for r in results):
        click.secho("rejected: see the reasons above (also in .staging/report.md)", fg="red",
                    err=True)
        sys.exit(1)


COMMANDS = (init_leaderboard, publish)
