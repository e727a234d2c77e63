"""`robench run`: plan, run, store and score trials, with progress."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import click

from robench.metric_kit import without_helpers
from robench.run.config import (DEFAULT_PROFILE, MAX_JOBS, MAX_REPEATS, MAX_SOURCES, PROFILES,
                                REPEATS, knob_sections, parse_duration, parse_settings,
                                profile_settings)
from robench.cli.common import (Finite, db_option, echo, friendly_errors, load_registry,
                                print_reports, print_skips, report_broken_plugins)
from robench.present.progress import Progress
from robench.present.summary import (DEFAULT_WIDTH, decided_text, has_summary, output_width,
                                     summary_lines, wrap)
from robench.builtin.torchvision_data import set_data_dir
from robench.data.cache import set_cache_dir
from robench.process.provenance import redact_secrets
from robench.run import execution
from robench.run.adaptive import paired_metrics, racing_metrics
from robench.stats.ranks import equivalence_margin
from robench.stats.sequential import PRECISION, REPEATS_CAP
from robench.run.estimate import Durations, load_reference, project, summarize
from robench.run import prepare as preparation  # preparation.prepare: tests replace it
from robench.run.execution import UNTIL, choose
from robench.storage.store import Store


def _multi(name, short, kind):
    return click.option(
        f"--{name}", short, f"{kind}_names", multiple=True, metavar="NAME",
        help=f"A {kind[:-1]} to use (repeatable; default: all). See `robench list {kind}`.")


class _RunCommand(click.Command):
    """``robench run``, whose help ends with its profiles, knob sections, racing metrics."""

    def format_epilog(self, ctx, formatter):
        super().format_epilog(ctx, formatter)
        try:
            registry = load_registry()
            sections = knob_sections(registry)
            # the margin a race uses (ROBENCH_MARGIN overrides the metric's)
            racing = [f"{m} (equivalence margin {equivalence_margin(m, margin):g})"
                      for m, margin in ((m, registry.get("metrics", m).paired.margin
                                         or PRECISION) for m in racing_metrics(registry))]
            profiles = {p: profile_settings(p, registry) for p in PROFILES if p != DEFAULT_PROFILE}
        except Exception:  # noqa: BLE001 - help must print even when a plugin is broken
            return
        with formatter.section(f"What each profile changes from {DEFAULT_PROFILE}"):
            formatter.write_dl([(p, ", ".join(changes) or "nothing")
                                for p, changes in profiles.items()])
        with formatter.section("Knob sections (--set SECTION.KEY=VALUE; `robench knobs`)"):
            formatter.write_dl([(name, f"{owner}: " + ", ".join(k.name for k in knobs))
                                for name, (owner, knobs) in sorted(sections.items())])
        with formatter.section("Metrics that race (--until decided, --budget)"):
            formatter.write_text(", ".join(racing) or "none registered")


@click.command(cls=_RunCommand)
@click.option("--all", "run_all", is_flag=True,
              help="Every applicable dataset x model x clusterer x metric. Opt-in components "
                   "(slow; `robench list` marks them) only with --profile paper or by name.")
@_multi("dataset", "-d", "datasets")
@_multi("model", "-m", "models")
@_multi("clusterer", "-c", "clusterers")
@click.option("--metric", "metric_names", multiple=True, metavar="NAME",
              help="A metric to compute (repeatable; default: every registered metric but "
                   "opt-in ones, run only by name or with --profile paper). See `robench list "
                   "metrics`.")
@click.option("--repeats", "-r", type=click.IntRange(min=1, max=MAX_REPEATS), default=None,
              help="Repeats per partition kind (default: from the profile).")
@click.option("--sources", "-k", "k", type=click.IntRange(min=2, max=MAX_SOURCES), default=None,
              help="Sources (clusters) per class (default: from the profile).")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=0, show_default=True,
              help="Seed of everything.")
@click.option("--profile", type=click.Choice(list(PROFILES)), default=None,
              help="; ".join(f"{name}: {what}" for name, what in PROFILES.items()) + ". "
                   f"Default: {DEFAULT_PROFILE}: `run --all` alone is the main job, the "
                   "quick run of everything, then the racing tables' looks within 9 min "
                   "(docs/running.md, \"The default run\").")
@click.option("--executor", default=None, metavar="NAME",
              help="Where trials run: local, process (default on a multi-core machine), dask, "
                   "or one a plugin adds. Only the process and dask executors can stop a "
                   "hostile trial (one that catches every exception or ignores SIGALRM) at "
                   "--trial-timeout: local runs trials in robench's own process, which it "
                   "will not kill.")
@click.option("--jobs", "-j", type=click.IntRange(min=1, max=MAX_JOBS), default=None,
              help="Worker processes (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler to connect to with --executor dask, e.g. tcp://host:8786 "
                   "(default: a local cluster on 127.0.0.1).")
@click.option("--trial-timeout", type=Finite(min=0, max=1e7), default=None,
              metavar="SECONDS",
              help="Stop a trial that runs longer and record it as failed; the run goes on "
                   "(default: the profile's, quick 900, standard 3600, paper 14400; 0: no "
                   "limit). Not part of any trial key. A trial that defeats the limit is "
                   "still recorded as failed; only the process and dask executors can also "
                   "end it (60 s later, with its worker): with --executor local it runs on "
                   "until it returns.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Cache directory (default: $ROBENCH_CACHE_DIR or ~/.cache/robench).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where torchvision:NAME data sets are read from (default: "
                   "$ROBENCH_DATA_DIR or ~/.local/share/robench).")
@click.option("--device", default=lambda: os.environ.get("ROBENCH_DEVICE", "auto"),
              show_default="auto or $ROBENCH_DEVICE", metavar="auto|cpu|cuda|cuda:N|mps",
              help="Where torch models train and predict. auto: the GPU when one is visible, "
                   "else the CPU. With --executor process and several GPUs, each worker gets "
                   "one. Not part of trial keys (results differ only in the last bits); every "
                   "trial records its device.")
@click.option("--set", "settings", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override a knob (repeatable), e.g. --set train.max_epochs=10; VALUE is "
                   "JSON (a bare word is a string). The sections are listed below; "
                   "`robench knobs` shows every knob with its type, default and profile values.")
@click.option("--until", "until", type=click.Choice(list(UNTIL)), default=None,
              help="fixed: every repeat at once (the default without --budget, but for the "
                   "main job, `run --all` alone). decided: the tables of every metric that "
                   "declares a paired comparison (listed below) race in looks (at every "
                   "complete cycle of the sources, 10, 15, 20, ...; 6, 12, 24, ... without) "
                   "up to --repeats (or the profile's), alpha spent across the looks; a model "
                   "stops once its pairs are decided (ordered, or shown within the metric's "
                   "margin), a table once all are (docs/adaptive.md). The default with "
                   "--budget.")
@click.option("--budget", "budget", default=None, metavar="DURATION",
              help="Stop starting trials after this long (90s, 10m, 1h) and race the paired "
                   "metrics' tables (--until decided) up to --repeats (default 40): each "
                   "table's first look first, then the other metrics, then further looks only "
                   "where one fits what is left, the most pairs expected decided per second "
                   "first. A trial in flight at the end is not stored; nothing stored is lost. "
                   "The summary "
                   "says what is decided and what the rest would take.")
@click.option("--precision", type=Finite(min=0, min_open=True, max=1), default=None,
              help="With --until decided: two models whose difference in the raced score is "
                   "shown to lie within ±this are equivalent, a decided tie (default: each "
                   "metric's own margin, listed below; docs/intervals.md).")
@click.option("--rescore", is_flag=True,
              help="Recompute every score from its trials, even where the trials and the "
                   "metric version are unchanged (by default those stored scores are reused).")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Print the plan and stop: trials per data set, model and protocol, what is "
                   "already stored in --db, the combinations skipped and why, and a time "
                   "projected from the durations stored in --db. Nothing runs; --db is only "
                   "read.")
@click.option("--verbose", "-v", is_flag=True,
              help="Print every metric's full report (the tables `robench results` shows) "
                   "and every skipped combination, then the summary.")
@db_option
@friendly_errors
def run(run_all, datasets_names, models_names, clusterers_names, metric_names, repeats, k, seed,
        profile, executor, jobs, scheduler, cache_dir, data_dir, device, settings, until,
        budget, precision, rescore, dry_run, verbose, db_path, trial_timeout):
    """Run trials, store them, compute and print scores.

    Trials already stored (same definition and versions) are not run again, so an
    interrupted run resumes where it stopped. Progress goes to stderr; stdout ends with a
    summary no wider than the terminal (100 columns when it is not one): per data set one
    line per model (its rank in the headline table, the headline score and its interval, and
    each other metric's headline value), what is decided, counts of failures and skips, and where the full
    reports are (-v prints them here; `robench results` any time).

    \b
    Examples:
      robench run --all
      robench run -d digits -m mlp -m cnn-2 --repeats 10
      robench run -d synthetic-sources -c oracle --profile paper
      robench run -d digits -m mlp --set train.max_epochs=10
      robench run -d mnist-5k --profile paper --until decided
      robench run --all --budget 10m
      robench run -d digits -m cnn-2 --device cuda
      robench run --all --profile standard --dry-run

    Opt-in components (slow) run in the quick profile only when named; --profile paper
    includes them in --all.
    """
    if not (run_all or datasets_names or models_names or clusterers_names or metric_names):
        raise click.UsageError("say what to run: --all, or pick with -d/-m/-c/--metric.")
    seconds = parse_duration(budget) if budget is not None else None  # one line, exit 2
    race = dict(until=choose(until, seconds, precision), budget=seconds, precision=precision)
    profile = profile or DEFAULT_PROFILE
    if cache_dir:
        set_cache_dir(cache_dir)
    if data_dir:
        set_data_dir(data_dir)
    reg = load_registry()
    report_broken_plugins(reg)
    # Every value is checked before anything is read or written (robench.run.prepare): the
    # device, the knobs, the cache folder, then the names (a data reference is parsed into the
    # cache); the plan is made before the database is opened, so a run that cannot be made
    # (a bad value, only broken data sets) exits 2 with the file untouched, or not created.
    prepared = preparation.prepare(
        reg, profile=profile, datasets=datasets_names, models=models_names,
        clusterers=clusterers_names, metrics=metric_names, repeats=repeats, k=k, seed=seed,
        settings=parse_settings(settings, reg), executor=executor, jobs=jobs, device=device,
        scheduler=scheduler, trial_timeout=trial_timeout)
    execution.check(prepared, reg, **race)
    race["main"] = run_all and execution.main_job(prepared, reg, until=until, budget=seconds,
                                                  repeats=repeats, precision=precision)
    if trial_timeout and prepared.config.executor == "local":
        echo("warning: --executor local cannot stop a trial that ignores --trial-timeout "
             "(catches every exception or ignores SIGALRM): it runs on until it returns, then "
             "is recorded as failed. Use --executor process or dask to end it at the limit.",
             err=True, fg="yellow")
    if dry_run:
        _print_plan(prepared.plan, prepared.config, db_path)
        _print_race_plan(race, prepared.config, reg)
        _print_opt_in(prepared.selection.opt_in, profile)
        return
    report = _execute(prepared, reg, db_path, race, repeats=repeats, rescore=rescore)
    # after a Ctrl-C the run only prints and exits: a second one must not break that
    with quiet_interrupts() if report.interrupted else contextlib.nullcontext():
        _print_outcome(report, prepared, reg, verbose=verbose, db_path=db_path)


@contextlib.contextmanager
def quiet_interrupts():
    """Ignore Ctrl-C inside the block (on the main thread), then put the handler back."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to change
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def stop_workers(wait: float = 10.0) -> None:
    """End the worker processes this process started (in flight at a Ctrl-C), so that it exits
    now: at exit Python would wait for their trials, and a second Ctrl-C printed a traceback."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    end = time.monotonic() + wait
    for child in children:
        child.join(max(end - time.monotonic(), 0.0))


def _execute(prepared, registry, db_path, race: dict, *, repeats, rescore):
    """Run ``prepared`` into ``db_path`` with progress; return the report. After a Ctrl-C end the
    workers, ignore a second Ctrl-C while the store closes: exit 130 at once and quietly."""
    store, progress = Store(db_path), Progress()
    command = redact_secrets("robench " + " ".join(sys.argv[1:]) if sys.argv else "robench run")
    interrupted = True  # until the run returns: a Ctrl-C it did not catch itself
    try:
        report = execution.execute(prepared, registry, store, **race, max_repeats=repeats,
                                   command=command, on_event=progress, rescore=rescore)
        interrupted = report.interrupted
        return report
    except Exception:
        interrupted = False
        raise
    finally:
        with quiet_interrupts():
            if interrupted:
                stop_workers()
            progress.close()
            store.close()


def _print_outcome(report, prepared, registry, *, verbose, db_path):
    """Print what the run gave (reports, failures, summary) and exit with its status."""
    from robench.present.leaderboard import reading_stored_ranks, registered_sections

    cfg, rows, width = prepared.config, [vars(s) for s in report.scores], output_width()
    sections = registered_sections(registry)
    full = verbose or not has_summary(rows, sections, cfg.models)
    if full:  # without a headline column the reports are the answer
        print_skips(report.skipped)
        print_reports(registry, rows)
        _print_adaptive(report.adaptive)
    if report.failed:  # on stderr; the summary counts them
        _print_failures(report.failed, most=20 if full else 3)
    _print_opt_in(prepared.selection.opt_in, cfg.profile, width)
    # the ranks stored with the scores, not ranked again
    with Store(db_path, readonly=True) as reader, reading_stored_ranks(reader):
        # helpers (purity-ratio's zoo) are in no stored table: ranked without them
        _print_summary(without_helpers(rows, reader.helper_models()), sections, report,
                       cfg, width=width, db_path=db_path, full=full)
    if report.interrupted:
        click.secho("Interrupted: every finished trial is stored; run the same command to "
                    "resume.", fg="yellow", err=True)
        sys.exit(130)
    if report.failed:
        sys.exit(1)


def _print_race_plan(race: dict, cfg, registry) -> None:
    """Say, under a dry run's plan, that this run races and which metrics' tables."""
    paired = paired_metrics(cfg.metrics, registry)
    if race.get("main"):
        click.echo(f"\nThe main job: the plan above, then the tables of {' and '.join(paired)} "
                   "race (a look at every complete cycle, only where pairs are undecided) "
                   f"while they fit {execution.MAIN_BUDGET / 60:g} min from the start "
                   "(docs/running.md).")
        return
    if race["until"] != "decided":
        return
    within = f", within {race['budget'] / 60:g} min" if race["budget"] else ""
    click.echo(f"\nThis run races the tables of {', '.join(paired)} (--until decided): the "
               "plan above is a plain run's at the profile's repeats; racing plans its looks "
               f"as it goes, only where pairs are undecided{within}.")


def _print_opt_in(opt_in, profile, width: int = DEFAULT_WIDTH):
    if opt_in:
        listed = "; ".join(f"{k}: {', '.join(opt_in[k])}"
                           for k in ("metrics", "clusterers", "models") if k in opt_in)
        click.echo("")
        for line in wrap(f"Opt-in, not run in the {profile} profile (slow): {listed}. Name "
                         "them (--metric/-m/-c) or use --profile paper.", width):
            echo(line)


def _print_summary(rows, sections, report, cfg, *, width, db_path, full):
    """Print the run's answer, last and short: tables, decisions, counts, what next."""
    out = summary_lines(rows, sections, models=cfg.models, width=width, metrics=cfg.metrics,
                        budget_spent=getattr(report, "budget_spent", False))
    lines = list(out["lines"])
    decided = _decided_line(out["tables"], report.adaptive, cfg, report)
    if decided:
        lines += wrap(decided, width)
    if out["rest"]:
        rest = sorted({m for ms in out["rest"].values() for m in ms})
        lines += wrap(f"Not in the table{'s' if len(out['tables']) > 1 else ''} above: "
                      f"{', '.join(rest)}" + ("" if full else " (their reports: -v)") + ".",
                      width)
    failed = len(report.failed)
    skipped = (f"{len(report.skipped)} combination(s) skipped as not applicable"
               + (" (-v lists why)" if report.skipped and not full else ""))
    lines += wrap(f"run {report.run_id}: {report.n_planned} trials planned, {report.n_cached} "
                  f"already stored, {report.n_ran} run, {failed} failed"
                  + (f", {report.n_not_run} not run (time budget)"
                     if getattr(report, "n_not_run", 0) else "")
                  + (" (listed above)" if failed else "") + f"; {skipped}; "
                  f"{report.seconds:.1f} s. Results in {db_path}.", width)
    db = "" if str(db_path) == "robench.db" else f" --db {shlex.quote(str(db_path))}"
    example = next(((t["dataset"], t["ranked"]["metric"]) for t in out["tables"] if t["ranked"]),
                   None) or next(((r["dataset"], r["metric"]) for r in rows), None)
    if example:
        ds, metric = (shlex.quote(str(v)) for v in example)
        lines += wrap(f"Full reports: robench results -d {ds} --metric {metric}{db} (any data "
                      f"set and metric); the site: robench leaderboard{db}"
                      + ("." if full else "; here: -v."), width)
    click.echo("")
    for line in lines:
        echo(line)


def _decided_line(tables, adaptive, cfg, report=None) -> str:
    """Return what the rank columns decided and what would decide the rest."""
    if adaptive:  # racing: its own pair decisions (a decided tie is decided too)
        return _race_line(adaptive, cfg, report)
    text = decided_text(tables)
    if not text:
        return ""
    if getattr(report, "main_job", False) and getattr(report, "budget_spent", False):
        # the main job's quick run used the budget: no look fitted
        return (f"{text} The race that follows the quick run found no time left for a look "
                "(the main job stops starting trials after "
                f"{execution.MAIN_BUDGET / 60:g} minutes): `robench run --all --budget 30m` "
                "races on from the trials stored.")
    if all(t["ordered"] == t["pairs"] for t in tables if t["ranked"]):
        return text
    more = [p for p in PROFILES if REPEATS[p] > cfg.repeats]
    # at the profile's repeats: the next profile
    ways = [f"--profile {more[0]} ({REPEATS[more[0]]} repeats)"
            if cfg.repeats == REPEATS[cfg.profile] and more else f"--repeats {2 * cfg.repeats}",
            f"--until decided --repeats {max(32, 2 * cfg.repeats)} (more repeats only "
            "where a pair is undecided)"]
    return f"{text} More repeats decide the rest: {', or '.join(ways)}."


def _race_line(adaptive, cfg, report) -> str:
    """Return what a racing run decided per metric, and what its next looks would cost."""
    metrics, parts = list(dict.fromkeys(t["metric"] for t in adaptive)), []
    for m in metrics:  # "METRIC N of M pairs in K tables": the pairs ordered or equivalent
        tables = [t for t in adaptive if t["metric"] == m]
        pairs = [p for t in tables for p in (t.get("pairs") or [])]
        done = sum(1 for p in pairs if p["status"] != "undecided")
        parts.append(f"{m} {done} of {len(pairs)} pairs in {len(tables)} "
                     f"table{'s' if len(tables) != 1 else ''}")
    nexts = [(m, t) for m in metrics for t in adaptive
             if t["metric"] == m and t.get("next_look") and _undecided(t)]
    spent = getattr(report, "budget_spent", False) or any(
        "budget" in (t.get("stopped") or "") for t in adaptive)
    text = ("Decided (racing" + (", time budget spent" if spent else "") + "): "
            + "; ".join(parts) + " (ordered or equivalent).")
    if nexts:  # what the next looks of the undecided tables would cost
        said = [f"{metric} {t['dataset']}" + (f"/{t['clusterer']}" if t.get("clusterer") else "")
                + f" ({t['next_look']['repeats']} repeats of "
                f"{', '.join(t['next_look']['models'])}, ~{_duration(t['next_look']['seconds'])}"
                f"{power_text(t)})" for metric, t in nexts]
        seconds = sum((t["next_look"]["seconds"] for _, t in nexts), 0.0)
        jobs = max(int(getattr(cfg, "jobs", 1) or 1), 1)
        text += (f" The next looks would decide more: {'; '.join(said[:6])}"
                 + (f"; and {len(said) - 6} more" if len(said) > 6 else "")
                 + f": ~{_duration(seconds)} of worker time, ~{_duration(seconds / jobs)} on "
                 f"{jobs} worker(s); rerun with a larger --budget (stored trials are reused).")
    elif any(_undecided(t) for t in adaptive):
        text += " The rest reached the maximum repeats: a larger --repeats decides more."
    return text


def _undecided(table: dict) -> bool:
    return any(p["status"] == "undecided" for p in table.get("pairs") or [])


def power_text(table: dict) -> str:
    """Return "; 80% power for its open pairs at ~N repeats" ("" without figures)."""
    need = [p["outlook"].get("repeats_80") for p in table.get("pairs") or []
            if p.get("status") == "undecided" and isinstance(p.get("outlook"), dict)]
    if not need:
        return ""
    if any(n is None for n in need):
        return (f"; some open pairs need more than {REPEATS_CAP:,} repeats at their observed "
                "difference")
    return f"; 80% power for its open pairs at ~{max(need)} repeats"


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    if minutes < 1:
        return f"{seconds:.0f} s"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _print_plan(plan, cfg, db_path):
    """Print what ``robench run`` would do with this plan (``--dry-run``); store nothing."""
    ref_rows, ref_stamp = load_reference()
    reference = Durations(ref_rows) if ref_rows else None
    stored, durations, have_db = set(), Durations(fallback=reference), Path(db_path).is_file()
    if have_db:
        with Store(db_path, readonly=True) as store:
            stored = store.ok_trial_keys(plan.specs)
            durations = Durations(store.trial_durations(), fallback=reference)
    rows = summarize(plan, stored, durations)
    click.echo(f"Dry run: what `robench run` would do (profile {cfg.profile}, {cfg.repeats} "
               f"repeats, k={cfg.k}, seed {cfg.seed}); nothing runs, nothing is stored.\n")
    width = max([len(r["dataset"]) for r in rows] + [8])
    mwidth = max([len(r["model"]) for r in rows] + [5])
    click.echo(f"  {'data set':<{width}}  {'model':<{mwidth}}  {'protocol':<14} {'trials':>7} "
               f"{'stored':>7} {'to run':>7} {'estimate':>12}")
    for r in rows:
        est = "-" if r["todo"] == 0 else "no data" if r["unestimated"] == r["todo"] else (
            _duration(r["seconds"]) + ("+" if r["unestimated"] else ""))
        click.echo(f"  {r['dataset']:<{width}}  {r['model']:<{mwidth}}  {r['protocol']:<14} "
                   f"{r['trials']:>7} {r['stored']:>7} {r['todo']:>7} {est:>12}")
    total, n_stored = sum(r["trials"] for r in rows), sum(r["stored"] for r in rows)
    click.echo(f"  total: {total} trials, {n_stored} already stored"
               + (f" in {db_path}" if have_db else f" ({db_path} does not exist yet)")
               + f", {total - n_stored} to run")
    for name, reason in plan.broken.items():
        click.secho(f"skipped: {reason}", fg="red")
    print_skips(plan.skipped)
    proj = project(rows, cfg.jobs)
    if proj["todo"] == 0:
        click.echo("\nProjected time: nothing to run (every trial is stored).")
    elif proj["estimated"] == 0:
        click.echo(f"\nProjected time: no estimate: neither {db_path} nor robench's reference "
                   "durations hold a finished trial of these data sets, models and protocols "
                   "(the projection is made from stored durations; a quick-profile run of the "
                   "same selection gives some).")
    else:
        rest = (f"; {proj['unestimated']} more have no stored trial like them and are not "
                "counted" if proj["unestimated"] else "")
        own = proj["estimated"] - proj["reference"]
        sources = [f"{db_path} ({own} trial(s))"] if own else []
        if proj["reference"]:
            sources.append(f"robench's reference durations ({proj['reference']} trial(s); "
                           f"{_reference_stamp(ref_stamp)}: another machine may be several "
                           "times faster or slower)")
        click.echo(
            f"\nProjected time: ~{_duration(proj['worker_seconds'])} of worker time, "
            f"~{_duration(proj['wall_seconds'])} on {proj['jobs']} worker(s), for the "
            f"{proj['estimated']} of {proj['todo']} trials to run that have an estimate{rest}. "
            f"Estimated from {' and '.join(sources)}: the mean seconds of finished trials of "
            "the same data set, model, protocol and kind, scaled by the epoch budget where it "
            "differs (an upper bound when early stopping ends training sooner); finding "
            "sources is not counted.")


def _reference_stamp(stamp: dict) -> str:
    """Return where and when the reference durations were measured, in a few words."""
    parts = [stamp.get("machine"), stamp.get("date"),
             stamp.get("commit") and f"commit {str(stamp['commit'])[:7]}"]
    return "measured on " + ", ".join(p for p in parts if p) if any(parts) else "unstamped"


def _print_adaptive(tables):
    if not tables:
        return
    first = tables[0]
    click.echo("\nAdaptive repeats (--until decided): a look at "
               f"{', '.join(map(str, first['looks_planned']))} repeats, alpha "
               f"{first['alpha']:g} spent across them ({first.get('spending')}); each "
               "table's tests and intervals above at the level of the look it stopped at; "
               f"every pair by the paired test of its {first.get('score') or 'score'} "
               "difference (docs/intervals.md), equivalent within the margin "
               f"{first['precision']:g}")
    signs = {"ordered": ">", "equivalent": "~", "undecided": "?"}
    for t in tables:
        reps = ", ".join(f"{m} {r}" for m, r in t["repeats_by_model"].items())
        click.echo(f"  {t['dataset']} / {t['clusterer']}: {t['stopped']} (level "
                   f"{100 * t['level']:.3g}%); repeats of at most {t['max_repeats']}: {reps} "
                   f"({t['trials']} trials)")
        pairs = t.get("pairs") or []
        if pairs:
            said = ", ".join(
                f"{p['above']} > {[m for m in p['pair'] if m != p['above']][0]}"
                if p.get("above") else f"{p['pair'][0]} {signs[p['status']]} {p['pair'][1]}"
                for p in pairs)
            click.echo(f"    {said}   (> ordered, ~ equivalent, ? undecided)")
        if t.get("ranks"):
            click.echo("    rank intervals: " + ", ".join(f"{m} {r}" for m, r in t["ranks"].items())
                       + "".join(f"; {m} not ranked ({why})"
                                 for m, why in (t.get("unranked") or {}).items()))


def failure_groups(rows: list) -> list:
    """Return the failed trials as [(where, first error line, [trials])], most first."""
    groups: dict = {}
    for row in rows:
        where = f"{row['dataset']}/{row['model']}"
        error = (row.get("error") or "").strip().splitlines()
        groups.setdefault((where, error[0] if error else "(no error recorded)"), []).append(row)
    return sorted(((w, e, trials) for (w, e), trials in groups.items()),
                  key=lambda g: (-len(g[2]), g[0], g[1]))


def _print_failures(rows: list, most: int = 20) -> None:
    """Print the failed trials once per (data set and model, error), with which trials."""
    groups = failure_groups(rows)
    click.secho(f"\n{len(rows)} trial(s) failed, {len(groups)} distinct error(s):", fg="red",
                err=True)
    for where, error, trials in groups[:most]:
        kinds: dict = {}
        for t in trials:
            kind = (f"{t['clusterer']} " if t.get("clusterer") else "") + (t.get("kind") or "?")
            kinds.setdefault(kind, []).append(t.get("repeat"))
        which = "; ".join(f"{kind} #{', #'.join(str(r) for r in sorted(reps, key=str))}"
                          for kind, reps in sorted(kinds.items()))
        click.echo(f"  {where}: {len(trials)} trial(s) ({which}): {error}", err=True)
    if len(groups) > most:
        click.echo(f"  ... and {len(groups) - most} more", err=True)
    click.echo("  (robench query \"select * from trials where status='failed'\" lists them "
               "with the whole error)", err=True)


COMMANDS = (run,)
