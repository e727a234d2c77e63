"""`robench results` and `robench query`: read the stored scores and rows."""

from __future__ import annotations

import difflib
import os
import sys
import threading

import click

from robench.cli.common import (Finite, JsonStream, config_option, db_option, echo, emit_scores,
                                format_option, friendly_errors, load_registry, metric_order,
                                metric_spec, print_reports, stream)
from robench.data import DatasetError
from robench.data.references import canonical_reference, checked_reference
from robench.metric_kit import is_helper, without_helpers
from robench.present.formatting import cut, fixed, interval_label, printable, rule_lines
from robench.storage.readonly import schema_objects, stream_readonly
from robench.storage.store import SCHEMA, Store
from robench.storage.verification import status, verifications


@click.command()
@click.option("--dataset", "-d", default=None,
              help="Only this data set (one given by file, as it was run: npz:PATH).")
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
    and the family's own report (the ranked table `robench run` prints; a report longer than
    20 lines is shown by its headline table unless --metric names it); --all-scores prints
    every stored score instead, one row each. --format json/csv export every score with its
    details and versions. Each table shows the scores of one configuration (see --config).

    \b
    Examples:
      robench results
      robench results --dataset digits --metric rho
      robench results --all-scores              # every score, one row each
      robench results --dataset digits --metric rho --format json  # with each rank
      robench results --config all              # every configuration, labelled
    """
    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    store = Store(db_path, readonly=True)
    dataset = stored_dataset_name(store, dataset)
    _check_names(store, dataset=dataset, metric=metric, model=model)
    got = read_results(store, config, dataset=dataset, metric=metric, model=model, fmt=fmt)
    if fmt != "table":
        emit_scores(got["rows"], fmt)
        return
    if all_scores:
        for choice in got["shown"]:
            echo(f"{choice.dataset} / {choice.metric}: {choice.text}")
        emit_scores(got["rows"], fmt)
    else:
        from robench.present.leaderboard import reading_stored_ranks  # jinja2: on use

        with reading_stored_ranks(store):  # the families' tables show the stored ranks
            _print_headline_tables(load_registry(), got["rows"], got["shown"],
                                   whole=metric is not None)
    pseudo = _pseudo_models(load_registry())  # data-set-level scores: no model to verify
    verified = {k: v for k, v in got["verified"].items() if k[1] not in pseudo}
    if verified:
        echo("\nverification (robench verify):")
        for (d, m), v in sorted(verified.items()):
            echo(f"  {d} / {m}: {v['text']}")
    if got["helper_rows"]:
        echo("helper models (trained by a metric for its own scores; not listed above, "
             "never ranked; --format json has their scores):")
        for d in sorted({r["dataset"] for r in got["helper_rows"]}):
            names = sorted({r["model"] for r in got["helper_rows"] if r["dataset"] == d})
            by = sorted({m for n in names for m in got["helpers"][(d, n)]})
            echo(f"  {d}: {', '.join(names)} (for {', '.join(by)})")


def read_results(store, config, *, dataset=None, metric=None, model=None,
                 fmt: str = "table") -> dict:
    """Return what ``robench results`` shows: rows, helper rows, helpers, verified, shown."""
    # jinja2: imported on use
    from robench.present.leaderboard import attach_ranks, chosen_configurations, registered_sections

    rows, choices = chosen_configurations(store, config, dataset=dataset, metric=metric)
    helpers = store.helper_models()
    if fmt in ("json", "csv"):  # ranks are relative to the whole table: before --model filters
        # the ranks stored with the scores (robench.run.ranking): helpers never have one
        attach_ranks(store, without_helpers(rows, helpers), registered_sections(load_registry()))
    if model is not None:
        rows = [r for r in rows if r["model"] == model]
    for row in rows:
        row["helper"] = is_helper(row, helpers)
    helper_rows = [r for r in rows if r["helper"]]
    if fmt == "table":  # shown apart below: nobody asked for them, so they are not listed
        rows = [r for r in rows if not r["helper"]]
    records = verifications(store)  # each row's robench verify status, by data set and model
    verified = {(d, m): status(records, dataset=d, model=m)
                for d, m in dict.fromkeys((r["dataset"], r["model"]) for r in rows)}
    for row in rows:
        row["verification"] = verified[(row["dataset"], row["model"])]
    if fmt != "table":
        for row, versions in zip(rows, store.score_versions(rows)):
            row["versions"] = versions
    shown = sorted((c for c in choices.values()
                    if any(r["dataset"] == c.dataset and r["metric"] == c.metric for r in rows)),
                   key=lambda c: (str(c.dataset), str(c.metric)))
    return {"rows": rows, "helper_rows": helper_rows, "helpers": helpers,
            "verified": verified, "shown": shown}


def _print_headline_tables(reg, rows, choices, whole: bool = False) -> None:
    """Print per data set and metric its configuration and the family's report."""
    choice_of = {(c.dataset, c.metric): c for c in choices}
    pseudo = _pseudo_models(reg)
    for n, ds in enumerate(sorted({r["dataset"] for r in rows}, key=str)):
        mine = [r for r in rows if r["dataset"] == ds]
        models = {r["model"] for r in mine} - pseudo
        echo(("\n" if n else "") + f"=== {ds}: {len(models)} model(s), "
             f"{len({r['metric'] for r in mine})} metric(s) ===")
        for metric in metric_order(reg, {r["metric"] for r in mine}):
            choice = choice_of.get((ds, metric))
            if choice is not None:
                echo(f"\n{ds} / {metric}: {choice.text}")
            own = [r for r in mine if r["metric"] == metric]
            try:  # a database can come from anyone: a value its family cannot read
                lines = _table_lines(reg, ds, metric, own, whole)
            except Exception as exc:  # noqa: BLE001 - ... leaves its rows as stored
                why = f"{type(exc).__name__}: {exc}"
                echo(f"  ({metric}'s table could not be drawn from the stored scores "
                     f"({why[:200]}); its scores as stored:)")
                emit_scores(own, "table")
                continue
            if lines is None:
                print_reports(reg, own)  # no report of its own: the generic table
            for line in lines or ():
                echo(line)
    if rows:
        echo("\n(every stored score, one row each: robench results --all-scores; "
             "with details: --format json)")


def _table_lines(reg, ds, metric: str, rows: list, whole: bool):
    """Return one metric's lines of one data set (shortened unless ``whole``), or None."""
    spec = metric_spec(reg, metric)
    report = "\n".join(spec.report(rows)).split("\n") if getattr(spec, "report", None) else []
    if not report:
        return None
    if whole or len(report) <= REPORT_LINES:
        return report
    short = _headline_lines(reg, metric, rows)
    if short:
        more = "the whole report"
    else:  # no headline: the report's first tables that fit, then where the rest is
        short, left = _first_blocks(report, REPORT_LINES)
        more = f"{left} more table(s)"
    return short + [f"  ({more}: robench results -d {ds} --metric {metric})"]


def _pseudo_models(reg) -> set:
    """Return the names under which metrics store data-set-level scores (not models)."""
    return {""} | {m for spec in reg.all("metrics") if spec.leaderboard is not None
                   for m in spec.leaderboard.pseudo_models}


#: A family's report longer than this many lines is shown by its headline table in the
#: default view (about a screen per data set); `--metric NAME` prints it whole.
REPORT_LINES = 20


def _first_blocks(lines: list, most: int) -> tuple:
    """Return (the report's first tables that fit in ``most`` lines, how many are left)."""
    blocks: list = []
    for line in lines:
        if not blocks or (not line.strip() and blocks[-1][-1].strip()):
            blocks.append([])
        blocks[-1].append(line)
    kept, n = [], 0
    for block in blocks:
        if kept and n + len(block) > most:
            break
        kept.append(block)
        n += len(block)
    return [line for block in kept for line in block], len(blocks) - len(kept)


def _headline_lines(reg, metric: str, rows: list):
    """Return the metric's headline table as text, or None without one."""
    section = getattr(metric_spec(reg, metric), "leaderboard", None)
    head = section.headline(rows) if section is not None and section.headline else None
    if not head or not head.get("rows"):
        return None
    pct = head.get("format") == "pct"
    beside = list(section.columns)
    width = max(18, *(len(str(r["model"])) + 1 for r in head["rows"]))
    intervals = any(r.get("rank_interval") for r in head["rows"])
    ranked = any(r.get("rank") is not None for r in head["rows"])
    lines = [f"\n{rows[0]['dataset']} - {head.get('label') or metric}: "
             + ("sorted by the estimate" if ranked else "best first, not ranked")
             + ("" if intervals or not ranked
                else " (# is the order of the estimates, no tested rank)"),
             f"  {'rank':>5} {'#':>3} {'model':<{width}}{'score':>8} "
             f"{interval_label(head['rows']):>17}"
             + "".join(f" {label[:12]:>12}" for _, label, _ in beside)]
    lines += [_headline_row(r, width, pct, beside) for r in head["rows"]]
    if head.get("rule") and len(head["rows"]) > 1:  # the section's own rule (paired ranks)
        lines += rule_lines(f"{head['rule']}.")
    return lines


def _headline_row(r: dict, width: int, pct: bool, beside: list) -> str:
    """Return one model's line of a headline table."""
    rank = r.get("rank_interval") or "-"
    pos = "-" if r.get("rank") is None else str(r["rank"])
    ci = (f"[{fixed(r.get('ci_low'), pct, 0).strip()}, {fixed(r.get('ci_high'), pct, 0).strip()}]"
          if r.get("ci_low") is not None and r.get("ci_high") is not None else "")
    return (f"  {rank:>5} {pos:>3} {str(r['model']):<{width}}{fixed(r.get('value'), pct, 8)}"
            f" {ci:>17}" + "".join(f" {fixed(r.get(key), fmt == 'pct', 12)}"
                                   for key, _, fmt in beside))


def stored_dataset_name(store, dataset):
    """Return the name ``-d`` means in ``store``: a file's (``npz:PATH``) stable name, or its
    absolute path in a database not migrated since an older robench; any other as given."""
    known = {r[0] for r in store.db.execute("SELECT DISTINCT dataset FROM scores")}
    if dataset is None or dataset in known or ":" not in dataset:
        return dataset
    registry = load_registry()
    try:
        resolver, target, options = checked_reference(registry, "resolvers", dataset,
                                                      extra=("name",))
    except DatasetError:
        return dataset  # not a reference: _check_names names the known data sets
    if not resolver.takes_path:
        return dataset
    old = canonical_reference(resolver, target, {k: v for k, v in options.items()
                                                 if k != "name"})
    if old in known and "name" not in options:
        return old
    try:
        return registry.resolve_dataset(dataset).name
    except DatasetError as exc:
        raise click.BadParameter(f"{printable(dataset)} cannot be read to find its stored "
                                 f"name: {exc}", param_hint="--dataset") from None


def _check_names(store, **given):
    """Refuse a filter value that no stored score has, naming the known ones (exit 2)."""
    for column, value in given.items():
        if value is None:
            continue
        known = [r[0] for r in store.db.execute(
            f'SELECT DISTINCT "{column}" FROM scores ORDER BY 1').fetchall()]
        if value in known:
            continue
        known = [k for k in known if isinstance(k, str)]
        close = difflib.get_close_matches(value, known, n=1)
        # stored names can be anything: each one short, inert line
        listed = ", ".join(cut(printable(k), 80) for k in known[:50]) + (
            f" and {len(known) - 50} more" if len(known) > 50 else "")
        raise click.BadParameter(
            f"no stored score has {column} '{cut(printable(value), 80)}'."
            + (f" Did you mean '{cut(printable(close[0]), 80)}'?" if close else "")
            + f" Known: {listed or 'none (run `robench run` first)'}",
            param_hint=f"--{column}")


class _QueryCommand(click.Command):
    """``robench query``, whose help names the tables and views of robench's schema."""

    def format_help_text(self, ctx, formatter):
        tables, views = schema_objects(SCHEMA)
        written = self.help
        self.help = written.replace("{tables}", ", ".join(tables)).replace(
            "{views}", ", ".join(views))
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = written


@click.command(cls=_QueryCommand)
@click.argument("sql")
@click.option("--timeout", type=Finite(min=0, min_open=True, max=1e6), default=5.0,
              show_default=True, metavar="SECONDS",
              help="Stop the query after this long (a number of seconds > 0).")
@format_option()
@db_option
@friendly_errors
def query(sql, timeout, fmt, db_path):
    """Run a read-only SQL query on the results database (opened read-only).

    Tables: {tables}; views: {views}. Writes are refused. With
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


COMMANDS = (results, query)
