"""The ``robench`` command line (one click group)."""

from __future__ import annotations

import functools
import itertools
import json
import os
import sqlite3
import sys
from pathlib import Path

import click

from robench import __version__
from robench.config import DEFAULT_PROFILE, PROFILES

KIND_NAMES = ("datasets", "models", "clusterers", "metrics", "protocols", "executors",
              "corruptions")


def _fail(message: str, code: int = 2):
    click.secho(f"Error: {message}", fg="red", err=True)
    sys.exit(code)


def friendly_errors(fn):
    """Turn expected user errors into a clear message and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from robench.data import DatasetError
        from robench.plugins import PluginError, UnknownComponentError
        from robench.runner import ConfigError
        from robench.sources import SourcesError
        from robench.readonly import QueryTimeout, ReadOnlyQueryError
        from robench.configurations import ConfigurationError
        from robench.migrations import SchemaError

        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            # click would print "Aborted!" and exit 1; a Ctrl-C is 130 everywhere in robench
            click.secho("Interrupted.", fg="yellow", err=True)
            sys.exit(130)
        except (UnknownComponentError, PluginError, ConfigError, SourcesError, DatasetError,
                ReadOnlyQueryError, FileNotFoundError, ConfigurationError, SchemaError,
                QueryTimeout) as exc:
            _fail(str(exc).strip("'\""))
        except ValueError as exc:
            _fail(str(exc))
        except sqlite3.Error as exc:
            db = kwargs.get("db_path") or "the results database"
            if kwargs.get("db_path"):
                from robench.migrations import unwritable

                reason = unwritable(db)
                if reason:
                    _fail(f"{db} cannot be written: {reason}; pick a --db on a writable disk "
                          "(results, query and leaderboard read it where it is)")
            _fail(f"{db}: SQLite refused it ({exc}). If the file is damaged or not a robench "
                  "database, move it away or pick another --db; a run resumes from what it "
                  "stored.")
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            _fail(f"{exc.strerror or exc}{where}")

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


def _registry():
    from robench.plugins import get_registry

    return get_registry()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="robench")
def cli():
    """Measure how robust classifiers are to shift inside a data set.

    \b
    Example:
      robench run --all              # every dataset x model x clusterer, quick profile
      robench results --format json  # the stored scores
      robench leaderboard            # leaderboard/index.html
    """


# ---------------------------------------------------------------------------------- run


def _multi(name, short, kind):
    return click.option(
        f"--{name}", short, f"{kind}_names", multiple=True, metavar="NAME",
        help=f"A {kind[:-1]} to use (repeatable; default: all). See `robench list {kind}`.",
    )


class _RunCommand(click.Command):
    """``robench run``, whose help ends with the knob sections the registered protocols add."""

    def format_epilog(self, ctx, formatter):
        super().format_epilog(ctx, formatter)
        try:
            from robench.config import knob_sections

            sections = knob_sections(_registry())
        except Exception:  # noqa: BLE001 - help must print even when a plugin is broken
            return
        with formatter.section("Knob sections (--set SECTION.KEY=VALUE; `robench knobs`)"):
            formatter.write_dl([(name, f"{owner}: " + ", ".join(k.name for k in knobs))
                                for name, (owner, knobs) in sorted(sections.items())])


@cli.command(cls=_RunCommand)
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
@click.option("--repeats", "-r", type=click.IntRange(min=1), default=None,
              help="Repeats per partition kind (default: from the profile).")
@click.option("--sources", "-k", "k", type=click.IntRange(min=2), default=None,
              help="Sources (clusters) per class (default: from the profile).")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=0, show_default=True,
              help="Seed of everything.")
@click.option("--profile", type=click.Choice(list(PROFILES)), default=DEFAULT_PROFILE,
              show_default=True,
              help="; ".join(f"{name}: {what}" for name, what in PROFILES.items()) + ".")
@click.option("--executor", default=None, metavar="NAME",
              help="Where trials run: local, process (default on a multi-core machine), dask, "
                   "or one a plugin adds.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler to connect to with --executor dask, e.g. tcp://host:8786 "
                   "(default: a local cluster on 127.0.0.1).")
@click.option("--trial-timeout", type=click.FloatRange(min=0, max=1e7), default=None,
              metavar="SECONDS",
              help="Stop a trial that runs longer and record it as failed; the run goes on "
                   "(default: the profile's, quick 900, standard 3600, paper 14400; 0: no "
                   "limit). Not part of any trial key.")
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
@click.option("--until", "until", type=click.Choice(["fixed", "decided"]), default="fixed",
              show_default=True,
              help="fixed: every repeat at once. decided: rho tables in rounds of 6, 12, 24, "
                   "... repeats up to --repeats (or the profile's), intervals at a level "
                   "corrected for the looks; a model stops once its adjacent pairs are decided "
                   "(the paired interval of their rho difference excludes 0, or lies within "
                   "±--precision), a table once all are (docs/adaptive.md).")
@click.option("--precision", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --until decided: two models whose rho difference is shown to lie "
                   "within ±this are equivalent, a decided tie (default 0.01).")
@click.option("--rescore", is_flag=True,
              help="Recompute every score from its trials, even where the trials and the "
                   "metric version are unchanged (by default those stored scores are reused).")
@db_option
@friendly_errors
def run(run_all, datasets_names, models_names, clusterers_names, metric_names, repeats, k, seed,
        profile, executor, jobs, scheduler, cache_dir, data_dir, device, settings, until,
        precision,
        rescore, db_path,
        trial_timeout):
    """Run trials, store them, compute and print scores.

    Trials already stored (same definition and versions) are not run again, so an
    interrupted run resumes where it stopped.

    \b
    Examples:
      robench run --all
      robench run -d digits -m mlp -m cnn-2 --repeats 10
      robench run -d synthetic-sources -c oracle --profile paper
      robench run -d digits -m mlp --metric rho --set train.max_epochs=10
      robench run -d mnist-5k --metric rho --profile paper --until decided
      robench run -d digits -m cnn-2 --device cuda

    Opt-in components (slow) run in the quick profile only when named; --profile paper
    includes them in --all.
    """
    from robench.cache import set_cache_dir
    from robench.config import RunConfig, default_jobs

    if not (run_all or datasets_names or models_names or clusterers_names or metric_names):
        raise click.UsageError("say what to run: --all, or pick with -d/-m/-c/--metric.")
    if precision is not None and until != "decided":
        raise click.UsageError("--precision goes with --until decided")
    from robench.devices import resolve_device

    device = resolve_device(device)  # a device that is not here fails now, exit 2
    if cache_dir:
        set_cache_dir(cache_dir)
    if data_dir:
        from robench.builtin.torchvision_data import set_data_dir

        set_data_dir(data_dir)
    reg = _registry()
    _report_broken_plugins(reg)
    chosen = {}
    for kind, given in (("datasets", datasets_names), ("models", models_names),
                        ("clusterers", clusterers_names), ("metrics", metric_names)):
        # unknown names fail here with the known ones listed; a data set reference
        # (npz:PATH, ...) is read and checked here and named by its canonical form
        given = [reg.get(kind, n).name for n in given]
        if kind == "datasets":
            datasets_names = given
        elif kind == "models":  # a model reference (timm:ARCH) likewise
            models_names = given
        chosen[kind] = list(dict.fromkeys(given)) or reg.names(kind)
    opt_in = {}  # components left out of this run because they are opt-in (slow)
    for kind, given in (("metrics", metric_names), ("clusterers", clusterers_names),
                        ("models", models_names)):
        if not given and profile != "paper":
            opt_in[kind] = [c.name for c in reg.all(kind) if not getattr(c, "in_default_run", True)]
    if not metric_names:  # opt-in metrics (in_default_run=False) only in the paper profile
        chosen["metrics"] = [m.name for m in reg.all("metrics")
                             if m.in_default_run or profile == "paper"]
    if not clusterers_names:  # likewise opt-in clusterers (multicut): named, or paper profile
        chosen["clusterers"] = [c.name for c in reg.all("clusterers")
                                if getattr(c, "in_default_run", True) or profile == "paper"]
    if not models_names:  # likewise opt-in models (slow ones)
        chosen["models"] = [m.name for m in reg.all("models")
                            if getattr(m, "in_default_run", True) or profile == "paper"]
    ncpu = os.cpu_count() or 1
    if executor is None:
        executor = "process" if ncpu > 1 and (jobs or default_jobs()) > 1 else "local"
    reg.get("executors", executor)
    if scheduler and executor != "dask":
        raise click.UsageError("--scheduler goes with --executor dask")
    from robench.config import parse_settings

    cfg = RunConfig(
        datasets=chosen["datasets"], models=chosen["models"], clusterers=chosen["clusterers"],
        metrics=chosen["metrics"], profile=profile, repeats=repeats, k=k, seed=seed,
        executor=executor, jobs=jobs or default_jobs(), device=device,
        settings=parse_settings(settings, reg),
        executor_options={"scheduler": scheduler} if scheduler else {},
        trial_timeout=trial_timeout,
        explicit={"datasets": list(datasets_names), "models": list(models_names),
                  "clusterers": list(clusterers_names)},
    ).resolve(reg)
    from robench.provenance import redact_secrets
    from robench.runner import execute, plan_run
    from robench.store import Store

    # Planned before the database is opened: a run that cannot be made (a bad value, only
    # broken data sets) exits 2 with the file untouched, or not created.
    plan = plan_run(cfg, reg)
    store = Store(db_path)
    progress = _Progress()
    command = redact_secrets("robench " + " ".join(sys.argv[1:]) if sys.argv else "robench run")
    try:
        if until == "decided":
            from robench.adaptive import run_until_decided
            from robench.sequential import PRECISION

            report = run_until_decided(cfg, reg, store, command=command, on_event=progress,
                                       rescore=rescore,
                                       precision=PRECISION if precision is None else precision)
        else:
            report = execute(cfg, reg, store, command=command, on_event=progress,
                             rescore=rescore, plan=plan)
    finally:
        progress.close()
        store.close()
    _print_skips(report.skipped)
    if any(opt_in.values()):
        listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in opt_in.items() if v)
        click.echo(f"\nOpt-in, not run in the quick profile (slow): {listed}. Name them "
                   "(--metric/-m/-c) or use --profile paper.")
    _print_reports(reg, [vars(s) for s in report.scores])
    _print_adaptive(report.adaptive)
    if report.failed:
        click.secho(f"\n{len(report.failed)} trial(s) failed:", fg="red", err=True)
        for row in report.failed[:20]:
            first = (row.get("error") or "").splitlines()[0] if row.get("error") else ""
            click.echo(f"  {_trial_label(row)}: {first}", err=True)
        if len(report.failed) > 20:
            click.echo(f"  ... and {len(report.failed) - 20} more "
                       "(robench query \"select * from trials where status='failed'\")", err=True)
    click.echo(
        f"\nrun {report.run_id}: {report.n_planned} trials planned, {report.n_cached} already "
        f"stored, {report.n_ran} run, {len(report.failed)} failed, {len(report.skipped)} "
        f"combination(s) skipped, {report.seconds:.1f} s. Results in {db_path}."
    )
    if report.interrupted:
        click.secho("Interrupted: every finished trial is stored; run the same command to "
                    "resume.", fg="yellow", err=True)
        sys.exit(130)
    if report.failed:
        sys.exit(1)


def _print_adaptive(tables):
    if not tables:
        return
    click.echo("\nAdaptive repeats (--until decided): intervals above at level "
               f"{tables[0]['level']:.4f} (0.05 over {len(tables[0]['looks_planned'])} planned "
               f"looks: {', '.join(map(str, tables[0]['looks_planned']))}); adjacent pairs by "
               f"the paired interval of their rho difference, equivalent within "
               f"{tables[0]['precision']:g}")
    signs = {"ordered": ">", "equivalent": "~", "undecided": "?"}
    for t in tables:
        reps = ", ".join(f"{m} {r}" for m, r in t["repeats_by_model"].items())
        click.echo(f"  {t['dataset']} / {t['clusterer']}: {t['stopped']}; repeats of at most "
                   f"{t['max_repeats']}: {reps} ({t['trials']} trials)")
        pairs = t.get("pairs") or []
        if pairs:
            chain = pairs[0]["pair"][0] + "".join(
                f" {signs[p['status']]} {p['pair'][1]}" for p in pairs)
            click.echo(f"    {chain}   (> ordered, ~ equivalent, ? undecided)")


def _trial_label(row) -> str:
    clus = f"/{row['clusterer']}" if row.get("clusterer") else ""
    return f"{row['dataset']}/{row['model']}{clus} {row['kind']} #{row['repeat']}"


class _Progress:
    """Print the plan, then progress over trials on stderr.

    On a terminal this is a live bar; otherwise (CI logs, pipes) one line per trial with a
    running count, so long runs show progress wherever their output goes.
    """

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        self.total = self.done = 0
        self.live = self.stream.isatty()

    def echo(self, text, **style):
        click.secho(text, file=self.stream, **style)

    def __call__(self, event, **info):
        if event == "planned":
            self.close()  # a run in rounds (--until decided) plans once per round
            self.total, self.done = info["todo"], 0
            self.echo(
                f"{info['total']} trials planned: {info['cached']} already stored"
                + (" (training nothing)" if info["todo"] == 0 else f", {info['todo']} to run")
                + (f"; {len(info['skipped'])} combination(s) skipped" if info["skipped"] else "")
            )
            if info["todo"] and self.live:
                self.bar = click.progressbar(length=info["todo"], label="trials",
                                             file=self.stream, show_eta=True, show_pos=True,
                                             item_show_func=lambda s: s)
                self.bar.__enter__()
        elif event == "dataset_failed":
            self.echo(f"skipped: {info['reason']}", fg="red")
        elif event == "killed_runs":
            for r in info["runs"]:
                self.echo(f"run {r['id']} (started {r['started_at']}, process {r['pid']}) ended "
                          "without finishing: its process is gone (killed?); marked 'killed'. "
                          "Its finished trials are stored and are not run again.", fg="yellow")
        elif event == "look":
            self.echo(f"look {info['look']} of {info['looks']}: {info['repeats']} repeats for "
                      f"{len(info['tables'])} undecided table(s): {', '.join(info['tables'])}")
        elif event == "decided":
            reps = ", ".join(f"{m} {r}" for m, r in info["repeats"].items())
            self.echo(f"{info['table']}: stopped ({info['reason']}); repeats: {reps}")
        elif event == "prepare":
            self.echo(f"finding sources: {info['dataset']} / {info['clusterer']}")
        elif event == "prepare_failed":
            self.echo(f"sources failed for {info['dataset']} / {info['clusterer']}: "
                      f"{info['error']}", fg="red")
        elif event == "trial":
            row = info["row"]
            self.done += 1
            status = "ok" if row["status"] == "ok" else "FAILED"
            if self.bar is not None:
                self.bar.update(1, f"{_trial_label(row)} {status}")
            else:
                acc = f" acc {row['accuracy']:.4f}" if row.get("accuracy") is not None else ""
                secs = f" {row['seconds']:.1f}s" if row.get("seconds") is not None else ""
                self.echo(f"[{self.done:>{len(str(self.total))}}/{self.total}] "
                          f"{_trial_label(row)} {status}{acc}{secs}")

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _report_broken_plugins(reg):
    for info in reg.infos.values():
        if info.status != "ok":
            click.secho(f"warning: plugin '{info.name}' failed to load and is ignored: "
                        f"{info.error} (see `robench plugins`)", fg="yellow", err=True)


def _print_skips(skipped):
    if not skipped:
        return
    click.echo("\nSkipped (not applicable, not counted as failures):")
    from robench.skips import summarize_skips

    for s in summarize_skips(skipped):
        click.echo(f"  {s['metric']}: {s['reason']}" + (f" ({s['where']})" if s["where"] else ""))


def _print_reports(reg, rows, fmt="table"):
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
            _emit_scores(by_metric[name], "table")


# ------------------------------------------------------------------------------ results


@cli.command()
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
      robench results --dataset digits --metric rho --format json
      robench results --metric rho         # the metric's own report
      robench results --config all         # every configuration, labelled
    """
    from robench.store import Store

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
    if fmt == "table":
        for choice in sorted(choices.values(), key=lambda c: (c.dataset, c.metric)):
            if any(r["dataset"] == choice.dataset and r["metric"] == choice.metric for r in rows):
                click.echo(f"{choice.dataset} / {choice.metric}: {choice.text}")
    if fmt == "table" and rows and metric is not None:
        _print_reports(_registry(), rows)
        return
    _emit_scores(rows, fmt)


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
    from robench.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations

    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    rows = store.scores(**filters)
    rows, choices = table_configurations(rows, labels, resolve(config, labels))
    for row in rows:
        row["configuration_label"] = labels.get(row["configuration"], row["configuration"])
    return rows, choices


def _emit_scores(rows, fmt):
    from robench.configurations import short

    cols = ["dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high", "n",
            "higher_is_better", "metric_version", "configuration", "run_id"]
    if fmt != "table":  # exports carry everything: label, details and versions
        cols += ["configuration_label", "contributor", "details", "versions"]
    out = [{c: r.get(c) for c in cols} for r in rows]
    if fmt == "csv":
        for obj in out:
            for c in ("details", "versions"):
                obj[c] = json.dumps(obj[c], sort_keys=True) if obj[c] is not None else None
    elif fmt == "table":
        for obj in out:
            obj["configuration"] = short(obj["configuration"] or "")
    _emit(cols, [[r[c] for c in cols] for r in out], fmt, objects=out)


def _emit(cols, rows, fmt, objects=None):
    if fmt == "json":
        click.echo(json.dumps(objects if objects is not None
                              else [dict(zip(cols, r)) for r in rows], indent=2, default=str))
    else:
        _stream(cols, iter([list(rows)]), fmt)


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


# -------------------------------------------------------------------------------- query


@cli.command()
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
    from robench.readonly import stream_readonly

    cols, batches = stream_readonly(db_path, sql, timeout=timeout)
    try:
        _stream(cols, batches, fmt)
    finally:
        batches.close()


def _stream(cols, batches, fmt):
    """Write a query's rows as they are fetched (never the whole result in memory).

    csv and json are written row by row; the table's column widths come from the first batch
    (a longer cell later widens its own line only).
    """
    from robench.readonly import decode_json_cells

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
        cells = [[_cell(v) for v in r] for r in first]
        widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
        click.echo("  ".join("-" * w for w in widths))
        for r in itertools.chain(cells, ([_cell(v) for v in r] for b in batches for r in b)):
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)))


# -------------------------------------------------------------------------- leaderboard


@cli.command()
@click.option("--out", "out_dir", default="leaderboard", show_default=True,
              type=click.Path(file_okay=False), help="Directory of the static site.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=1),
              help="Models per data set on the index; every model is on the data set's page.")
@config_option
@db_option
@friendly_errors
def leaderboard(out_dir, top, config, db_path):
    """Build the static leaderboard site from the stored scores.

    Writes index.html (an overview per data set), a page per data set and per model,
    models.html, methods.html, plots/*.svg, images/*.png, scores.json and scores.csv. Links
    are relative: open it from disk or publish the folder on any static host. The same
    database gives the same bytes.

    Each table (data set, metric) ranks the scores of one configuration and names it; by
    default the one covering the most models x clusterers (ties: the latest).

    \b
    Example:
      robench leaderboard --out leaderboard --top 10 && open leaderboard/index.html
    """
    from robench.site import build_site
    from robench.store import Store

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    if config == "all":
        raise click.BadParameter("a leaderboard ranks one configuration per table; give an "
                                 "id, a label or 'legacy'", param_hint="--config")
    out = Path(out_dir)
    with Store(db_path, readonly=True) as store:
        path = build_site(store, out, top=top, config=config)
    pages = {sub: len(list((out / sub).glob("*.html"))) for sub in ("datasets", "models")}
    click.echo(f"wrote {path}: {pages['datasets']} datasets, {pages['models']} models "
               f"({out / 'methods.html'}, {out / 'scores.json'})")


# -------------------------------------------------------------------------------- merge


@cli.command()
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
    from robench.merge import merge_databases

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


@cli.command()
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
    from robench.metadata import build_metadata

    text = json.dumps(build_metadata(db_path), indent=2, sort_keys=True)
    if out is None:
        click.echo(text)
        return
    Path(out).write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {out}")


# ------------------------------------------------------------------------------ migrate


@cli.command()
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
    import sqlite3

    from robench.migrations import CURRENT, check_readable, migrate as migrate_file
    from robench.store import SCHEMA

    if not os.path.isfile(db_path):
        raise FileNotFoundError(f"no results database at {db_path}")
    from robench.readonly import readonly_uri

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


# ---------------------------------------------------------------------------------- data


@cli.group()
def data():
    """Get data sets that robench reads by reference (torchvision:NAME)."""


@data.command("fetch")
@click.argument("name")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where to put the files (default: $ROBENCH_DATA_DIR or "
                   "~/.local/share/robench); `robench run --data-dir` reads them there.")
@friendly_errors
def data_fetch(name, data_dir):
    """Download a torchvision data set (NAME as in torchvision:NAME) with torchvision.

    Files already there are kept. Offline, the error names the files to copy in by hand.

    \b
    Examples:
      robench data fetch fashion-mnist
      robench data fetch cifar10 --data-dir /shared/data
      robench run -d torchvision:cifar10 --data-dir /shared/data -m cnn-2
    """
    from robench.builtin.torchvision_data import data_dir as current, fetch, set_data_dir

    if data_dir:
        set_data_dir(data_dir)
    root = current()
    files = fetch(name.lower(), root)
    click.echo(f"{name}: {len(files)} file(s) under {root}; use -d torchvision:{name.lower()}"
               + (f" --data-dir {data_dir}" if data_dir else ""))


# ------------------------------------------------------------------------------- report


@cli.command()
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
    report:METRIC[:DATASET], scores:METRIC[:DATASET[:SCORE,...]], claims[:METRIC], runs or
    seconds, optionally NAME@PROFILE: only that profile's runs, and left as it is when the
    database has none (robench/docgen.py).

    \b
    Examples:
      robench run --all && robench report --db robench.db --out docs
      robench report --db docs/data/standard.db --out docs --check
    """
    from robench.docgen import generate

    done = generate(db_path, out_dir, _registry(), label=label or db_path, check=check)
    if not done:
        click.echo(f"no generated blocks in {out_dir}/*.md")
        return
    stale = [p for p, _, changed, _ in done if changed]
    for path, names, changed, kept in done:
        state = ("stale" if check else "rewritten") if changed else "up to date"
        click.echo(f"{path}: {len(names)} block(s) {state}"
                   + (f"; kept {', '.join(kept)} (nothing for it in this database; its "
                      "stamp names its own)" if kept else ""))
    if check and stale:
        sys.exit(1)


# -------------------------------------------------------------------------- list, plugins


@cli.command("list")
@click.argument("kind", required=False, type=click.Choice(KIND_NAMES))
@friendly_errors
def list_(kind):
    """List registered components with a one-line description.

    \b
    Examples:
      robench list
      robench list models
    """
    reg = _registry()
    for k in ([kind] if kind else KIND_NAMES):
        click.echo(f"{k}:")
        for spec in reg.all(k):
            extra = ""
            if k == "protocols" and spec.knobs:
                extra = f" (knobs: --set {spec.section}.*)"
            elif not getattr(spec, "in_default_run", True):
                extra = " (opt-in)"
            click.echo(f"  {spec.name:<18} {spec.description}{extra}  [{spec.plugin}]")
        if k == "datasets" and reg.all("resolvers"):
            click.echo("  by reference, no plugin needed (-d SCHEME:...):")
            for r in reg.all("resolvers"):
                click.echo(f"    {r.syntax}")
                click.echo(f"        {r.description}  [{r.plugin}]")
        if k == "models" and reg.all("model-resolvers"):
            click.echo("  by reference, no plugin needed (-m SCHEME:...):")
            for r in reg.all("model-resolvers"):
                click.echo(f"    {r.syntax}")
                click.echo(f"        {r.description}  [{r.plugin}]")
                if r.examples:
                    click.echo(f"        e.g. {', '.join(r.examples)}")
            if any(r.name == "timm" for r in reg.all("model-resolvers")):
                click.echo("    any timm architecture name works: python -c \"import timm; "
                           "print(timm.list_models())\" lists them")


@cli.command()
@click.argument("section", required=False)
@friendly_errors
def knobs(section):
    """List the knobs of every section: type, default, per-profile values, what each does.

    The core owns the `train` section; every other section belongs to a registered protocol.
    Change one with `robench run --set SECTION.KEY=VALUE`.

    \b
    Examples:
      robench knobs
      robench knobs train
    """
    from robench.config import PROFILES, describe_knob, format_value, knob_sections

    sections = knob_sections(_registry())
    if section is not None and section not in sections:
        import difflib

        close = difflib.get_close_matches(section, list(sections), n=1)
        raise click.BadParameter(
            f"unknown section '{section}'." + (f" Did you mean '{close[0]}'?" if close else "")
            + f" Known: {', '.join(sorted(sections))}", param_hint="SECTION")
    for name, (owner, knob_list) in sorted(sections.items()):
        if section is not None and name != section:
            continue
        click.echo(f"{name} ({owner}):")
        for knob in knob_list:
            values = ", ".join(f"{p} {format_value(knob.value_for(p))}" for p in PROFILES)
            click.echo(f"  {name}.{knob.name} = {values}")
            click.echo(f"      {describe_knob(knob)}; {knob.help}")


@cli.command()
@friendly_errors
def plugins():
    """List every plugin: name, version, status and the components it registers.

    \b
    Example:
      robench plugins
    """
    reg = _registry()
    for info in sorted(reg.infos.values(), key=lambda i: (i.source != "builtin", i.name)):
        comps = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(info.components.items()))
        status = click.style(info.status, fg="green" if info.status == "ok" else "red")
        click.echo(f"{info.name} {info.version} [{info.source}] {status}")
        if comps:
            click.echo(f"    {comps}")
        if info.error:
            click.echo(f"    error: {info.error}")


def main():  # pragma: no cover - console script entry
    cli()
