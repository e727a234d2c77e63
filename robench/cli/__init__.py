"""The ``robench`` command line: one click group; a module per group of commands."""

from __future__ import annotations

import click

from robench import __version__
from robench.cli import components, db, leaderboard, publish, report, results, run


def _print_version(ctx, param, value):
    """Print robench's version and every installed plugin's, then exit (``--version``)."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"robench {__version__}")
    from robench.plugins import get_registry

    # the built-ins are robench's own modules (robench's version); the rest were installed
    others = sorted((i for i in get_registry().infos.values() if i.source != "builtin"),
                    key=lambda i: i.name)
    click.echo("plugins: " + ("none besides the built-ins" if not others else ""))
    for info in others:
        state = "" if info.status == "ok" else f" ({info.status}: see `robench plugins`)"
        click.echo(f"  {info.name} {info.version or '(no version)'} [{info.source}]{state}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Show robench's version and the installed plugins' versions, and exit.")
def cli():
    """Measure how robust classifiers are to shift inside a data set.

    \b
    Example:
      robench run --all              # every dataset x model x clusterer, quick profile
      robench results --format json  # the stored scores
      robench leaderboard            # leaderboard/index.html
    """


for module in (run, results, leaderboard, db, components, report, publish):
    for command in module.COMMANDS:
        cli.add_command(command)


def main():  # pragma: no cover - console script entry
    cli()
