"""Progress of a run on a stream (stderr): what ``robench run`` and ``robench.evaluate`` print.

On a terminal a live bar; elsewhere (CI logs, pipes, a notebook) one line per trial with a count.
"""

from __future__ import annotations

import sys

import click

from robench.escaping import terminal
from robench.present.summary import output_width, wrap


def trial_label(row) -> str:
    """Return a trial's short label: data set/model[/clusterer] kind #repeat."""
    clus = f"/{row['clusterer']}" if row.get("clusterer") else ""
    return terminal(f"{row['dataset']}/{row['model']}{clus} {row['kind']} #{row['repeat']}")


class Progress:
    """Print the plan, then progress over trials on ``stream`` (default: stderr)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        self.total = self.done = 0
        self.live = self.stream.isatty()
        self.prepared: set = set()

    def echo(self, text, **style):
        """Print a progress message wrapped to the stream's width (a trial's line is short)."""
        # names and plugins' errors come from outside: no control or bidi character goes raw
        for line in wrap(terminal(text), output_width(self.stream)):
            click.secho(line, file=self.stream, **style)

    def __call__(self, event, **info):
        handler = getattr(self, f"_on_{event}", None)
        if handler is not None:
            handler(**info)

    def close(self):
        """End the live bar, if any."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def _on_planned(self, todo, total, cached, skipped, **_):
        self.close()  # a run in rounds (--until decided) plans once per round
        self.total, self.done = todo, 0
        self.echo(f"{total} trials planned: {cached} already stored"
                  + (" (training nothing)" if todo == 0 else f", {todo} to run")
                  + (f"; {len(skipped)} combination(s) skipped" if skipped else ""))
        if todo and self.live:
            self.bar = click.progressbar(length=todo, label="trials", file=self.stream,
                                         show_eta=True, show_pos=True,
                                         item_show_func=lambda s: s)
            self.bar.__enter__()

    def _on_helpers(self, helpers, **_):
        for h in helpers:
            self.echo(f"  + {h['trials']} helper trial(s) ({h['todo']} to run) of "
                      f"{len(h['models'])} model(s) you did not ask for: "
                      f"{', '.join(h['models'])}. Metric '{h['metric']}' (protocol "
                      f"'{h['protocol']}') trains them for its own scores; they are stored "
                      "and shown as helpers, never ranked.")

    def _on_dataset_failed(self, reason, **_):
        self.echo(f"skipped: {reason}", fg="red")

    def _on_killed_runs(self, runs, **_):
        for r in runs:
            self.echo(f"run {r['id']} (started {r['started_at']}, process {r['pid']}) ended "
                      "without finishing: its process is gone (killed?); marked 'killed'. "
                      "Its finished trials are stored and are not run again.", fg="yellow")

    def _on_look(self, look, looks, repeats, tables, **_):
        self.echo(f"look {look} of {looks}: {repeats} repeats for {len(tables)} undecided "
                  f"table(s): {', '.join(tables)}")

    def _on_budget_spent(self, ran, left, **_):
        self.echo(f"time budget spent: {ran} trial(s) of this round ran, {left} not started",
                  fg="yellow")

    def _on_decided(self, table, reason, repeats, **_):
        reps = ", ".join(f"{m} {r}" for m, r in repeats.items())
        self.echo(f"{table}: stopped ({reason})" + (f"; repeats: {reps}" if reps else
                                                    "; no look taken"))

    def _on_prepare(self, dataset, clusterer, **_):
        # each protocol prepares its own partitions of a (data set, clusterer): said once
        if (dataset, clusterer) not in self.prepared:
            self.prepared.add((dataset, clusterer))
            self.echo(f"finding sources: {dataset} / {clusterer}")

    def _on_prepare_failed(self, dataset, clusterer, error, protocol=None, **_):
        self.echo(f"sources failed for {dataset} / {clusterer}"
                  + (f" ({protocol})" if protocol else "") + f": {error}; that protocol's "
                  "trials there are failed, the others run", fg="red")

    def _on_trial(self, row, **_):
        self.done += 1
        status = "ok" if row["status"] == "ok" else "FAILED"
        if self.bar is not None:
            self.bar.update(1, f"{trial_label(row)} {status}")
            return
        acc = f" acc {row['accuracy']:.4f}" if row.get("accuracy") is not None else ""
        secs = f" {row['seconds']:.1f}s" if row.get("seconds") is not None else ""
        self.echo(f"[{self.done:>{len(str(self.total))}}/{self.total}] "
                  f"{trial_label(row)} {status}{acc}{secs}")
