"""`robench report`: the generated blocks of docs/*.md."""

from __future__ import annotations

import sys

import click

from robench.cli.common import (db_option, friendly_errors, load_registry)
from robench.present.docgen import generate


@click.command()
@click.option("--out", "out_dir", default="docs", show_default=True,
              type=click.Path(file_okay=False), help="Directory whose *.md blocks to rewrite.")
@click.option("--label", default=None, metavar="NAME",
              help="The database's name in the stamps (default: the --db path as given).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 if a generated block differs from the database.")
@db_option
@friendly_errors
def report(out_dir, label, check, db_path):
    """Rewrite the generated figures of the docs from a results database.

    Every block between `<!-- generated: NAME -->` and `<!-- /generated -->` in the
    directory's Markdown files is re-rendered from the database (read-only) and stamped with
    the database, profile, commit and machine; the prose around it is left alone. NAME is
    report:METRIC[:DATASET], scores:METRIC[:DATASET[:SCORE,...]], claims[:METRIC],
    claims-count[:METRIC], runs, seconds or decided (each ranked table's pairs as its stored
    ranks decided them), optionally NAME@PROFILE: only that profile's runs, and left as it is
    when the database has none (robench/present/docgen.py).

    \b
    Examples:
      robench run --all && robench report --db robench.db --out docs
      robench report --db docs/data/standard.db --out docs --check
    """
    done = generate(db_path, out_dir, load_registry(), label=label or db_path, check=check)
    if not done:
        click.echo(f"no generated blocks in {out_dir}/*.md")
        return
    for path, names, changed, kept in done:
        state = ("stale" if check else "rewritten") if changed else "up to date"
        click.echo(f"{path}: {len(names)} block(s) {state}"
                   + (f"; kept {', '.join(kept)} (nothing for it in this database; its "
                      "stamp names its own)" if kept else ""))
    if check and any(changed for _, _, changed, _ in done):
        sys.exit(1)


COMMANDS = (report,)
