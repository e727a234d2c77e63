"""What the robench commands share: error handling, common options, the registry, output."""

from __future__ import annotations

import functools
import itertools
import json
import os
import sqlite3
import sys
from pathlib import Path

import click

from robench.errors import USER_ERRORS


KIND_NAMES = ("datasets", "models", "clusterers", "metrics", "protocols", "executors",
              "corruptions")


def fail(message: str, code: int = 2):
    click.secho(f"Error: {message}", fg="red", err=True)
    sys.exit(code)


def friendly_errors(fn):
    """Turn expected user errors into a clear message and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            # click would print "Aborted!" and exit 1; a Ctrl-C is 130 everywhere in robench
            click.secho("Interrupted.", fg="yellow", err=True)
            sys.exit(130)
        except (*USER_ERRORS, FileNotFoundError) as exc:
            fail(str(exc).strip("'\""))
        except ValueError as exc:
            fail(str(exc))
        except sqlite3.Error as exc:
            db = kwargs.get("db_path") or "the results database"
            if kwargs.get("db_path"):
                from robench.storage.migrations import unwritable

                reason = unwritable(db)
                if reason:
                    fail(f"{db} cannot be written: {reason}; pick a --db on a writable disk "
                          "(results, query and leaderboard read it where it is)")
            fail(f"{db}: SQLite refused it ({exc}). If the file is damaged or not a robench "
                  "database, move it away or pick another --db; a run resumes from what it "
                  "stored.")
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            fail(f"{exc.strerror or exc}{where}")

    return wrapper


def _check_db_path(ctx, param, value):
    """Refuse a --db under a file (the folders it would be created in must be folders)."""
    if value:
        for parent in Path(value).parents:
            if parent.exists():
                if not parent.is_dir():
                    raise click.BadParameter(f"{parent} is a file, not a folder", ctx, param)
                break
    return value


def db_option(fn):
    """Add --db (default ./robench.db or $ROBENCH_DB)."""
    return click.option(
        "--db", "db_path", default=lambda: os.environ.get("ROBENCH_DB", "robench.db"),
        callback=_check_db_path,
        show_default="robench.db or $ROBENCH_DB", type=click.Path(dir_okay=False),
        help="SQLite results database.",
    )(fn)


def config_option(fn):
    """Add --config (which configuration each table shows)."""
    return click.option(
        "--config", "config", default=None, metavar="ID|LABEL|legacy|all",
        help="Which configuration (profile, repeats, sources, seed, knobs) each table shows: "
             "an id or unique id prefix, a label, 'legacy', or 'all'. Default: per table, the "
             "one covering the most models x clusterers, ties to the latest.",
    )(fn)


def format_option(default="table"):
    """Add --format table|csv|json."""
    return click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]),
                        default=default, show_default=True, help="Output format.")


def load_registry():
    from robench.plugins import get_registry

    return get_registry()



def report_broken_plugins(reg):
    for info in reg.infos.values():
        if info.status != "ok":
            click.secho(f"warning: plugin '{info.name}' failed to load and is ignored: "
                        f"{info.error} (see `robench plugins`)", fg="yellow", err=True)


def print_skips(skipped):
    if not skipped:
        return
    click.echo("\nSkipped (not applicable, not counted as failures):")
    from robench.present.skips import summarize_skips

    for s in summarize_skips(skipped):
        click.echo(f"  {s['metric']}: {s['reason']}" + (f" ({s['where']})" if s["where"] else ""))


def print_reports(reg, rows, fmt="table"):
    """Print each metric's report (its own, or a generic table), metrics in display order."""
    by_metric: dict = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(r)

    def order(name):
        try:
            spec = reg.get("metrics", name)
        except LookupError:  # stored by a plugin that is not installed here
            return (1000, name)
        return (spec.display_order, name)

    for name in sorted(by_metric, key=order):
        try:
            spec = reg.get("metrics", name)
        except LookupError:
            spec = None
        if spec is not None and spec.report is not None:
            for line in spec.report(by_metric[name]):
                click.echo(line)
        else:
            click.echo(f"\n{name}:")
            emit_scores(by_metric[name], "table")



def emit_scores(rows, fmt):
    from robench.run.configurations import short

    cols = ["dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high", "n",
            "higher_is_better", "metric_version", "configuration", "run_id"]
    if fmt != "table":  # exports carry everything: label, details and versions
        cols += ["configuration_label", "contributor", "helper", "details", "versions",
                 "verification"]
    if fmt == "json":  # and a ranked score its rank, or why it has none
        cols += ["ranking"]
    out = [{c: r.get(c) for c in cols} for r in rows]
    if fmt == "csv":
        for obj in out:
            for c in ("details", "versions", "verification"):
                obj[c] = json.dumps(obj[c], sort_keys=True) if obj[c] is not None else None
    elif fmt == "table":
        for obj in out:
            obj["configuration"] = short(obj["configuration"] or "")
    emit(cols, [[r[c] for c in cols] for r in out], fmt, objects=out)


def emit(cols, rows, fmt, objects=None):
    if fmt == "json":
        click.echo(json.dumps(objects if objects is not None
                              else [dict(zip(cols, r)) for r in rows], indent=2, default=str))
    else:
        stream(cols, iter([list(rows)]), fmt)


def cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)



def stream(cols, batches, fmt):
    """Write a query's rows as they are fetched (never the whole result in memory).

    csv and json are written row by row; the table's column widths come from the first batch
    (a longer cell later widens its own line only).
    """
    from robench.storage.readonly import decode_json_cells

    if fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        for batch in batches:
            w.writerows(batch)
    elif fmt == "json":
        sep = "[\n"
        for batch in batches:
            for row in decode_json_cells(batch):
                sys.stdout.write(sep + "  " + json.dumps(dict(zip(cols, row)), default=str))
                sep = ",\n"
        sys.stdout.write("[]\n" if sep == "[\n" else "\n]\n")
    else:
        first = next(batches, [])
        if not first:
            click.echo("(no rows)")
            return
        cells = [[cell(v) for v in r] for r in first]
        widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
        click.echo("  ".join("-" * w for w in widths))
        for r in itertools.chain(cells, ([cell(v) for v in r] for b in batches for r in b)):
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)))
