"""The ``robench`` command line: one click group; a module per group of commands."""

from __future__ import annotations

import click

from robench import __version__
from robench.cli import components, db, leaderboard, report, results, run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="robench")
def cli():
    """Measure how robust classifiers are to shift inside a data set.

    \b
    Example:
      robench run --all              # every dataset x model x clusterer, quick profile
      robench results --format json  # the stored scores
      robench leaderboard            # leaderboard/index.html
    """


for module in (run, results, leaderboard, db, components, report):
    for command in module.COMMANDS:
        cli.add_command(command)


def main():  # pragma: no cover - console script entry
    cli()
