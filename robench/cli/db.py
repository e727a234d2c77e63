"""Database commands: `robench merge`, `metadata` and `migrate`."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import click


from robench.cli.common import (db_option, friendly_errors)


# -------------------------------------------------------------------------------- merge


@click.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--contributor", "contributors", multiple=True, metavar="NAME",
              help="Who contributed each source, in order (default: each file's name).")
@db_option
@friendly_errors
def merge(sources, contributors, db_path):
    """Merge contributors' results databases into --db, keeping where each run came from.

    Sources are untrusted: opened read-only, checked, copied row by row (never their
    triggers or views). Runs get new ids (the `contributions` table says where each came
    from); a trial, score or score group already stored with different content is a
    conflict: counted, listed here with the stored and incoming values and where the kept
    one came from, kept apart in the `conflicts` table, never written over. Merging again
    changes nothing.

    \b
    Example:
      robench merge alice.db bob.db --db all.db && robench leaderboard --db all.db
    """
    from robench.storage.merge import merge_databases

    report = merge_databases(sources, db_path, contributors)
    for s in report.sources:
        click.echo(f"{s['source']} ({s['contributor']}): {s['runs']} run(s) copied, "
                   f"{s['runs_known']} already merged; {s['trials']} trial(s) copied, "
                   f"{s['trials_duplicate']} duplicate, {s['trials_conflict']} conflicting; "
                   f"{s['scores']} score(s) copied, {s['scores_duplicate']} duplicate, "
                   f"{s['scores_conflict']} conflicting; {s['score_groups']} score group(s) "
                   f"copied, {s['score_groups_duplicate']} duplicate, "
                   f"{s['score_groups_conflict']} conflicting")
        if s["trials_replaced_failed"]:
            click.echo(f"  {s['trials_replaced_failed']} stored failed trial(s) replaced by "
                       "this source's ok one(s)")
        if s["trials_failed_skipped"]:
            click.echo(f"  {s['trials_failed_skipped']} failed trial(s) not copied: their key "
                       "is stored with another result, which is kept")
    if report.conflicts:
        from collections import Counter

        kinds = Counter(c["kind"] for c in report.conflicts)
        each = ", ".join(f"{n} {kind.replace('_', ' ')}{'s' if n > 1 else ''}"
                         for kind, n in sorted(kinds.items()))
        click.secho(f"{len(report.conflicts)} conflict(s) ({each}): same key, different "
                    "content. The stored rows are kept; the incoming ones are in the "
                    "conflicts table:", fg="yellow", err=True)
        for c in report.conflicts[:20]:
            values = "; ".join(f"{col} kept {c['stored'][col]}, incoming {c['incoming'][col]}"
                               for col in c["columns"])
            click.echo(f"  {c['kind'].replace('_', ' ')} {c['key'][:16]} ({c['label']}) from "
                       f"{c['source']}: differs in {', '.join(c['columns'])}: {values}; kept "
                       f"the one from {c['kept']}", err=True)
        if len(report.conflicts) > 20:
            click.echo(f"  ... and {len(report.conflicts) - 20} more: robench query --db "
                       f"{db_path} 'SELECT kind, key, columns, source FROM conflicts'", err=True)
    click.echo(f"merged into {db_path}")


# ----------------------------------------------------------------------------- metadata


@click.command()
@click.option("--out", "-o", "out", default=None, type=click.Path(dir_okay=False),
              help="File to write (default: print it).")
@db_option
@friendly_errors
def metadata(out, db_path):
    """Write datasette metadata describing the database's tables, views and columns.

    Read-only. The metric definitions stored in the file are included.

    \b
    Example:
      robench metadata --db robench.db -o metadata.json && datasette robench.db -m metadata.json
    """
    from robench.storage.metadata import build_metadata

    text = json.dumps(build_metadata(db_path), indent=2, sort_keys=True)
    if out is None:
        click.echo(text)
        return
    Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {out}")


# ------------------------------------------------------------------------------ migrate


@click.command()
@db_option
@friendly_errors
def migrate(db_path):
    """Bring the results database to this robench's schema version, in place.

    A run does this too when it opens an older file; read commands never do (they read every
    version). All steps apply in one transaction, or none; then the file is VACUUMed.

    \b
    Example:
      robench migrate --db old.db
    """

    from robench.storage.migrations import CURRENT, check_readable, migrate as migrate_file
    from robench.storage.store import SCHEMA

    if not os.path.isfile(db_path):
        raise FileNotFoundError(f"no results database at {db_path}")
    from robench.storage.readonly import readonly_uri

    conn = sqlite3.connect(readonly_uri(db_path), uri=True)
    try:
        before = check_readable(conn, db_path)
    finally:
        conn.close()
    size = os.path.getsize(db_path)
    steps = migrate_file(db_path, SCHEMA)
    if not steps:
        click.echo(f"{db_path}: schema version {before}, up to date")
        return
    for version, summary in steps:
        click.echo(f"  -> {version}: {summary}")
    click.echo(f"{db_path}: schema version {before} -> {CURRENT} "
               f"({size / 1e6:.1f} MB -> {os.path.getsize(db_path) / 1e6:.1f} MB after VACUUM)")


#: The commands this module adds to the ``robench`` group.
COMMANDS = (merge, metadata, migrate,)
