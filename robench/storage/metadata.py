"""datasette metadata for a results database: ``robench metadata --db robench.db -o metadata.json``.

``datasette robench.db -m metadata.json`` then shows a title, what every table and view holds,
every column's meaning, units (seconds) and the metric definitions stored in the file. The
format is datasette's (``databases.NAME.tables.TABLE`` with ``description``, ``columns`` and
``units``); the database name is the file's stem, as datasette names it.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from robench.storage.readonly import connect_readonly

_RUN = "the run (runs.id) that wrote it"
_JSON = " (JSON)"

#: What each table and view holds.
TABLES = {
    "runs": "One row per `robench run` (or merged-in run): command, status, time, counts, "
            "versions, machine, configuration.",
    "configurations": "What a score's trials were run with: profile, repeats, sources per "
                      "class, seed and knob values. Part of every score's identity; 'legacy' "
                      "for scores stored before configurations were recorded.",
    "metrics": "Each metric definition once: name, version and its text.",
    "clusterings": "Sources found in a data set by a clusterer (per class, k clusters).",
    "trials": "One model trained on one partition and evaluated: the unit of work and caching.",
    "scores": "A metric's scores per (dataset, model, clusterer, configuration).",
    "score_groups": "What one metric's scores of one (dataset, model, clusterer, configuration) "
                    "were computed from, so a warm rerun reuses them.",
    "skips": "Combinations that could not apply, and why.",
    "contributions": "Runs copied in by `robench merge`: who contributed them, from which file.",
    "conflicts": "Merged trials, scores or score groups whose key was stored with different "
                 "content; the stored row was kept, the incoming one is here.",
    "merged_sources": "Source files `robench merge` took in, by checksum: merging the same "
                      "bytes again copies nothing.",
    "verifications": "What `robench verify` re-ran and found: a sample of stored trials re-run "
                     "from their specs and compared with the stored rows.",
    "ranks": "The rank of each model in each ranked table, as the site, `robench results` "
             "and the badges show it (stored whenever scores change; helpers never ranked).",
    "leaderboard": "One row per model of each ranked table (data set, metric, clusterer; "
                   "helper models left out): the headline score of the configuration the "
                   "table shows, with its CI and the rank the site shows (ties 1=, none "
                   "without a tested order).",
    "trial_summary": "Per (dataset, model, clusterer, protocol, kind): how many trials, how "
                     "many ok or failed, their mean/min/max accuracy and total seconds.",
    "configuration_choice": "Per table (data set, metric): each configuration's coverage "
                            "(model x clusterer combinations) and which one is shown.",
}

_COMMON = {
    "dataset": "data set name", "model": "model name",
    "clusterer": "clusterer that found the sources ('' when none)",
    "protocol": "protocol that planned the trial", "metric": "metric name",
    "run_id": _RUN, "key": "hashed primary key", "seed": "seed of everything",
    "created_at": "when it was stored (UTC)", "computed_at": "when it was computed (UTC)",
    "configuration": "configurations.id: what its trials were run with",
    "details": "what else it recorded" + _JSON, "seconds": "wall-clock time",
    "status": "ok / failed (runs: running, ok, failed, interrupted)",
}

#: Column descriptions per table; a column not listed takes its _COMMON description.
COLUMNS = {
    "runs": {
        "id": "run id", "command": "the command line", "started_at": "start (UTC)",
        "finished_at": "end (UTC)", "n_planned": "trials planned",
        "n_cached": "trials already stored", "n_ok": "trials run and ok",
        "n_failed": "trials failed", "n_skipped": "combinations skipped",
        "robench_version": "robench version", "python": "Python version",
        "platform": "OS and CPU", "torch_version": "torch version",
        "git_rev": "git commit of the robench source", "host": "host name of the driver",
        "pid": "process id of the driver", "pid_started": "when that process started",
        "config": "the run's configuration" + _JSON,
        "plugin_versions": "plugin name to version" + _JSON,
        "plugin_distributions": "plugin name to the distribution that installs it" + _JSON,
    },
    "configurations": {
        "id": "fingerprint of the configuration (or 'legacy')", "label": "short label",
        "profile": "quick / standard / paper", "repeats": "repeats per partition kind (R)",
        "sources": "sources (clusters) per class (k)",
        "knobs": "knob values of the sections its trials read" + _JSON,
        "description": "everything the fingerprint covers" + _JSON,
        "run_id": "the run that first recorded it",
    },
    "metrics": {
        "id": "hash of name, version and definition", "name": "metric name",
        "version": "metric version", "definition": "the metric's text definition",
        "run_id": "the run that first stored a score of it",
    },
    "clusterings": {
        "k": "sources per class", "silhouette": "mean silhouette of the clustering",
        "fingerprint": "content fingerprint of the data set clustered",
    },
    "trials": {
        "kind": "partition kind (inclusive, exclusive, random, fold, ...)",
        "repeat": "repeat index", "accuracy": "test accuracy, a fraction in [0, 1]",
        "train_accuracy": "training accuracy", "val_accuracy": "validation accuracy (best epoch)",
        "n_train": "training rows", "n_val": "validation rows", "n_test": "test rows",
        "epochs": "epochs trained", "best_epoch": "epoch selected on validation",
        "error": "why it failed", "per_class": "test accuracy per class" + _JSON,
        "history": "per-epoch training history" + _JSON,
        "params": "parameters that define the trial" + _JSON,
        "spec": "the whole trial definition" + _JSON,
        "versions": "component versions in its key" + _JSON,
        "worker": "where it ran", "finished_at": "when it finished (UTC)",
        "clustering": "clusterings.key of the sources its partitions came from",
        "all_accuracy": "accuracy on the whole data set",
        "correct": "per-row correctness on the whole data set (packed bits, base64)",
        "last_val_accuracy": "validation accuracy at the last epoch",
        "last_test_accuracy": "test accuracy at the last epoch",
        "not_applicable": "why the trial had nothing to measure",
        "extra": "a protocol's own results" + _JSON, "device": "cpu, cuda:N or mps",
        "execution": "how it ran: {threads, executor} (what `robench verify` re-runs it with)",
    },
    "scores": {
        "score": "which score of the metric (the headline has the metric's name)",
        "value": "the score", "ci_low": "lower end of its confidence interval",
        "ci_high": "upper end of its confidence interval", "n": "repeats or samples behind it",
        "higher_is_better": "1 if a higher value ranks better",
        "metric_version": "version of the metric definition",
        "metric_id": "metrics.id: its definition",
        "definition": "the metric's definition (files before schema 2; now in metrics)",
        "inputs": "fingerprint of what it was computed from",
    },
    "score_groups": {
        "metric_version": "version of the metric definition",
        "inputs": "fingerprint of the trials and metric it was computed from",
        "trial_keys": "its trials' keys" + _JSON,
        "scores": "[score key, digest] pairs it wrote" + _JSON,
    },
    "skips": {"reason": "why the combination could not apply"},
    "contributions": {
        "contributor": "who contributed the run", "source": "file it was merged from",
        "source_run_id": "its run id in that file", "run_id": "its run id here",
        "merged_at": "when it was merged (UTC)", "source_sha256": "checksum of that file",
        "run_fingerprint": "hash of the run row (merging it again copies nothing)",
    },
    "conflicts": {
        "kind": "trial, score or score_group", "key": "the key stored with other results",
        "columns": "the columns that differ" + _JSON, "contributor": "who sent it",
        "source": "file it came from", "detected_at": "when (UTC)",
        "incoming": "the incoming row" + _JSON, "incoming_sha256": "hash of that row",
        "id": "conflict id",
    },
    "merged_sources": {
        "sha256": "checksum of the file", "source": "its file name",
        "contributor": "who contributed it (as the person merging said)",
        "merged_at": "when it was merged (UTC)",
        "complete": "1 if every row was accepted or recorded; 0 if some scores could not be "
                    "checked (their metric not installed at their version)",
    },
    "verifications": {
        "id": "verification id", "started_at": "when it started (UTC)",
        "finished_at": "when it finished (UTC)", "host": "where the trials were re-run",
        "device": "the device they were re-run on", "platform": "OS and CPU there",
        "robench_version": "robench version there", "python": "Python version there",
        "torch_version": "torch version there",
        "plugin_versions": "plugin versions there" + _JSON, "seed": "seed of the sample",
        "contributor": "whose trials were sampled (empty: everyone's)",
        "n_sampled": "trials sampled", "n_matched": "re-runs that matched",
        "n_mismatched": "re-runs that did not", "n_refused": "trials not re-runnable here",
        "trials": "per sampled trial: key, names, outcome, mode, differing values" + _JSON,
        "recorded_in": "empty: verified on this database; else the contributor (file) it "
                       "was merged from",
        "fingerprint": "hash of what it found (merging it again copies nothing)",
    },
    "ranks": {
        "rank": "position by the headline estimate (1 = best; NULL: not ranked, see unranked)",
        "tied": "1 if the model can hold more than one rank (its rank interval is not one rank)",
        "rank_interval": "the ranks the model can hold: 1 + the models shown better to M - the "
                         "models shown worse (1-2), one rank when decided",
        "n_ranked": "ranked models in the table",
        "unranked": "why the model has no rank", "rule": "how the table's ranks were decided",
        "configuration": "the configuration ranked (every configuration has its ranks)",
        "ranking": "everything the metric's section says of the row's rank (rank interval, "
                   "pair verdicts, rule, n_ranked), as JSON: the object every view shows",
    },
    "leaderboard": {
        "rank": "the model's position by the headline estimate within the table (1 = best; "
                "NULL: not ranked): sorts the rows; what was tested is rank_text",
        "rank_text": "the ranks the model can hold as the site shows them: an interval from "
                     "every paired test (1-2), or 1 when decided",
        "n_ranked": "ranked models in the table",
        "unranked": "why the model has no rank", "rank_rule": "how the table's ranks were decided",
        "value": "the headline score",
        "ci_low": "lower end of its CI", "ci_high": "upper end of its CI",
        "n": "repeats or samples", "higher_is_better": "1 if higher ranks better",
        "configuration_label": "the configuration shown", "metric_version": "metric version",
    },
    "trial_summary": {
        "kind": "partition kind", "trials": "trials stored", "ok": "trials ok",
        "failed": "trials failed", "mean_accuracy": "mean test accuracy of the ok trials",
        "min_accuracy": "lowest", "max_accuracy": "highest",
        "seconds": "total wall-clock time", "last_finished_at": "latest finish (UTC)",
    },
    "configuration_choice": {
        "label": "configuration label",
        "n_combinations": "model x clusterer combinations with a score in it",
        "latest_run": "highest run id among its scores",
        "chosen": "1 for the configuration the table shows",
    },
}

#: datasette units (Pint names) per table and column.
UNITS = {"trials": {"seconds": "s"}, "clusterings": {"seconds": "s"},
         "trial_summary": {"seconds": "s"}}


def build_metadata(path) -> dict:
    """Return datasette metadata (tables, views, columns, metric definitions) of ``path``."""
    path = Path(path)
    with closing(connect_readonly(path)) as conn:
        objects = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN "
                               "('table', 'view') AND name NOT LIKE 'sqlite_%' "
                               "ORDER BY name").fetchall()
        tables = {}
        for name, kind in objects:
            if name not in TABLES:
                continue
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
            described = {**_COMMON, **COLUMNS.get(name, {})}
            entry = {"description": TABLES[name] + (" (a view)" if kind == "view" else ""),
                     "columns": {c: described[c] for c in columns if c in described}}
            units = {c: u for c, u in UNITS.get(name, {}).items() if c in columns}
            if units:
                entry["units"] = units
            tables[name] = entry
        definitions = conn.execute("SELECT name, version, definition FROM metrics ORDER BY "
                                   "name, version").fetchall() if "metrics" in tables else []
    if definitions:
        tables["metrics"]["description"] += " Stored: " + "; ".join(
            f"{n} v{v}: {d}" for n, v, d in definitions)
    return {
        "title": "robench results",
        "description": "Within-dataset shift robustness of classifiers, measured by robench: "
                       "start with the leaderboard and trial_summary views. Accuracies are "
                       "fractions in [0, 1]; JSON columns hold JSON text.",
        "about": "robench",
        "databases": {path.stem: {"tables": tables}},
    }
