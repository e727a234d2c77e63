"""`robench init-leaderboard` and `robench publish`: a leaderboard repository and its pipeline."""

from __future__ import annotations

import sys

import click

from robench.cli.common import fail, friendly_errors


@click.command("init-leaderboard")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--title", default="robench leaderboard", show_default=True,
              help="The leaderboard's title (README and settings).")
@click.option("--example/--no-example", default=True, show_default=True,
              help="Add contributions/example.db from a small real run (digits, svm, rho, "
                   "2 repeats; about half a minute) so the pipeline has something to check.")
@friendly_errors
def init_leaderboard(path, title, example):
    """Write a leaderboard repository: contributions/, the published database, the site
    folder, a README for contributors and a GitHub Actions workflow whose every step is one
    `robench publish` command.

    \b
    Example:
      robench init-leaderboard my-board && cd my-board
      robench publish run .          # check, merge and build the example contribution
    """
    from pathlib import Path

    from robench.exchange.publishing import init_repository, robench_command

    for name in init_repository(path, title=title):
        click.echo(f"wrote {Path(path) / name}")
    if example:
        target = Path(path) / "contributions" / "example.db"
        click.echo(f"running a small example contribution into {target} ...")
        proc = robench_command("run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2",
                        "--db", target)
        if proc.returncode != 0:
            fail(f"the example run failed: {proc.stderr.strip().splitlines()[-1:]}")
        click.echo(f"wrote {target}")
    click.echo(f"Next: cd {path} && robench publish run .   (docs/publishing.md)")


@click.command("publish")
@click.argument("step", type=click.Choice(["check", "run", "validate", "verify", "diff", "merge",
                                           "build", "deploy"]))
@click.argument("repo", type=click.Path(file_okay=False, exists=True), default=".")
@click.option("--to", "to", default=None, type=click.Path(file_okay=False),
              help="deploy: the folder the site is copied to.")
@friendly_errors
def publish(step, repo, to):
    """Run one step of a leaderboard repository's pipeline (the same in CI and locally).

    \b
    check     validate + verify + diff: what a pull request runs
    run       check + merge + build: what the main branch runs
    validate  merge pending contributions into a staging copy: schema, scores recomputed
              from their trials, no conflicts
    verify    re-run a sample of each pending contribution's trials here
    diff      no published score gets worse beyond its interval
    merge     merge pending contributions into published/robench.db, record them
    build     rebuild site/ from the published database
    deploy    copy site/ to --to
    The report of the steps is .staging/report.md (a pull-request comment). Exit 1 when a
    contribution is rejected or a step fails.

    \b
    Examples:
      robench publish check .
      robench publish run .
      robench publish deploy . --to ../gh-pages
    """
    from robench.exchange import publishing

    if step == "deploy":
        if not to:
            raise click.UsageError("deploy needs --to FOLDER")
        results = [publishing.deploy(repo, to)]
    else:
        names = {"check": publishing.CHECK, "run": publishing.RUN}.get(step, (step,))
        results = []
        for name in names:
            results.append(publishing.STEPS[name](repo))
            if not results[-1].ok:
                break
    for r in results:
        click.echo(f"{r.step}: {'ok' if r.ok else 'FAILED'}")
        for line in r.lines:
            click.echo(f"  {line}")
    if not all(r.ok for r in results):
        click.secho("rejected: see the reasons above (also in .staging/report.md)", fg="red",
                    err=True)
        sys.exit(1)


#: The commands this module adds to the ``robench`` group.
COMMANDS = (init_leaderboard, publish)
