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


cli.add_command(run.run)
cli.add_command(results.results)
cli.add_command(results.query)
cli.add_command(leaderboard.leaderboard)
cli.add_command(db.merge)
cli.add_command(db.verify)
cli.add_command(db.diff)
cli.add_command(db.metadata)
cli.add_command(db.migrate)
cli.add_command(components.data)
cli.add_command(components.list_)
cli.add_command(components.knobs)
cli.add_command(components.plugins)
cli.add_command(report.report)


def main():  # pragma: no cover - console script entry
    cli()
