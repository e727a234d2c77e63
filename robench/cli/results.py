"""`robench results` and `robench query`: read the stored scores and rows."""

from __future__ import annotations

import os

import click


from robench.cli.common import (config_option, db_option, emit_scores, format_option,
                                friendly_errors, load_registry, metric_order, print_reports,
                                stream)


# ------------------------------------------------------------------------------ results


@click.command()
@click.option("--dataset", "-d", default=None, help="Only this data set.")
@click.option("--metric", default=None, help="Only this metric.")
@click.option("--model", "-m", default=None, help="Only this model.")
@click.option("--all-scores", "all_scores", is_flag=True,
              help="With the table format: every stored score, one row each, instead of the "
                   "families' headline tables.")
@config_option
@format_option()
@db_option
@friendly_errors
def results(dataset, metric, model, all_scores, config, fmt, db_path):
    """Print stored scores: per data set, each metric's headline table.

    \b
    The table format prints, for each data set and metric, the configuration the table shows
    and the family's own report (the ranked table `robench run` prints); --all-scores prints
    every stored score instead, one row each. --format json/csv export every score with its
    details and versions. Each table shows the scores of one configuration (see --config).

    \b
    Examples:
      robench results
      robench results --dataset digits --metric rho
      robench results --all-scores              # every score, one row each
      robench results --format json > scores.json
      robench results --config all              # every configuration, labelled
    """
    from robench.storage.store import Store

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    store = Store(db_path, readonly=True)
    _check_names(store, dataset=dataset, metric=metric, model=model)
    rows, choices = _chosen_scores(store, config, dataset=dataset, metric=metric)
    if model is not None:
        rows = [r for r in rows if r["model"] == model]
    if fmt != "table":
        for row, versions in zip(rows, store.score_versions(rows)):
            row["versions"] = versions
        emit_scores(rows, fmt)
        return
    shown = sorted((c for c in choices.values()
                    if any(r["dataset"] == c.dataset and r["metric"] == c.metric for r in rows)),
                   key=lambda c: (c.dataset, c.metric))
    if all_scores:
        for choice in shown:
            click.echo(f"{choice.dataset} / {choice.metric}: {choice.text}")
        emit_scores(rows, fmt)
        return
    _print_headline_tables(load_registry(), rows, shown)


def _print_headline_tables(reg, rows, choices) -> None:
    """Print each data set's tables: per metric (in display order) the configuration it shows
    and the family's report of that data set's rows."""
    choice_of = {(c.dataset, c.metric): c for c in choices}
    pseudo = {""} | {m for spec in reg.all("metrics") if spec.leaderboard is not None
                     for m in spec.leaderboard.pseudo_models}
    for n, ds in enumerate(sorted({r["dataset"] for r in rows})):
        mine = [r for r in rows if r["dataset"] == ds]
        models = sorted({r["model"] for r in mine} - pseudo)
        click.echo(("\n" if n else "") + f"=== {ds}: {len(models)} model(s), "
                   f"{len({r['metric'] for r in mine})} metric(s) ===")
        for metric in metric_order(reg, {r["metric"] for r in mine}):
            choice = choice_of.get((ds, metric))
            if choice is not None:
                click.echo(f"\n{ds} / {metric}: {choice.text}")
            print_reports(reg, [r for r in mine if r["metric"] == metric])
    if rows:
        click.echo("\n(every stored score, one row each: robench results --all-scores; "
                   "with details: --format json)")


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
