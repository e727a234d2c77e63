"""The ``robench`` command line (one click group)."""

from __future__ import annotations

import functools
import json
import os
import sys

import click

from robench import __version__

KIND_NAMES = ("datasets", "models", "clusterers", "metrics", "executors", "corruptions")


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
        from robench.readonly import ReadOnlyQueryError

        try:
            return fn(*args, **kwargs)
        except (UnknownComponentError, PluginError, ConfigError, SourcesError, DatasetError,
                ReadOnlyQueryError, FileNotFoundError) as exc:
            _fail(str(exc).strip("'\""))
        except ValueError as exc:
            _fail(str(exc))

    return wrapper


def db_option(fn):
    """Add --db (default ./robench.db or $ROBENCH_DB)."""
    return click.option(
        "--db", "db_path", default=lambda: os.environ.get("ROBENCH_DB", "robench.db"),
        show_default="robench.db or $ROBENCH_DB", type=click.Path(dir_okay=False),
        help="SQLite results database.",
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


@cli.command()
@click.option("--all", "run_all", is_flag=True,
              help="Every applicable dataset x model x clusterer x metric. Opt-in metrics "
                   "(adequacy: slow) are included only with --profile paper or --metric NAME.")
@_multi("dataset", "-d", "datasets")
@_multi("model", "-m", "models")
@_multi("clusterer", "-c", "clusterers")
@click.option("--metric", "metric_names", multiple=True, metavar="NAME",
              help="A metric to compute (repeatable; default: all, but the opt-in adequacy "
                   "only with --profile paper). See `robench list metrics`.")
@click.option("--repeats", "-r", type=click.IntRange(min=1), default=None,
              help="Repeats per partition kind (default: from the profile).")
@click.option("--sources", "-k", "k", type=click.IntRange(min=2), default=None,
              help="Sources (clusters) per class (default: 5).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of everything.")
@click.option("--profile", type=click.Choice(["quick", "paper"]), default="quick",
              show_default=True, help="quick: 3 repeats, short training; paper: 100 repeats.")
@click.option("--executor", default=None, metavar="NAME",
              help="Where trials run: local, process (default on a multi-core machine), dask, "
                   "or one a plugin adds.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Dask scheduler to connect to with --executor dask, e.g. tcp://host:8786 "
                   "(default: a local cluster on 127.0.0.1).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Cache directory (default: $ROBENCH_CACHE_DIR or ~/.cache/robench).")
@click.option("--set", "settings", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override a protocol knob (repeatable), e.g. --set coverage.radius=0.8 or "
                   "--set train.max_epochs=10; VALUE is JSON (a bare word is a string). "
                   "Sections: " + ", ".join(("train", "adequacy", "clusterability", "shifted_cv",
                                             "coverage")) + ".")
@click.option("--rescore", is_flag=True,
              help="Recompute every score from its trials, even where the trials and the "
                   "metric version are unchanged (by default those stored scores are reused).")
@db_option
@friendly_errors
def run(run_all, datasets_names, models_names, clusterers_names, metric_names, repeats, k, seed,
        profile, executor, jobs, scheduler, cache_dir, settings, rescore, db_path):
    """Run trials, store them, compute and print scores.

    Trials already stored (same definition and versions) are not run again, so an
    interrupted run resumes where it stopped.

    \b
    Examples:
      robench run --all
      robench run -d digits -m mlp -m cnn-2 --repeats 10
      robench run -d synthetic-sources -c oracle --profile paper
      robench run -d digits -m mlp --metric adequacy --metric lost-test

    The adequacy metric (training-size sweep) is slow, so in the quick profile it runs only
    when named with --metric; --profile paper includes it in --all.
    """
    from robench.cache import set_cache_dir
    from robench.config import RunConfig, default_jobs

    if not (run_all or datasets_names or models_names or clusterers_names or metric_names):
        raise click.UsageError("say what to run: --all, or pick with -d/-m/-c/--metric.")
    if cache_dir:
        set_cache_dir(cache_dir)
    reg = _registry()
    _report_broken_plugins(reg)
    chosen = {}
    for kind, given in (("datasets", datasets_names), ("models", models_names),
                        ("clusterers", clusterers_names), ("metrics", metric_names)):
        for n in given:
            reg.get(kind, n)  # unknown names fail here with the known ones listed
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
    if not models_names:  # likewise opt-in models (the VAE-VGMM paper's CNNs: slow)
        chosen["models"] = [m.name for m in reg.all("models")
                            if getattr(m, "in_default_run", True) or profile == "paper"]
    ncpu = os.cpu_count() or 1
    if executor is None:
        executor = "process" if ncpu > 1 and (jobs or default_jobs()) > 1 else "local"
    reg.get("executors", executor)
    if scheduler and executor != "dask":
        raise click.UsageError("--scheduler goes with --executor dask")
    from robench.config import parse_settings

    overrides = parse_settings(settings, profile)
    cfg = RunConfig(
        datasets=chosen["datasets"], models=chosen["models"], clusterers=chosen["clusterers"],
        metrics=chosen["metrics"], profile=profile, repeats=repeats, k=k, seed=seed,
        executor=executor, jobs=jobs or default_jobs(), **overrides,
        executor_options={"scheduler": scheduler} if scheduler else {},
        explicit={"datasets": list(datasets_names), "models": list(models_names),
                  "clusterers": list(clusterers_names)},
    )
    from robench.runner import execute
    from robench.store import Store

    store = Store(db_path)
    progress = _Progress()
    command = "robench " + " ".join(sys.argv[1:]) if sys.argv else "robench run"
    try:
        report = execute(cfg, reg, store, command=command, on_event=progress, rescore=rescore)
    finally:
        progress.close()
    _print_skips(report.skipped)
    if any(opt_in.values()):
        listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in opt_in.items() if v)
        click.echo(f"\nOpt-in, not run in the quick profile (slow): {listed}. Name them "
                   "(--metric/-m/-c) or use --profile paper.")
    _print_summary(report.scores)
    _print_adequacy([vars(s) for s in report.scores if s.metric == "adequacy"])
    _print_purity_ratio([vars(s) for s in report.scores if s.metric == "purity-ratio"])
    _print_shifted_cv([vars(s) for s in report.scores if s.metric == "shifted-cv"])
    _print_coverage([vars(s) for s in report.scores if s.metric == "coverage"])
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
            self.total = info["todo"]
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


def _pct(v):
    return "   -  " if v is None else f"{100 * v:6.2f}"


def _print_summary(scores):
    """Print rho per data set and clusterer, models ranked best first."""
    table = {}
    for s in scores:
        if s.metric != "rho":
            continue
        table.setdefault((s.dataset, s.clusterer), {}).setdefault(s.model, {})[s.score] = s
    if not table:
        return
    for (dataset, clusterer), models in sorted(table.items()):
        click.echo(f"\n{dataset} - sources by {clusterer}: ranked by rho = E[AccX]/E[AccI]")
        click.echo(f"  {'#':>2} {'model':<14} {'rho':>6} {'95% CI':>15}   "
                   f"{'E[AccX]':>7} {'E[AccI]':>7} {'E[Acc]':>7} {'R':>4}")
        ranked = sorted(models.items(), key=lambda kv: -(kv[1]["rho"].value or -1))
        for i, (model, sc) in enumerate(ranked, 1):
            r = sc["rho"]
            ci = "" if r.ci_low is None else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]"
            rho = "  -   " if r.value is None else f"{r.value:6.3f}"
            click.echo(f"  {i:>2} {model:<14} {rho} {ci:>15}   {_pct(sc['acc_exclusive'].value)}"
                       f"  {_pct(sc['acc_inclusive'].value)} {_pct(sc['acc_random'].value)}"
                       f" {r.n or 0:>4}")


def _print_adequacy(rows):
    """Print the adequacy sweep per (dataset, model, clusterer): sizes, interval, rho, classes."""
    groups = {}
    for s in rows:
        groups.setdefault((s["dataset"], s["model"], s["clusterer"]), {})[s["score"]] = s
    for (dataset, model, clusterer), sc in sorted(groups.items()):
        summary = sc.get("worst_class_rho")
        details = (summary or {}).get("details") or {}
        click.echo(f"\n{dataset} / {model} - sources by {clusterer}: dataset adequacy "
                   "(training-size sweep, test partitions fixed)")
        click.echo(f"  {'size':>6} {'n':>6} {'E[AccX]':>7} {'E[AccI]':>7} {'rho':>6} "
                   f"{'95% CI':>15} {'R':>3}")
        for t in details.get("table", []):
            ci = "" if t.get("ci_low") is None else f"[{t['ci_low']:.3f}, {t['ci_high']:.3f}]"
            rho = "  -   " if t.get("rho") is None else f"{t['rho']:6.3f}"
            n = "" if t.get("n_samples") is None else f"{t['n_samples']:.0f}"
            capped = f"  ({t['n_capped']} capped)" if t.get("n_capped") else ""
            click.echo(f"  {str(t['size']):>6} {n:>6} {_pct(t.get('acc_exclusive'))}  "
                       f"{_pct(t.get('acc_inclusive'))} {rho} {ci:>15} {t.get('n', 0):>3}"
                       + capped)
        for kind in ("inclusive", "exclusive"):
            e = sc.get(f"enough_{kind}")
            if e and (e.get("details") or {}).get("reading"):
                click.echo(f"  enough: {e['details']['reading']}")
        ranking = [c for c in details.get("ranking", [])
                   if c.get("rho") and c["rho"][-1] is not None]
        if ranking:
            click.echo("  least robust classes (rho at the full size):")
            for c in ranking[:3]:
                click.echo(f"    class {c['class']}: rho {c['rho'][-1]:.3f}  - {c['reading']}")


def _print_purity_ratio(rows):
    """Print the purity-ratio model table and the validation tables (R^2 / tau) per data set."""
    from robench.builtin.clusterability import report_lines

    for line in report_lines(rows):
        click.echo(line)


def _print_coverage(rows):
    """Print the coverage summary and the mixes x sizes accuracy tables per data set."""
    from robench.builtin.coverage import report_lines

    for line in report_lines(rows):
        click.echo(line)


def _mean_std(mean, std):
    if mean is None:
        return "-"
    return f"{100 * mean:.2f} ({'-' if std is None else f'{100 * std:.2f}'})"


def _points(v):
    return "-" if v is None else f"{100 * v:.2f}"


def _print_shifted_cv(rows):
    """Print shifted vs random K-fold CV per (dataset, clusterer), and the Wasserstein ratio."""
    groups = {}
    for s in rows:
        groups.setdefault((s["dataset"], s["clusterer"]), {}).setdefault(s["model"], {})[
            s["score"]] = s
    for (dataset, clusterer), models in sorted(groups.items()):
        click.echo(f"\n{dataset} - shifted-cv, sub-domains by {clusterer}: test accuracy %, "
                   "mean (std) over folds; gap = validation - test")
        click.echo(f"  {'model':<18} {'shifted':>14} {'random':>14} {'drop':>6} "
                   f"{'gap shifted':>11} {'gap random':>10} {'std ratio':>9}")
        for model, sc in sorted(models.items()):
            if not model or "shifted-cv" not in sc:
                continue
            value = {k: (sc.get(k) or {}).get("value") for k in
                     ("shifted-cv", "acc_random", "drop", "gap_shifted", "gap_random",
                      "std_ratio")}
            std = {k: ((sc.get(k) or {}).get("details") or {}).get("std")
                   for k in ("shifted-cv", "acc_random")}
            ratio = value["std_ratio"]
            click.echo(
                f"  {model:<18} {_mean_std(value['shifted-cv'], std['shifted-cv']):>14} "
                f"{_mean_std(value['acc_random'], std['acc_random']):>14} "
                f"{_points(value['drop']):>6} {_points(value['gap_shifted']):>11} "
                f"{_points(value['gap_random']):>10} "
                f"{'-' if ratio is None else f'{ratio:.1f}':>9}")
        w = (models.get("") or {}).get("wasserstein_ratio")
        if w is not None:
            d = w.get("details") or {}
            last = (d.get("repeats") or [{}])[-1]
            means = [(last.get(k) or {}).get("mean_offdiagonal") for k in ("shifted", "random")]
            shown = " / ".join("-" if m is None else f"{m:.3f}" for m in means)
            v = w.get("value")
            click.echo(f"  Wasserstein ratio, shifted / random folds (mean off-diagonal W1 in "
                       f"a common VAE latent space): {'-' if v is None else f'{v:.3f}'} "
                       f"({shown})" + (f"  error: {d['error']}" if d.get("error") else ""))


# ------------------------------------------------------------------------------ results


@cli.command()
@click.option("--dataset", "-d", default=None, help="Only this data set.")
@click.option("--metric", default=None, help="Only this metric.")
@click.option("--model", "-m", default=None, help="Only this model.")
@format_option()
@db_option
@friendly_errors
def results(dataset, metric, model, fmt, db_path):
    """Print stored scores.

    \b
    Examples:
      robench results
      robench results --dataset digits --metric rho --format json
      robench results --metric adequacy    # the training-size sweep as a table
      robench results --metric purity-ratio  # indicators and their validation (R^2, tau)
      robench results --metric shifted-cv  # shifted vs random K-fold CV, Wasserstein ratio
      robench results --metric coverage    # EP/CP/BC/PBC, coverage-guided accuracy per mix
    """
    from robench.store import Store

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    rows = Store(db_path).scores(dataset=dataset, metric=metric, model=model)
    if metric == "adequacy" and fmt == "table" and rows:
        _print_adequacy(rows)
        return
    if metric == "purity-ratio" and fmt == "table" and rows:
        _print_purity_ratio(rows)
        return
    if metric == "shifted-cv" and fmt == "table" and rows:
        _print_shifted_cv(rows)
        return
    if metric == "coverage" and fmt == "table" and rows:
        _print_coverage(rows)
        return
    cols = ["dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high", "n",
            "higher_is_better", "metric_version", "run_id"]
    out = [{c: r.get(c) for c in cols} for r in rows]
    _emit(cols, [[r[c] for c in cols] for r in out], fmt, objects=out)


def _emit(cols, rows, fmt, objects=None):
    if fmt == "json":
        click.echo(json.dumps(objects if objects is not None
                              else [dict(zip(cols, r)) for r in rows], indent=2, default=str))
    elif fmt == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        if not rows:
            click.echo("(no rows)")
            return
        cells = [[_cell(v) for v in r] for r in rows]
        widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
        click.echo("  ".join("-" * w for w in widths))
        for r in cells:
            click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)))


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


# -------------------------------------------------------------------------------- query


@cli.command()
@click.argument("sql")
@format_option()
@db_option
@friendly_errors
def query(sql, fmt, db_path):
    """Run a read-only SQL query on the results database.

    Tables: runs, trials, scores, score_groups, clusterings, skips. Writes are refused.

    \b
    Example:
      robench query "select model, value from scores where metric='rho' and score='rho'"
    """
    from robench.readonly import query_readonly

    cols, rows = query_readonly(db_path, sql)
    _emit(cols, rows, fmt)


# -------------------------------------------------------------------------- leaderboard


@cli.command()
@click.option("--out", "out_dir", default="leaderboard", show_default=True,
              type=click.Path(file_okay=False), help="Directory of the static site.")
@db_option
@friendly_errors
def leaderboard(out_dir, db_path):
    """Build the static HTML leaderboard from the stored scores.

    \b
    Example:
      robench leaderboard --out leaderboard && open leaderboard/index.html
    """
    from robench.leaderboard import build_leaderboard
    from robench.store import Store

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    path = build_leaderboard(Store(db_path), out_dir)
    click.echo(f"wrote {path}")


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
            click.echo(f"  {spec.name:<18} {spec.description}  [{spec.plugin}]")


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
