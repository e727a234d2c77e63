"""`robench results` and `robench query`: read the stored scores and rows."""

from __future__ import annotations

import os

import click


from robench.cli.common import (Finite, JsonStream, config_option, db_option, echo, emit_scores, format_option, friendly_errors, load_registry, print_reports,
                                stream)


# ------------------------------------------------------------------------------ results


@click.command()
@click.option("--dataset", "-d", default=None, help="Only this data set.")
@click.option("--metric", default=None, help="Only this metric.")
@click.option("--model", "-m", default=None, help="Only this model.")
@config_option
@format_option()
@db_option
@friendly_errors
def results(dataset, metric, model, config, fmt, db_path):
    """Print stored scores, one configuration per table (data set, metric).

    \b
    With --metric and the table format, the metric's own report is printed (each family
    supplies one); otherwise one row per score. Each table shows the scores of one
    configuration (see --config); which one is said above it.

    \b
    Examples:
      robench results
      robench results --dataset digits --metric rho --format json  # with each rank
      robench results --metric rho         # the metric's own report
      robench results --config all         # every configuration, labelled
    """
    from robench.storage.store import Store

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    store = Store(db_path, readonly=True)
    _check_names(store, dataset=dataset, metric=metric, model=model)
    rows, choices = _chosen_scores(store, config, dataset=dataset, metric=metric)
    if fmt == "json":  # ranks are relative to the whole table: before --model filters it
        from robench.present.leaderboard import attach_ranks, registered_sections

        attach_ranks(registered_sections(load_registry()), rows)
    if model is not None:
        rows = [r for r in rows if r["model"] == model]
    from robench.storage.verification import status, verifications

    helpers = store.helper_models()
    for row in rows:
        row["helper"] = (row["dataset"], row["model"]) in helpers
    helper_rows = [r for r in rows if r["helper"]]
    if fmt == "table":  # shown apart below: nobody asked for them, so they are not listed
        rows = [r for r in rows if not r["helper"]]
    records = verifications(store)
    verified = {}
    for row in rows:
        pair = (row["dataset"], row["model"])
        if pair not in verified:
            verified[pair] = status(records, dataset=pair[0], model=pair[1])
        row["verification"] = verified[pair]
    if fmt != "table":
        for row, versions in zip(rows, store.score_versions(rows)):
            row["versions"] = versions
    if fmt == "table":
        for choice in sorted(choices.values(), key=lambda c: (c.dataset, c.metric)):
            if any(r["dataset"] == choice.dataset and r["metric"] == choice.metric for r in rows):
                echo(f"{choice.dataset} / {choice.metric}: {choice.text}")
    if fmt == "table" and rows and metric is not None:
        print_reports(load_registry(), rows)
    else:
        emit_scores(rows, fmt)
    if fmt == "table" and verified:
        click.echo("verification (robench verify):")
        for (d, m), v in sorted(verified.items()):
            echo(f"  {d} / {m}: {v['text']}")
    if fmt == "table" and helper_rows:
        click.echo("helper models (trained by a metric for its own scores; not listed above, "
                   "never ranked; --format json has their scores):")
        for d in sorted({r["dataset"] for r in helper_rows}):
            names = sorted({r["model"] for r in helper_rows if r["dataset"] == d})
            by = sorted({m for n in names for m in helpers[(d, n)]})
            echo(f"  {d}: {', '.join(names)} (for {', '.join(by)})")


def _check_names(store, **given):
    """Refuse a filter value that no stored score has, naming the known ones (exit 2)."""
    import difflib

    from robench.present.formatting import printable

    def shown(name, limit=80):  # stored names can be anything: one short, inert line
        text = printable(name)
        return text if len(text) <= limit else text[:limit - 1] + "\u2026"

    for column, value in given.items():
        if value is None:
            continue
        known = [r[0] for r in store.db.execute(
            f'SELECT DISTINCT "{column}" FROM scores ORDER BY 1').fetchall()]
        if value in known:
            continue
        known = [k for k in known if isinstance(k, str)]
        close = difflib.get_close_matches(value, known, n=1)
        listed = ", ".join(shown(k) for k in known[:50]) + (
            f" and {len(known) - 50} more" if len(known) > 50 else "")
        raise click.BadParameter(
            f"no stored score has {column} '{shown(value)}'."
            + (f" Did you mean '{shown(close[0])}'?" if close else "")
            + f" Known: {listed or 'none (run `robench run` first)'}",
            param_hint=f"--{column}")


def _chosen_scores(store, config, **filters):
    """Return (score rows of each table's chosen configuration, {(dataset, metric): Choice}).

    Every row gets ``configuration_label``. The choice is made over all models of a table, so
    filtering by model afterwards does not change which configuration a table shows.
    """
    from robench.run.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations

    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    rows = store.scores(**filters)
    rows, choices = table_configurations(rows, labels, resolve(config, labels))
    for row in rows:
        row["configuration_label"] = labels.get(row["configuration"], row["configuration"])
    return rows, choices



# -------------------------------------------------------------------------------- query


@click.command()
@click.argument("sql")
@click.option("--timeout", type=Finite(min=0, min_open=True, max=1e6), default=5.0,
              show_default=True, metavar="SECONDS",
              help="Stop the query after this long (a number of seconds > 0).")
@format_option()
@db_option
@friendly_errors
def query(sql, timeout, fmt, db_path):
    """Run a read-only SQL query on the results database (opened read-only).

    Tables: runs, configurations, metrics, clusterings, trials, scores, score_groups, skips;
    views: leaderboard, trial_summary, configuration_choice. Writes are refused. With
    --format json, columns holding JSON (details, config, ...) come back as JSON. Rows are
    written as they are fetched (a large result is never held whole); --timeout covers the
    statement until its last row, and a query still running a second after it ends robench
    whatever SQLite is doing. A JSON stream that stops early ends with an element
    {"robench_error": WHY}, so it is still valid JSON and says it is incomplete; csv and table
    output escape control characters (\x1b ...).

    \b
    Examples:
      robench query "select model, value from scores where metric='rho' and score='rho'"
      robench query "select * from leaderboard where metric='rho'" --format json
    """
    from robench.storage.readonly import stream_readonly

    out = JsonStream() if fmt == "json" else None
    hard = _hard_stop(timeout, out)
    try:
        cols, batches = stream_readonly(db_path, sql, timeout=timeout)
        try:
            stream(cols, batches, fmt, json_out=out)
        finally:
            batches.close()
    finally:
        hard.cancel()


#: Seconds past --timeout after which a query SQLite did not stop ends the process.
HARD_STOP = 1.0


def _hard_stop(timeout: float, out):
    """Start the backstop of --timeout: past it by HARD_STOP, say so and exit 2 at once."""
    import sys
    import threading

    def stop():
        message = (f"the query was stopped after its time limit of {timeout:g} s (one step "
                   "of it ran on); add a LIMIT, or raise it with --timeout SECONDS")
        if out is not None:
            if out.lock.acquire(timeout=2.0):  # never mid-row
                out.lock.release()
                out.stop(message)
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
        click.secho(f"Error: {message}", fg="red", err=True)
        os._exit(2)

    timer = threading.Timer(timeout + HARD_STOP, stop)
    timer.daemon = True
    timer.start()
    return timer


#: The commands this module adds to the ``robench`` group.
COMMANDS = (results, query,)
