"""What the robench commands share: error handling, common options, the registry, output."""

from __future__ import annotations

import csv
import functools
import itertools
import json
import math
import os
import sqlite3
import sys
import threading
from pathlib import Path

import click

from robench.errors import USER_ERRORS
from robench.escaping import csv_cell, json_text
from robench.plugins import get_registry
from robench.present.formatting import metric_spec, printable
from robench.present.skips import summarize_skips
from robench.run.configurations import short
from robench.storage.migrations import unwritable
from robench.storage.readonly import decode_json_cells
from robench.storage.store import default_path

KIND_NAMES = ("datasets", "models", "clusterers", "metrics", "protocols", "executors",
              "corruptions")


def fail(message: str, code: int = 2):
    # one line, whatever the message quotes (names from a contributed database, a plugin's
    # error text): no control character reaches the terminal
    click.secho(f"Error: {printable(message)}", fg="red", err=True)
    sys.exit(code)


def echo(text="", err: bool = False, **style) -> None:
    """Print a line that may quote stored or third-party text, control characters escaped."""
    click.secho(printable(text, lines=True), err=err, **style)


#: Exit status of a command whose reader closed the pipe: 128 + SIGPIPE, what a shell reports
#: for a Unix tool ended by it (``robench query ... | head`` under ``set -o pipefail``).
BROKEN_PIPE_EXIT = 141


def reader_gone():
    """Exit quietly because stdout's reader went away (``| head``), as Unix tools do; what is
    still buffered goes to /dev/null, or the flush at exit would print a BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (a test's capture)
        pass
    sys.exit(BROKEN_PIPE_EXIT)


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
        except BrokenPipeError:
            reader_gone()
        except (*USER_ERRORS, FileNotFoundError) as exc:
            fail(str(exc).strip("'\""))
        except ValueError as exc:
            fail(str(exc))
        except sqlite3.Error as exc:
            db = kwargs.get("db_path") or "the results database"
            reason = kwargs.get("db_path") and unwritable(db)
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


class Finite(click.FloatRange):
    """A float option in a range that must also be finite (nan, never compared, passes a range)."""

    name = "float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _check_db_path(ctx, param, value):
    """Refuse a --db that cannot hold a database file (``:memory:``, a device, under a file)."""
    if value:
        if value == ":memory:" or value.startswith("file:"):
            raise click.BadParameter(
                f"{value!r} is not a file; robench keeps results in a database file: "
                "give a path such as robench.db", ctx, param)
        if Path(value).exists() and not Path(value).is_file():
            raise click.BadParameter(
                f"{value} is not a regular file (a device, pipe or socket); give the path of a "
                "database file", ctx, param)
        parent = next((p for p in Path(value).parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise click.BadParameter(f"{parent} is a file, not a folder", ctx, param)
    return value


def db_option(fn):
    """Add --db (default ./robench.db or $ROBENCH_DB)."""
    return click.option(
        "--db", "db_path", default=default_path, callback=_check_db_path,
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
    return get_registry()


def report_broken_plugins(reg):
    for info in reg.infos.values():
        if info.status != "ok":
            echo(f"warning: plugin '{info.name}' failed to load and is ignored: "
                 f"{info.error} (see `robench plugins`)", fg="yellow", err=True)


def print_skips(skipped):
    if skipped:
        click.echo("\nSkipped (not applicable, not counted as failures):")
    for s in summarize_skips(skipped or ()):
        echo(f"  {s['metric']}: {s['reason']}" + (f" ({s['where']})" if s["where"] else ""))


def metric_order(reg, names) -> list:
    """Return metric names in display order (a metric this install lacks comes last)."""
    return sorted(names, key=lambda name: (getattr(metric_spec(reg, name), "display_order", 1000),
                                           str(name)))


def print_reports(reg, rows):
    """Print each metric's report (its own, or a generic table), metrics in display order."""
    by_metric: dict = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(r)
    for name in metric_order(reg, by_metric):
        spec, lines = metric_spec(reg, name), None
        if spec is not None and spec.report is not None:
            try:
                lines = list(spec.report(by_metric[name]))
            except Exception as exc:  # noqa: BLE001 - a stored value its report cannot read
                echo(f"\n{name}: its report could not be drawn from the stored scores "
                     f"({type(exc).__name__}: {exc}); the scores as stored:", err=True)
        if lines is not None:
            for line in lines:
                echo(line)
        else:
            echo(f"\n{name}:")
            emit_scores(by_metric[name], "table")


def emit_scores(rows, fmt):
    cols = ["dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high", "n",
            "higher_is_better", "metric_version", "configuration", "run_id"]
    if fmt != "table":  # exports carry everything: label, details and versions
        cols += ["configuration_label", "contributor", "helper", "details", "versions",
                 "verification"]
    if fmt == "json":  # and a ranked score its rank, or why it has none
        cols += ["ranking"]
    if fmt == "csv":  # the rank interval a ranked score can hold, its estimate's position
        cols += ["rank_interval", "rank_best", "rank_worst", "rank_estimate", "unranked"]
    out = [{c: r.get(c) for c in cols} for r in rows]
    if fmt == "csv":
        for obj, r in zip(out, rows):
            ranking = r.get("ranking") or {}
            obj.update(rank_interval=ranking.get("rank_interval"),
                       rank_best=ranking.get("rank_best"), rank_worst=ranking.get("rank_worst"),
                       rank_estimate=ranking.get("rank"), unranked=ranking.get("unranked"))
            for c in ("details", "versions", "verification"):
                obj[c] = json.dumps(obj[c], sort_keys=True) if obj[c] is not None else None
    elif fmt == "table":
        for obj in out:
            obj["configuration"] = short(obj["configuration"] or "")
    if fmt == "json":
        click.echo(json_text([json_ready(o) for o in out], indent=2))
    else:
        stream(cols, iter([[[r[c] for c in cols] for r in out]]), fmt)


def json_ready(value):
    """Return ``value`` as strict JSON holds it (NaN and infinities null, objects text)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def cell(v):
    """Return a value as a table cell: 4 decimals for floats, control characters escaped."""
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return printable(v)


def stream(cols, batches, fmt, json_out=None):
    """Write a query's rows as they are fetched; table widths come from the first batch."""
    if fmt == "csv":
        w = csv.writer(sys.stdout)  # a cell a spreadsheet opens: no formula, no control character
        w.writerow([csv_cell(c) for c in cols])
        for batch in batches:
            w.writerows([csv_cell(v) for v in row] for row in batch)
        return
    if fmt == "json":
        out = json_out or JsonStream()
        try:
            for batch in batches:
                for row in decode_json_cells(batch):
                    out.row(dict(zip(cols, row)))
        except BaseException as exc:
            out.stop(exc)
            raise
        out.end()
        return
    first = next(batches, [])
    if not first:
        click.echo("(no rows)")
        return
    cells = [[cell(v) for v in r] for r in first]
    cols = [cell(c) for c in cols]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    click.echo("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
    click.echo("  ".join("-" * w for w in widths))
    for r in itertools.chain(cells, ([cell(v) for v in r] for b in batches for r in b)):
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)))


class JsonStream:
    """Write a JSON array row by row, valid however it ends (``{"robench_error": WHY}`` last);
    ``lock`` is held while a row is written (the query's hard time limit takes it to exit)."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self.started = self.ended = False

    def _write(self, text: str) -> None:
        self.out.write(("[\n  " if not self.started else ",\n  ") + text)
        self.started = True

    def row(self, obj: dict) -> None:
        with self.lock:
            self._write(json_text(json_ready(obj)))

    def end(self, last: str = None) -> None:
        with self.lock:
            if not self.ended:
                if last is not None:
                    self._write(last)
                self.out.write("[]\n" if not self.started else "\n]\n")
                self.ended = True
                self.out.flush()

    def stop(self, reason) -> None:
        """Close the array with the reason it stopped (an exception or text)."""
        if isinstance(reason, BaseException):
            reason = str(reason) or type(reason).__name__
        self.end(json_text({"robench_error": str(reason)}))
