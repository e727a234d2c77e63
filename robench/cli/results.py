"""`robench results` and `robench query`: read the stored scores and rows."""

from __future__ import annotations

import os

import click


from robench.cli.common import (config_option, db_option, emit_scores, format_option, friendly_errors, load_registry, print_reports,
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
                click.echo(f"{choice.dataset} / {choice.metric}: {choice.text}")
    if fmt == "table" and rows and metric is not None:
        print_reports(load_registry(), rows)
    else:
        emit_scores(rows, fmt)
    if fmt == "table" and verified:
        click.echo("verification (robench verify):")
        for (d, m), v in sorted(verified.items()):
            click.echo(f"  {d} / {m}: {v['text']}")
    if fmt == "table" and helper_rows:
        click.echo("helper models (trained by a metric for its own scores; not listed above, "
                   "never ranked; --format json has their scores):")
        for d in sorted({r["dataset"] for r in helper_rows}):
            names = sorted({r["model"] for r in helper_rows if r["dataset"] == d})
            by = sorted({m for n in names for m in helpers[(d, n)]})
            click.echo(f"  {d}: {', '.join(names)} (for {', '.join(by)})")


def _check_names(store, **given):
    """Refuse a filter value that no stored score has, naming the known ones (exit 2)."""
    import difflib

    for column, value in given.items():
        if value is None:
            continue
        known = [r[0] for r in store.db.execute(
            f'SELECT DISTINCT "{column}" FROM scores ORDER BY 1').fetchall()]
        if value in known:
            continue
        close = difflib.get_close_matches(value, known, n=1)
        raise click.BadParameter(
            f"no stored score has {column} '{value}'."
            + (f" Did you mean '{close[0]}'?" if close else "")
            + f" Known: {', '.join(known) or 'none (run `robench run` first)'}",
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
@click.option("--timeout", type=click.FloatRange(min=0), default=5.0, show_default=True,
              metavar="SECONDS", help="Stop the query after this long (0: no limit).")
@format_option()
@db_option
@friendly_errors
def query(sql, timeout, fmt, db_path):
    """Run a read-only SQL query on the results database (opened read-only).

    Tables: runs, configurations, metrics, clusterings, trials, scores, score_groups, skips;
    views: leaderboard, trial_summary, configuration_choice. Writes are refused. With
    --format json, columns holding JSON (details, config, ...) come back as JSON. Rows are
    written as they are fetched (a large result is never held whole); --timeout covers the
    statement until its last row.

    \b
    Examples:
      robench query "select model, value from scores where metric='rho' and score='rho'"
      robench query "select * from leaderboard where metric='rho'" --format json
    """
    from robench.storage.readonly import stream_readonly

    cols, batches = stream_readonly(db_path, sql, timeout=timeout)
    try:
        stream(cols, batches, fmt)
    finally:
        batches.close()


#: The commands this module adds to the ``robench`` group.
COMMANDS = (results, query,)
