"""The ``robench`` command line: one click group; a module per group of commands."""

from __future__ import annotations

import difflib

import click

from robench import __version__
from robench.cli import components, db, leaderboard, publish, report, results, run
from robench.cli.common import reader_gone
from robench.plugins import get_registry
from robench.present.formatting import printable


def _print_version(ctx, param, value):
    """Print robench's version and every installed plugin's, then exit (``--version``)."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"robench {__version__}")

    # the built-ins are robench's own modules (robench's version); the rest were installed
    others = sorted((i for i in get_registry().infos.values() if i.source != "builtin"),
                    key=lambda i: i.name)
    click.echo("plugins: " + ("none besides the built-ins" if not others else ""))
    for info in others:
        state = "" if info.status == "ok" else f" ({info.status}: see `robench plugins`)"
        click.echo(f"  {info.name} {info.version or '(no version)'} [{info.source}]{state}")
    ctx.exit()


#: Words people type for a command that has another name (``robench db``): where to send them.
_MEANT = {
    "db": ("query", "results", "migrate"), "database": ("query", "results", "migrate"),
    "sql": ("query",), "select": ("query",), "show": ("results",), "scores": ("results",),
    "ls": ("list",), "models": ("list",), "datasets": ("list",), "metrics": ("list",),
    "site": ("leaderboard",), "html": ("leaderboard",), "web": ("leaderboard",),
    "version": ("--version",), "help": ("--help",), "check": ("verify",),
    "compare": ("diff",), "upgrade": ("migrate",), "docs": ("report",),
}


class _Group(click.Group):
    """The ``robench`` group: an unknown command is answered with the closest names."""

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = args[0] if args else ""
            if not name or name in self.commands:
                raise
            raise click.UsageError(self.unknown(ctx, name), ctx) from None

    def unknown(self, ctx, name: str) -> str:
        """Return the message for an unknown command: closest names first, then the rest."""
        names = self.list_commands(ctx)
        close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.6)
        close += [n for n in names if n not in close and len(name) > 1 and name.lower() in n]
        close += [n for n in _MEANT.get(name.lower(), ()) if n not in close]
        text = f"No such command '{printable(name)[:60]}'."
        if close:
            quoted = [f"'{n}'" for n in close[:3]]
            text += f" Did you mean {', '.join(quoted[:-1]) + ' or ' if len(quoted) > 1 else ''}"
            text += f"{quoted[-1]}?"
        return text + f" Commands: {', '.join(names)} (robench --help says what each does)."


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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
    try:
        cli()
    except BrokenPipeError:  # a command without friendly_errors (help, list) piped to head
        reader_gone()
