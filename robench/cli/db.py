"""Database commands: `robench merge`, `verify`, `diff`, `metadata` and `migrate`."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import sys
from collections import Counter
from pathlib import Path

import click

from robench.cli.common import db_option, echo, fail, friendly_errors, load_registry
from robench.escaping import shorten, terminal
from robench.errors import VerifyError
from robench.exchange.diff import diff_databases, json_document, markdown_lines, text_lines
from robench.exchange.merge import merge_databases
from robench.exchange.rename import rename_file_datasets
from robench.present.formatting import cut
from robench.exchange.verify import DEFAULT_SAMPLE, difference_text, verify as verify_trials
from robench.run.config import parse_duration
from robench.run.ranking import refresh_ranks
from robench.storage.metadata import build_metadata
from robench.storage.migrations import (CURRENT, SchemaError, check_readable,
                                        migrate as migrate_file)
from robench.storage.readonly import connect_readonly, readonly_uri
from robench.storage.store import SCHEMA, Store


@click.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--contributor", "contributors", multiple=True, metavar="NAME",
              help="Who contributed each source, in order (default: each file's name).")
@db_option
@friendly_errors
def merge(sources, contributors, db_path):
    """Merge contributors' results databases into --db, keeping where each run came from.

    Sources are untrusted: opened read-only, checked whole before anything is copied (one that
    does not fit is refused, named), copied row by row (never their triggers or views). Runs
    get new ids and the contributor you name (--contributor, default the file's name). Trials
    are compared by what defines their result (key, accuracies, predictions, versions), not by
    when or where they ran. A score is taken only with its trials and only if this install's
    metric code recomputes it from them. A row already stored with different content is a
    conflict: listed here with both values, kept apart in the `conflicts` table, never written
    over. Merging again changes nothing and reports nothing new.

    \b
    Example:
      robench merge alice.db bob.db --contributor alice --contributor bob --db all.db
      robench leaderboard --db all.db
    """
    report = merge_databases(sources, db_path, contributors)
    for s in report.sources:
        _print_merged_source(s)
    for u in report.unchecked:
        echo(f"  {u['n']} score(s) of metric '{u['metric']}' version {u['version']} from "
             f"{u['source']} not copied: that metric is {u['why']}, so they cannot be "
             "recomputed from their trials; install the plugin version that provides "
             "it and merge again", err=True)
    if report.conflicts:
        _print_conflicts(report.conflicts, db_path)
    if report.known_conflicts:
        echo(f"{report.known_conflicts} conflict(s) recorded by an earlier merge, not "
             "listed again", err=True)
    echo(f"merged into {db_path}")


def _print_merged_source(s: dict) -> None:
    """Print what the merge took from one source (or that it was merged before)."""
    if s.get("already"):
        echo(f"{s['source']} ({s['contributor']}): merged before (same file, as "
             f"{s['already']}); nothing new")
        return
    echo(f"{s['source']} ({s['contributor']}): {s['runs']} run(s) copied, "
         f"{s['runs_known']} already merged; " + "; ".join(
             f"{s[k]} {what}(s) copied, {s[k + '_duplicate']} duplicate, "
             f"{s[k + '_conflict']} conflicting"
             for k, what in (("trials", "trial"), ("scores", "score"),
                             ("score_groups", "score group"))))
    for key, what in (("trials_replaced_failed",
                       "stored failed trial(s) replaced by this source's ok one(s)"),
                      ("trials_failed_skipped", "failed trial(s) not copied: their key is "
                       "stored with another result, which is kept"),
                      ("scores_without_trials", "score(s) not copied: the source does not "
                       "hold the trials they were computed from"),
                      ("verifications", "verification record(s) copied")):
        if s[key]:
            echo(f"  {s[key]} {what}")


def _print_conflicts(conflicts: list, db_path) -> None:
    """Print the conflicts of this merge (the first 20), on stderr."""
    kinds = Counter(c["kind"] for c in conflicts)
    each = ", ".join(f"{n} {kind.replace('_', ' ')}{'s' if n > 1 else ''}"
                     for kind, n in sorted(kinds.items()))
    echo(f"{len(conflicts)} conflict(s) ({each}): same identity, different "
         "content. The stored rows are kept; the incoming ones are in the "
         "conflicts table:", fg="yellow", err=True)
    for c in conflicts[:20]:
        if c["recomputed"]:
            values = "; ".join(f"{col} {cut(c['incoming'][col], 80)} claimed, "
                               f"{cut(c['stored'][col], 80)} recomputed" for col in c["columns"])
            echo(f"  score {c['key'][:16]} ({c['label']}) from {c['source']}: not "
                 f"what its trials give here ({c['kept']}): {values}; not copied",
                 err=True)
            continue
        values = "; ".join(f"{col} kept {cut(c['stored'][col], 80)}, incoming "
                           f"{cut(c['incoming'][col], 80)}" for col in c["columns"])
        echo(f"  {c['kind'].replace('_', ' ')} {c['key'][:16]} ({c['label']}) from "
             f"{c['source']}: differs in {', '.join(c['columns'])}: {values}; kept "
             f"the one from {c['kept']}", err=True)
    if len(conflicts) > 20:
        echo(f"  ... and {len(conflicts) - 20} more: robench query --db "
             f"{db_path} 'SELECT kind, key, columns, source FROM conflicts'", err=True)


@click.command()
@click.option("--sample", type=click.IntRange(min=1, max=100_000), default=None,
              metavar="N", help="Trials to re-run (default 10), stratified by model and "
              "protocol.")
@click.option("--contributor", default=None, metavar="NAME",
              help="Only the trials of runs merged from this contributor.")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=0,
              show_default=True, help="Seed of the random sample.")
@click.option("--trial-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="Most seconds one re-run may take (default: the limit "
              "its run had, --trial-timeout as recorded, else its profile's).")
@click.option("--budget", default=None, metavar="DURATION",
              help="Most time all re-runs together may take (90s, 10m, 1h; a bare number: "
              "seconds); trials not reached are refused.")
@click.option("--by-influence", is_flag=True, default=False,
              help="Draw the sample by each trial's influence on the headline scores (what "
              "`robench publish verify` does).")
@db_option
@friendly_errors
def verify(sample, contributor, seed, trial_timeout, budget, by_influence, db_path):
    """Re-run a random sample of stored trials here and check they reproduce.

    \b
    Each sampled trial is re-run from its stored spec (seed, versions, parameters; one trained
    in a batch in a batch as wide) and compared with the stored row: exactly where it ran on
    the same device, torch version and CPU instruction set as here; else each accuracy within
    3 standard errors of the difference of two measurements on its rows plus one row, and the
    differences tested together (sign and t tests): a shift all one way is refused even when
    each difference is small. A trial whose plugin or version is not installed here is
    refused (what to install is said), not counted as a mismatch. Each re-run runs in a worker
    in its own process group, killed with everything it forked a few seconds past its limit
    (its run's, at most --trial-timeout and 20 times its recorded time plus a minute; it
    cannot catch or block that), then refused with the reason. The verification is recorded
    in the database (`robench results` and the site show it).
    Exit 0: every sampled trial was re-run and matches; 1: any mismatch (each listed, stored
    vs re-run) or one-direction shift; 2: bad input, or no sampled trial can be re-run here;
    3: some sampled trials could not be re-run here (not installed, data not here, out of
    time): they are not verified.

    \b
    Examples:
      robench verify --db all.db
      robench verify --db all.db --contributor alice --sample 30 --seed 7
    """
    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run` or "
                                "`robench merge` first")
    _check_database(db_path)  # verify writes its record: never into what is not one
    n = sample or DEFAULT_SAMPLE
    budget = parse_duration(budget) if budget is not None else None  # one line, exit 2

    def show(t):
        # names and values come from the database: one line each, no control character
        name = terminal(" ".join(shorten(t[c], 60) for c in ("dataset", "model", "clusterer",
                                                              "protocol", "kind", "repeat")
                                 if t.get(c) not in (None, "")))
        key = terminal(str(t["key"])[:16])
        if t["outcome"] == "refused":
            hint = ("" if t.get("timed_out") else "; install the plugin version it ran with "
                    "to check it")
            click.echo(f"  refused  {key} ({name}): {terminal(shorten(t['reason'], 2000))}"
                       f"{hint}")
        elif t["outcome"] == "match":
            click.echo(f"  match    {key} ({name}), {t['mode']}")
        else:
            diffs = "; ".join(difference_text(d) for d in t["differences"][:6])
            click.secho(f"  MISMATCH {key} ({name}), {t['mode']}: {terminal(diffs)}",
                        fg="red")

    with Store(db_path) as store:
        click.echo(f"re-running {n} sampled trial(s) of {db_path} (seed {seed}) ...")
        result = verify_trials(store, load_registry(), sample=n, seed=seed,
                               contributor=contributor, on_trial=show,
                               trial_timeout=trial_timeout, budget=budget,
                               weighted=by_influence)
    for shift in result.shifts:
        click.secho(f"  SHIFT    {terminal(shift['text'])}: every such re-run is a mismatch",
                    fg="red")
    matched, mismatched, refused = (result.count(w) for w in ("match", "mismatch", "refused"))
    click.echo(f"verified {matched} of {matched + mismatched} re-run trial(s) on "
               f"{result.host} ({result.device}); {mismatched} mismatch(es), {refused} refused; "
               f"recorded as verification {result.record_id}")
    if mismatched:
        sys.exit(1)
    timed_out = sum(bool(t.get("timed_out")) for t in result.trials)
    if not matched:
        fail(f"none of the {refused} sampled trial(s) can be re-run here: "
             + ("install the plugins and versions they ran with (listed above)" if not timed_out
                else f"{timed_out} ran out of time, the others are listed above"))
    if refused:  # what was not re-run is not verified: it must not pass by omission
        click.secho(f"{refused} of the {len(result.trials)} sampled trial(s) could not be "
                    "re-run here (listed above): they are not verified", fg="yellow", err=True)
        sys.exit(3)


def _check_database(path) -> None:
    """Refuse (one line) a file that is empty, not a robench database or damaged."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise VerifyError(f"{path} is not a regular file")
    if info.st_size == 0:
        raise VerifyError(f"{path} is empty (0 bytes), not a robench results database")
    try:
        conn = connect_readonly(path)
    except SchemaError as exc:
        raise VerifyError(str(exc)) from None
    with contextlib.closing(conn):
        try:
            found = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            found = str(exc)
    if found != "ok":
        raise VerifyError(f"{path} is damaged (SQLite: {found}); nothing was re-run or "
                          "recorded")


@click.command()
@click.argument("db_a", metavar="A", type=click.Path(dir_okay=False))
@click.argument("db_b", metavar="B", type=click.Path(dir_okay=False))
@click.option("--metric", default=None, help="Only this metric's scores.")
@click.option("--models", nargs=2, default=None, metavar="MODEL_A MODEL_B",
              help="Compare MODEL_A's scores in A with MODEL_B's in B (A and B may be one "
                   "file: two versions of a model registered under two names).")
@click.option("--compare-anyway", "anyway", is_flag=True,
              help="Also compare scores whose configuration or component versions differ "
                   "(independently; the differences are kept beside the decision).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True,
              help="Output format (markdown: for a job summary or a comment; only when asked).")
@friendly_errors
def diff(db_a, db_b, metric, models, anyway, fmt):
    """Compare every score two results databases share; exit 1 if any got worse.

    \b
    Scores are matched by data set, model, clusterer, metric, score name and configuration.
    Each change B - A gets a 95% interval: paired by repeat where both scores hold their
    per-repeat values in one configuration (same partitions); paired on the shared repeats
    where one side's trials include the other's (the same command with -r 3 and -r 6: "B
    extends A by 3 repeats"); else from the stored intervals combined as independent.
    \b
    Decisions:
      worse / better   the interval excludes 0, on the score's bad / good side
      changed          it excludes 0, but the score has no direction
      within noise     it includes 0: the data cannot tell (not "unchanged")
      same             the values are equal, or neither side has one
      not comparable   other configurations that do not nest (what differs is named),
                       another metric or component version, other data, or one value only
    Exit 1 when any score got worse beyond its interval, else 0 (a CI guard); 2 for bad
    input. Both files are only read.

    \b
    Examples:
      robench diff before.db after.db
      robench diff r3.db r6.db                            # the same run, extended
      robench diff v1.db v2.db --compare-anyway          # did v2 get better?
      robench diff all.db all.db --models mlp mlp-v2 --metric rho
      robench diff main.db pr.db --metric rho --format markdown >> "$GITHUB_STEP_SUMMARY"
    """
    found = diff_databases(db_a, db_b, metric=metric, models=models, anyway=anyway)
    if fmt == "json":
        click.echo(json_document(found))
    else:
        click.echo("\n".join(markdown_lines(found) if fmt == "markdown" else text_lines(found)))
    if found.worse:
        sys.exit(1)


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
    text = json.dumps(build_metadata(db_path), indent=2, sort_keys=True)
    if out is None:
        click.echo(text)
        return
    Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {out}")


@click.command()
@db_option
@friendly_errors
def migrate(db_path):
    """Bring the results database to this robench's schema version, in place.

    A run does this too when it opens an older file; read commands never do. All steps apply
    in one transaction, or none; then the file is VACUUMed. Data sets an older robench stored
    under a file's absolute path get their stable names (npz:STEM-FFFFFFFF), every key on them
    recomputed.
    Every table's ranks are stored afresh, also when the schema was current.

    \b
    Example:
      robench migrate --db old.db
    """
    if not os.path.isfile(db_path):
        raise FileNotFoundError(f"no results database at {db_path}")
    with contextlib.closing(sqlite3.connect(readonly_uri(db_path), uri=True)) as conn:
        before = check_readable(conn, db_path)
    size = os.path.getsize(db_path)
    steps = migrate_file(db_path, SCHEMA)
    renamed, kept = rename_file_datasets(db_path)
    for old, new in renamed.items():
        echo(f"  data set {shorten(old)} -> {new} (its stable name)")
    for why in kept:
        echo(f"  data set left under its path name: {why}")
    for version, summary in steps:
        click.echo(f"  -> {version}: {summary}")
    # the leaderboard view reads the stored ranks (a file a newer robench opened lacks them)
    with Store(db_path) as store:
        refresh_ranks(store, load_registry())
    if not steps:
        click.echo(f"{db_path}: schema version {before}, up to date")
        return
    click.echo(f"{db_path}: schema version {before} -> {CURRENT} "
               f"({size / 1e6:.1f} MB -> {os.path.getsize(db_path) / 1e6:.1f} MB after VACUUM)")


COMMANDS = (merge, verify, diff, metadata, migrate)
