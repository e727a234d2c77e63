"""The SQLite results database: its schema, and reading and writing its rows.

Rows are upserted by hashed or compound keys; only the driver process writes (invariant 6),
each finished trial committed on its own. Every column is declared in :data:`SCHEMA` (another
key is refused; :data:`JSON_COLUMNS` are encoded on write, decoded on read); a declared column
an older file lacks is added when a row has a value for it, never at open. Importable without
torch: read commands run on machines that never trained. docs/database.md has the tables.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Iterable, Optional

import sqlite_utils

from robench.process.liveness import host_name, process_running, process_started
from robench.process.provenance import run_environment, utc_now
from robench.storage import cells
from robench.storage.migrations import LEGACY, LEGACY_LABEL, migrate
from robench.storage.readonly import connect_readonly

#: Run statuses, in the order a run can move through them.
#: 'killed': its process ended without finishing it (kill -9, power cut); marked so by the next
#: run on the same host (:meth:`Store.mark_killed_runs`).
RUN_STATUSES = ("running", "ok", "failed", "interrupted", "killed")
#: Trial statuses; only 'ok' trials count as cached.
TRIAL_STATUSES = ("ok", "failed")
#: Counters ``finish_run`` accepts.
RUN_COUNTS = ("n_planned", "n_cached", "n_ok", "n_failed", "n_skipped")

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    command TEXT,
    status TEXT,
    started_at TEXT,
    finished_at TEXT,
    seed INTEGER,
    n_planned INTEGER,
    n_cached INTEGER,
    n_ok INTEGER,
    n_failed INTEGER,
    n_skipped INTEGER,
    robench_version TEXT,
    python TEXT,
    platform TEXT,
    torch_version TEXT,
    git_rev TEXT,
    host TEXT,  -- where the driver ran: host name, process id and the process's start time
    pid INTEGER,
    pid_started TEXT,
    config TEXT,  -- JSON: the run's configuration (robench.run.config.RunConfig)
    plugin_versions TEXT,  -- JSON: {plugin: version}
    plugin_distributions TEXT  -- JSON: {plugin: the distribution that installs it}
);
CREATE TABLE IF NOT EXISTS configurations (
    id TEXT PRIMARY KEY,  -- fingerprint (robench.run.configurations), or 'legacy'
    label TEXT,
    profile TEXT,
    repeats INTEGER,
    sources INTEGER,  -- sources (clusters) per class, k
    seed INTEGER,
    knobs TEXT,  -- JSON: {section: {knob: value}} of the sections the metric's trials read
    description TEXT,  -- JSON: everything the fingerprint covers
    run_id INTEGER REFERENCES runs (id),  -- the run that first recorded it
    created_at TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
    id TEXT PRIMARY KEY,  -- hash of (name, version, definition)
    name TEXT,
    version TEXT,
    definition TEXT,  -- the text definition of the metric at this version
    run_id INTEGER REFERENCES runs (id),  -- the run that first stored a score of it
    created_at TEXT
);
CREATE TABLE IF NOT EXISTS clusterings (
    dataset TEXT,
    clusterer TEXT,
    k INTEGER,
    seed INTEGER,
    silhouette REAL,
    seconds REAL,
    details TEXT,
    fingerprint TEXT,  -- content fingerprint of the data set clustered
    run_id INTEGER REFERENCES runs (id),
    created_at TEXT,
    key TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS trials (
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    protocol TEXT,
    kind TEXT,
    repeat INTEGER,
    seed INTEGER,
    status TEXT,
    accuracy REAL,
    train_accuracy REAL,
    val_accuracy REAL,
    n_train INTEGER,
    n_val INTEGER,
    n_test INTEGER,
    epochs INTEGER,
    best_epoch INTEGER,
    seconds REAL,
    error TEXT,
    per_class TEXT,
    history TEXT,
    params TEXT,
    spec TEXT,
    versions TEXT,
    worker TEXT,
    finished_at TEXT,
    run_id INTEGER REFERENCES runs (id),
    clustering TEXT REFERENCES clusterings (key),  -- the sources its partitions came from
    key TEXT PRIMARY KEY,
    -- written by some protocols only
    all_accuracy REAL,  -- accuracy on the whole data set, training rows included
    correct TEXT,  -- per-row correctness on the whole data set: packed bits, base64
    last_val_accuracy REAL,  -- at the last epoch rather than the best one
    last_test_accuracy REAL,
    details TEXT,  -- JSON: what a trial that trains no model measured
    not_applicable TEXT,  -- why a trial had nothing to measure (it still counts as ok)
    extra TEXT,  -- JSON: a protocol's own results beyond the columns above
    device TEXT,  -- where the trial's torch work ran (cpu, cuda:N, mps); not part of its key
    execution TEXT  -- JSON: how it ran ({"threads": torch/BLAS threads, "executor": name}),
                    -- what `robench verify` re-runs it with; not part of its key
);
CREATE TABLE IF NOT EXISTS scores (
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    score TEXT,
    value REAL,
    ci_low REAL,
    ci_high REAL,
    n INTEGER,
    higher_is_better INTEGER,
    metric_version TEXT,
    configuration TEXT REFERENCES configurations (id),  -- what its trials were run with
    details TEXT,
    run_id INTEGER REFERENCES runs (id),
    computed_at TEXT,
    metric_id TEXT REFERENCES metrics (id),  -- its definition
    inputs TEXT,
    key TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS score_groups (
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    metric_version TEXT,
    configuration TEXT REFERENCES configurations (id),
    run_id INTEGER REFERENCES runs (id),
    computed_at TEXT,
    inputs TEXT,
    trial_keys TEXT,
    scores TEXT,
    key TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS skips (
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    reason TEXT,
    run_id INTEGER REFERENCES runs (id),
    PRIMARY KEY (dataset, model, clusterer, metric)
);
CREATE TABLE IF NOT EXISTS contributions (
    -- per run copied in by `robench merge`: where it came from
    contributor TEXT,
    source TEXT,  -- file name of the database it was merged from
    source_run_id INTEGER,  -- its id there
    run_id INTEGER PRIMARY KEY REFERENCES runs (id),
    merged_at TEXT,
    source_sha256 TEXT,  -- checksum of that file when it was merged
    run_fingerprint TEXT UNIQUE  -- hash of the run row: merging it again copies nothing
);
CREATE TABLE IF NOT EXISTS conflicts (
    -- a merged trial or score whose key was stored with different results: kept apart
    kind TEXT,  -- trial or score
    key TEXT,
    columns TEXT,  -- JSON: the columns that differ
    contributor TEXT,
    source TEXT,
    detected_at TEXT,
    incoming TEXT,  -- JSON: the incoming row
    incoming_sha256 TEXT,
    id INTEGER PRIMARY KEY,
    UNIQUE (kind, key, incoming_sha256)
);
CREATE TABLE IF NOT EXISTS merged_sources (
    -- per source file `robench merge` took in: merging the same bytes again copies nothing
    sha256 TEXT PRIMARY KEY,
    source TEXT,  -- its file name
    contributor TEXT,  -- as the person merging named it
    merged_at TEXT,
    complete INTEGER  -- 0: some of its scores could not be checked here (metric not installed)
);
CREATE TABLE IF NOT EXISTS verifications (
    -- per `robench verify`: a sample of stored trials re-run from their specs and compared
    id INTEGER PRIMARY KEY,
    started_at TEXT,
    finished_at TEXT,
    host TEXT,  -- where the trials were re-run
    device TEXT,
    platform TEXT,
    robench_version TEXT,
    python TEXT,
    torch_version TEXT,
    plugin_versions TEXT,  -- JSON: {plugin: version} of the verifying installation
    seed INTEGER,  -- of the random sample
    contributor TEXT,  -- whose trials were sampled (NULL: everyone's)
    n_sampled INTEGER,
    n_matched INTEGER,
    n_mismatched INTEGER,
    n_refused INTEGER,  -- sampled but not re-runnable here (plugin or version not installed)
    trials TEXT,  -- JSON: per sampled trial its key, names, outcome and differing values
    recorded_in TEXT,  -- NULL: verified on this database; else the contributor (file) it came from
    fingerprint TEXT UNIQUE  -- hash of what it found: merging it again copies nothing
);
CREATE INDEX IF NOT EXISTS idx_trials_group ON trials (dataset, model, clusterer, protocol);
CREATE INDEX IF NOT EXISTS idx_trials_run ON trials (run_id);
CREATE INDEX IF NOT EXISTS idx_trials_clustering ON trials (clustering);
CREATE INDEX IF NOT EXISTS idx_scores_dataset_metric ON scores (dataset, metric, configuration);
CREATE INDEX IF NOT EXISTS idx_scores_configuration ON scores (configuration);
CREATE INDEX IF NOT EXISTS idx_scores_run ON scores (run_id);
CREATE INDEX IF NOT EXISTS idx_scores_metric_id ON scores (metric_id);
CREATE INDEX IF NOT EXISTS idx_score_groups_run ON score_groups (run_id);
CREATE INDEX IF NOT EXISTS idx_clusterings_run ON clusterings (run_id);
CREATE VIEW IF NOT EXISTS configuration_choice AS
    -- per table (dataset, metric): each configuration, its coverage, and which one is shown
    SELECT dataset, metric, configuration, label, n_combinations, latest_run,
           ROW_NUMBER() OVER (PARTITION BY dataset, metric
                              ORDER BY n_combinations DESC, latest_run DESC, configuration) = 1
               AS chosen
    FROM (SELECT s.dataset, s.metric, s.configuration, c.label,
                 COUNT(DISTINCT s.model || char(31) || s.clusterer) AS n_combinations,
                 MAX(COALESCE(s.run_id, 0)) AS latest_run
          FROM scores s LEFT JOIN configurations c ON c.id = s.configuration
          GROUP BY s.dataset, s.metric, s.configuration);
CREATE TABLE IF NOT EXISTS ranks (
    -- per model of a ranked table: the rank the site, `robench results` and badges show,
    -- stored by robench.run.ranking whenever scores change (a view cannot run the ranking)
    dataset TEXT,
    metric TEXT,
    clusterer TEXT,  -- '' for a metric without clusterer
    model TEXT,
    configuration TEXT,
    rank INTEGER,  -- position by the estimate; NULL: not ranked (unranked says why)
    tied INTEGER,  -- 1: the model can hold more than one rank (shown as 1= or 1-2)
    rank_interval TEXT,  -- the ranks it can hold, from every paired test ("1-2"; "1": decided)
    n_ranked INTEGER,  -- ranked models in the table
    unranked TEXT,
    rule TEXT,  -- how the table's ranks were decided
    ranking TEXT,  -- JSON: all the section says of the row (rank_best/worst, interval, its
                   -- pair verdicts, rule, ...), the object every view shows
    computed_at TEXT,
    PRIMARY KEY (dataset, metric, configuration, clusterer, model)
);
CREATE VIEW IF NOT EXISTS leaderboard AS
    -- one row per model of each ranked table (helpers left out): its headline score in the
    -- chosen configuration and the rank the site shows (NULL: not ranked; rank_text: the rank
    -- interval where the section gives one, "1-2", else 1= when tied)
    SELECT s.dataset, s.metric, s.clusterer, r.rank,
           CASE WHEN r.rank IS NULL THEN NULL
                WHEN r.rank_interval IS NOT NULL THEN r.rank_interval
                WHEN r.tied THEN r.rank || '=' ELSE CAST(r.rank AS TEXT) END AS rank_text,
           r.n_ranked, s.model, s.value, s.ci_low, s.ci_high, s.n, s.higher_is_better,
           ch.label AS configuration_label, s.metric_version, s.configuration, s.run_id,
           r.unranked, r.rule AS rank_rule
    FROM scores s
    JOIN configuration_choice ch
      ON ch.dataset = s.dataset AND ch.metric = s.metric
     AND ch.configuration = s.configuration AND ch.chosen
    JOIN ranks r
      ON r.dataset = s.dataset AND r.metric = s.metric
     AND r.clusterer = COALESCE(s.clusterer, '') AND r.model = s.model
     AND r.configuration IS s.configuration
    WHERE s.score = s.metric AND s.value IS NOT NULL;
CREATE VIEW IF NOT EXISTS trial_summary AS
    -- per (dataset, model, clusterer, protocol, kind): how many trials, how they went
    SELECT dataset, model, clusterer, protocol, kind,
           COUNT(*) AS trials,
           SUM(status = 'ok') AS ok,
           SUM(status = 'failed') AS failed,
           AVG(CASE WHEN status = 'ok' THEN accuracy END) AS mean_accuracy,
           MIN(CASE WHEN status = 'ok' THEN accuracy END) AS min_accuracy,
           MAX(CASE WHEN status = 'ok' THEN accuracy END) AS max_accuracy,
           SUM(seconds) AS seconds,
           MAX(finished_at) AS last_finished_at
    FROM trials
    GROUP BY dataset, model, clusterer, protocol, kind;
"""

#: Trial columns left out of a trial's digest (Store.trial_digests): added after rows were
#: stored, so digesting them (NULL in old rows) would make every stored score look stale, and
#: recording where a trial ran, not what it computed (a rerun changes other columns anyway).
_UNDIGESTED = ("device",)

#: Columns that hold JSON text, per table; they are encoded on write and decoded on read.
JSON_COLUMNS = {
    "runs": ("config", "plugin_versions", "plugin_distributions"),
    "trials": ("params", "spec", "versions", "per_class", "history", "details", "extra",
               "execution"),
    "scores": ("details",),
    "score_groups": ("trial_keys", "scores"),
    "clusterings": ("details",),
    "skips": (),
    "configurations": ("knobs", "description"),
    "metrics": (),
    "contributions": (),
    "conflicts": ("columns", "incoming"),
    "merged_sources": (),
    "verifications": ("plugin_versions", "trials"),
    "ranks": ("ranking",),
}

#: Per table, the JSON column where data of a protocol's own belongs (named when refusing a
#: row with an undeclared column).
_OPEN_COLUMNS = {"trials": "extra", "scores": "details", "clusterings": "details"}


def _declared_columns(schema: str) -> dict[str, dict[str, str]]:
    """Return {table: {column: declared type}} of the tables ``schema`` creates, in order."""
    # SQLite parses the schema itself, so the SQL above stays the one declaration.
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(schema)
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {table: {row[1]: row[2] for row in conn.execute(f'PRAGMA table_info("{table}")')}
                for table in tables}


#: Every table's declared columns with their SQLite types, in schema order.
COLUMNS = _declared_columns(SCHEMA)

#: Seconds a write waits for another process's write lock (two runs on one file) before
#: failing with "database is locked".
BUSY_TIMEOUT = 60.0

# SQLite's default limit on bound parameters is 999 in older builds; stay well below it.
_CHUNK = 500


def key_chunks(keys: Iterable[str]) -> Iterable[list]:
    """Yield ``keys`` without repeats in lists of at most :data:`_CHUNK`."""
    keys = list(dict.fromkeys(keys))
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]


def _plain(value: Any) -> Any:
    """Return ``value`` as plain JSON-able Python: numpy to builtins, NaN/inf floats to None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        # numpy arrays and numpy scalars both answer tolist(); avoids importing numpy here
        return _plain(value.tolist())
    if isinstance(value, Path):
        return str(value)
    return value


def encode_row(table: str, row: dict) -> dict:
    """Return a copy of ``row`` ready for SQLite: JSON columns encoded, scalars made plain
    (idempotent); ValueError for an undeclared column or a dict/list in a non-JSON one."""
    declared = COLUMNS[table]
    unknown = [name for name in row if name not in declared]
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        where = (f"data of a protocol's own belongs in the JSON column '{_OPEN_COLUMNS[table]}'"
                 if table in _OPEN_COLUMNS else f"its columns are {', '.join(declared)}")
        raise ValueError(
            f"a {table} row has undeclared column(s) {names}: {where} (a new column must be "
            "declared in robench.storage.store.SCHEMA)"
        )
    json_columns = JSON_COLUMNS[table]
    out = {}
    for name, value in row.items():
        if name in json_columns:  # a string is taken to be JSON already
            out[name] = (value if value is None or isinstance(value, str) else
                         json.dumps(_plain(value), sort_keys=True, allow_nan=False, default=str))
            continue
        value = _plain(value)
        if isinstance(value, (dict, list)):
            raise ValueError(
                f"column '{name}' of {table} holds a single value, not a {type(value).__name__}; "
                f"JSON columns of {table}: {', '.join(json_columns) or 'none'}"
            )
        out[name] = value
    return out


def decode_row(table: str, row: dict) -> dict:
    """Return ``row`` with its JSON columns decoded (in place); a cell that does not hold what
    its column declares becomes what :mod:`robench.storage.cells` makes of it."""
    declared = COLUMNS.get(table, {})
    json_columns = JSON_COLUMNS[table]
    for name, value in row.items():
        if value is None:
            continue
        if name in json_columns:
            row[name] = cells.decoded(value)
            continue
        kind = declared.get(name)
        if kind == "REAL" and (type(value) is not float or not math.isfinite(value)):
            row[name] = cells.number(value)
        elif kind == "INTEGER" and type(value) is not int:
            row[name] = cells.integer(value)
        elif kind == "TEXT" and type(value) is not str:
            row[name] = cells.text(value)
    if table == "scores" and row.get("higher_is_better") is not None:
        row["higher_is_better"] = bool(row["higher_is_better"])
    return row


#: The environment variable naming the results database when none is given.
DB_ENV = "ROBENCH_DB"


def default_path() -> str:
    """Return the results database used when none is named: ``$ROBENCH_DB``, else
    ``robench.db`` in the current folder (the CLI's --db and robench.evaluate's ``db``)."""
    return os.environ.get(DB_ENV) or "robench.db"


class Store:
    """The results database of one robench installation or project.

    Parameters
    ----------
    path : str or Path
        SQLite file; its parent directory is created and the schema is created if missing,
        or an older file migrated (:mod:`robench.storage.migrations`).
    readonly : bool
        Open the file as it is, read-only (``results``, ``query``, ``leaderboard``): no
        migration, no journal-mode change, writes fail.

    Examples
    --------
    >>> store = Store(tmp_path / "robench.db")          # doctest: +SKIP
    >>> run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    """

    def __init__(self, path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        # the runner may hand finished trials over from an executor's callback thread
        self._lock = threading.RLock()
        if readonly:
            # Read commands: the file as it is, any schema version, never a byte written
            # (robench.storage.readonly.readonly_uri); FileNotFoundError / SchemaError if unusable.
            self.db = sqlite_utils.Database(connect_readonly(self.path, check_same_thread=False))
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        migrate(self.path, SCHEMA, timeout=BUSY_TIMEOUT)  # before this connection opens it
        conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=BUSY_TIMEOUT)
        conn.execute("PRAGMA foreign_keys = ON")  # SQLite leaves them off unless asked
        self.db = sqlite_utils.Database(conn)
        # WAL lets `robench leaderboard` or `robench query` read while a run is writing.
        # Switching the journal mode needs the file to itself: a second process opening a fresh
        # file at the same moment can get "database is locked" at once, busy timeout or not
        # (seen in tests/reliability/test_concurrency.py), so wait for it as a writer would.
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                self.db.enable_wal()
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def _write(self):
        """Hold this connection's lock and SQLite's write lock: one transaction, committed at exit
        (nested: a savepoint of the enclosing one).

        ``BEGIN IMMEDIATE`` waits up to :data:`BUSY_TIMEOUT` for the lock; a deferred ``BEGIN``
        (sqlite-utils' ``atomic()``) upgrades at its first write, which in WAL mode fails at
        once with "database is locked" while another process writes, busy timeout or not.
        """
        with self._lock:
            conn = self.db.conn
            if conn.in_transaction:
                with self.db.atomic():
                    yield
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection."""
        self.db.close()

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, *, command: str, seed: int, config: dict, plugin_versions: dict,
                  plugin_distributions: Optional[dict] = None) -> int:
        """Record a new run with its config and the versions involved; return its id
        (``plugin_distributions``: {plugin: distribution}, so a board can name what to install)."""
        row = {"started_at": utc_now(), "status": "running", "command": command,
               **run_environment(), "seed": seed, "config": config,
               "plugin_versions": plugin_versions,
               "plugin_distributions": plugin_distributions or None, "host": host_name(),
               "pid": os.getpid(), "pid_started": process_started(os.getpid())}
        with self._write():
            (row,) = self._fit_to_file("runs", [encode_row("runs", row)])
            table = self.db["runs"].insert(row)
        return int(table.last_pk)

    def mark_killed_runs(self) -> list[dict]:
        """Mark ``killed`` each ``running`` run of this host whose process is gone; return them."""
        if "pid" not in self.db["runs"].columns_dict:
            return []
        with self._write():
            cursor = self.db.conn.execute(
                "SELECT id, pid, pid_started, started_at FROM runs "
                "WHERE status = 'running' AND host = ? AND pid IS NOT NULL", [host_name()])
            rows = [dict(zip(("id", "pid", "pid_started", "started_at"), r)) for r in cursor]
            killed = [r for r in rows if not process_running(r["pid"], r["pid_started"])]
            now = utc_now()
            for r in killed:
                self.db.conn.execute("UPDATE runs SET status = 'killed', finished_at = ? "
                                     "WHERE id = ? AND status = 'running'", [now, r["id"]])
        return killed

    def finish_run(self, run_id: int, status: str, **counts: int) -> None:
        """Mark a run finished with ``status`` and its trial counters (n_planned, n_ok, ...)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
        unknown = sorted(set(counts) - set(RUN_COUNTS))
        if unknown:
            raise ValueError(f"unknown run counters {unknown}; expected some of {RUN_COUNTS}")
        updates = {"finished_at": utc_now(), "status": status,
                   **{name: _plain(value) for name, value in counts.items()}}
        with self._write():
            self.db["runs"].update(run_id, updates)

    def runs(self, ids: Optional[Iterable[int]] = None) -> list[dict]:
        """Return run rows (all, or ``ids``), oldest first, decoded, with a merged one's origin."""
        where, params = self._where("runs", {} if ids is None else {"id": list(ids)})
        rows = self._select(f"SELECT * FROM runs {where} ORDER BY id", params)
        merged = self.contributions()
        for row in rows:
            info = merged.get(row["id"]) or {}
            row.update({k: info.get(k) for k in ("contributor", "source", "source_run_id")})
        return [decode_row("runs", row) for row in rows]

    def contributions(self) -> dict[int, dict]:
        """Return {run id: contributions row} of the runs ``robench merge`` copied in."""
        if not self.db["contributions"].exists():
            return {}
        rows = self._select("SELECT * FROM contributions", [])
        return {r["run_id"]: decode_row("contributions", r) for r in rows}

    # -- trials -----------------------------------------------------------------------------

    def trial_seconds(self) -> list:
        """Return the mean seconds of successful trials per (dataset, model, protocol)."""
        sql = ("SELECT dataset, model, protocol, AVG(seconds) AS seconds FROM trials "
               "WHERE status = 'ok' AND seconds IS NOT NULL GROUP BY dataset, model, protocol")
        return list(self._select(sql, []))

    def trial_durations(self, runs: Optional[Iterable[int]] = None) -> list:
        """Return mean seconds and count ``n`` of successful trials per (dataset, model,
        protocol, kind, ``max_epochs``: ``params.train.max_epochs``), of ``runs`` if given."""
        runs = None if runs is None else [int(r) for r in runs]
        where = "" if runs is None else f" AND run_id IN ({', '.join('?' * len(runs))})"
        sql = ("SELECT dataset, model, protocol, kind, "
               "json_extract(params, '$.train.max_epochs') AS max_epochs, "
               "AVG(seconds) AS seconds, COUNT(*) AS n FROM trials "
               "WHERE status = 'ok' AND seconds IS NOT NULL" + where +
               " GROUP BY dataset, model, protocol, kind, max_epochs")
        return list(self._select(sql, runs or []))

    def ok_trial_keys(self, keys: Iterable[str]) -> set[str]:
        """Return the subset of ``keys`` already stored with status 'ok'."""
        rows = self._select_keys("trials", keys, "WHERE status = 'ok'", columns="key")
        return {row["key"] for row in rows}

    def save_trial(self, row: dict) -> None:
        """Upsert one trial row by its ``key`` and commit it at once (undeclared keys refused:
        a protocol's own data goes in ``extra``)."""
        if not row.get("key"):
            raise ValueError("a trial row needs a non-empty 'key'")
        status = row.get("status")
        if status not in TRIAL_STATUSES:
            raise ValueError(f"trial status must be one of {TRIAL_STATUSES}, got {status!r}")
        row = dict(row)
        # '' rather than NULL keeps (dataset, model, clusterer) comparable with '=' and unique
        row["clusterer"] = row.get("clusterer") or ""
        row.setdefault("finished_at", utc_now())
        row = encode_row("trials", row)
        with self._write():
            (row,) = self._fit_to_file("trials", [row])
            self.db["trials"].upsert(row, pk="key")

    def trials(self, keys: Optional[Iterable[str]] = None, **filters: Any) -> list[dict]:
        """Return trial rows, JSON decoded, optionally only ``keys`` and matching ``filters``
        (a list, tuple or set matches any of its items; None matches NULL)."""
        where, params = self._where("trials", filters)
        order = "dataset, model, clusterer, protocol, kind, repeat, key"
        if keys is None:
            rows = self._select(f"SELECT * FROM trials {where} ORDER BY {order}", params)
        else:
            rows = self._select_keys("trials", keys, where, params)
            # None sorts last and is never compared with a value, so mixed columns cannot clash
            columns = order.split(", ")
            rows.sort(
                key=lambda r: tuple((r[c] is None, 0 if r[c] is None else r[c]) for c in columns)
            )
        return [decode_row("trials", row) for row in rows]

    # -- scores -----------------------------------------------------------------------------

    def save_score_groups(self, score_rows: list[dict], groups: list[dict],
                          metrics: Iterable[dict] = ()) -> None:
        """Upsert score rows, score-group records and the ``metrics`` rows they use, at once."""
        score_rows = [encode_row("scores", row) for row in score_rows]
        groups = [encode_row("score_groups", g) for g in groups]
        metrics = [encode_row("metrics", m) for m in metrics]
        if not score_rows and not groups:
            return

        with self._write():
            if metrics:  # before the scores that point to them (foreign key)
                self.db["metrics"].insert_all(metrics, pk="id", ignore=True)
            if any(row.get("configuration") == LEGACY for row in score_rows + groups):
                self.db["configurations"].insert(
                    {"id": LEGACY, "label": LEGACY_LABEL, "description": '{"legacy": true}'},
                    pk="id", ignore=True)
            if score_rows:
                self.db["scores"].upsert_all(self._fit_to_file("scores", score_rows), pk="key")
            if groups:
                self.db["score_groups"].upsert_all(self._fit_to_file("score_groups", groups),
                                                   pk="key")

    def score_groups(self, keys: Iterable[str]) -> dict[str, dict]:
        """Return {key: score-group record, JSON decoded} for the stored ones among ``keys``."""
        rows = self._select_keys("score_groups", keys)
        return {row["key"]: decode_row("score_groups", row) for row in rows}

    def score_rows(self, keys: Iterable[str]) -> dict[str, dict]:
        """Return {key: score row as stored (JSON not decoded)} for the stored ones among ``keys``."""
        return {row["key"]: row for row in self._select_keys("scores", keys)}

    def trial_digests(self, keys: Iterable[str]) -> dict[str, str]:
        """Return {key: digest of every stored column} for the stored trials among ``keys``
        (any rewrite changes it; :mod:`robench.run.scoring` fingerprints inputs with it)."""
        out = {}
        with self._lock:
            for chunk in key_chunks(keys):
                sql = f"SELECT * FROM trials WHERE key IN ({', '.join('?' * len(chunk))})"
                cursor = self.db.conn.execute(sql, chunk)
                names = [d[0] for d in cursor.description]
                at = names.index("key")
                keep = [i for i, n in enumerate(names) if n not in _UNDIGESTED]
                for row in cursor:
                    row = tuple(row[i] for i in keep) if len(keep) < len(row) else row
                    out[row[at]] = hashlib.sha256(repr(row).encode("utf-8")).hexdigest()
        return out

    def scores(self, dataset: Optional[str] = None, metric: Optional[str] = None,
               model: Optional[str] = None, configuration: Optional[str] = None) -> list[dict]:
        """Return score rows, JSON decoded, optionally filtered by dataset, metric, model and
        configuration id; a score stored before configurations were recorded has 'legacy'."""
        filters = {"dataset": dataset, "metric": metric, "model": model,
                   "configuration": configuration}
        where, params = self._where("scores", {k: v for k, v in filters.items() if v is not None})
        order = "ORDER BY dataset, metric, clusterer, model, score, run_id"
        if "metric_id" in self.db["scores"].columns_dict:  # schema 2: definitions stored once
            sql = ("SELECT * FROM (SELECT scores.*, metrics.definition AS definition FROM scores "
                   f"LEFT JOIN metrics ON metrics.id = scores.metric_id) {where} {order}")
        else:
            sql = f"SELECT * FROM scores {where} {order}"
        rows = [decode_row("scores", row) for row in self._select(sql, params)]
        merged = self.contributions()
        for row in rows:
            row["configuration"] = row.get("configuration") or LEGACY
            row["contributor"] = (merged.get(row.get("run_id")) or {}).get("contributor")
        return rows

    def helper_models(self) -> dict[tuple, list]:
        """Return {(dataset, model): [metrics]} of scored models with trials that no score
        group names, on a data set with score groups (a pseudo-model or '' is no helper)."""
        if not self.db["score_groups"].exists():
            return {}
        asked = {(r["dataset"], r["model"]) for r in self._select(
            "SELECT DISTINCT dataset, model FROM score_groups", [])}
        grouped = {dataset for dataset, _ in asked}
        trained = {(r["dataset"], r["model"]) for r in self._select(
            "SELECT DISTINCT dataset, model FROM trials", [])}
        out: dict[tuple, list] = {}
        for r in self._select("SELECT DISTINCT dataset, model, metric FROM scores "
                              "ORDER BY dataset, model, metric", []):
            pair = (r["dataset"], r["model"])
            if (r["model"] and r["dataset"] in grouped and pair in trained
                    and pair not in asked):
                out.setdefault(pair, []).append(r["metric"])
        return out

    def score_versions(self, rows: list[dict]) -> list[dict]:
        """Return per score row the robench, plugin and component versions behind it."""
        run_ids = {r["run_id"] for r in rows if r.get("run_id") is not None}
        runs = {r["id"]: r for r in self.runs(run_ids)} if run_ids else {}
        first_trial = {}  # {(dataset, model, clusterer, metric, configuration): a trial key}
        groups = self.db["score_groups"]
        if groups.exists():
            config = ("configuration" if "configuration" in groups.columns_dict
                      else "NULL AS configuration")
            for g in self._select(f"SELECT dataset, model, clusterer, metric, {config}, "
                                  "trial_keys FROM score_groups", []):
                keys = cells.decoded(g["trial_keys"]) or []
                if keys:
                    first_trial[(g["dataset"], g["model"], g["clusterer"], g["metric"],
                                 g["configuration"] or LEGACY)] = keys[0]
        trials = self.db["trials"]
        versions = {}
        if trials.exists() and {"key", "versions"} <= set(trials.columns_dict):
            # else an old or hand-made file without them: versions unknown, as text
            versions = {r["key"]: cells.decoded(r["versions"])
                        for r in self._select_keys("trials", set(first_trial.values()),
                                                   columns="key, versions")}
        out = []
        for r in rows:
            run = runs.get(r.get("run_id")) or {}
            key = first_trial.get((r["dataset"], r["model"], r.get("clusterer") or "", r["metric"],
                                   r.get("configuration") or LEGACY))
            out.append({"robench": run.get("robench_version"),
                        "plugins": run.get("plugin_versions") or {},
                        "components": versions.get(key) or {}})
        return out

    # -- configurations ---------------------------------------------------------------------

    def save_configuration(self, row: dict) -> None:
        """Insert a configurations row (robench.run.configurations.configuration_row) if new."""
        row = encode_row("configurations", {"created_at": utc_now(), **row})
        with self._write():
            self.db["configurations"].insert(row, pk="id", ignore=True)

    def configurations(self) -> dict[str, dict]:
        """Return {id: configurations row, JSON decoded} ({} for a file from before them)."""
        if not self.db["configurations"].exists():
            return {}
        rows = self._select("SELECT * FROM configurations ORDER BY created_at, id", [])
        return {row["id"]: decode_row("configurations", row) for row in rows}

    # -- clusterings and skips --------------------------------------------------------------

    def save_clustering(self, row: dict) -> None:
        """Upsert one clustering row (sources found in a data set) by its ``key``."""
        if not row.get("key"):
            raise ValueError("a clustering row needs a non-empty 'key'")
        row = encode_row("clusterings", {"created_at": utc_now(), **row})
        with self._write():
            (row,) = self._fit_to_file("clusterings", [row])
            self.db["clusterings"].upsert(row, pk="key")

    def save_skip(self, *, dataset: str, model: str, clusterer: str, metric: str, reason: str,
                  run_id: Optional[int] = None) -> None:
        """Record that a (dataset, model, clusterer, metric) combination could not apply."""
        row = {"dataset": dataset, "model": model or "", "clusterer": clusterer or "",
               "metric": metric or "", "reason": reason, "run_id": run_id}
        with self._write():
            self.db["skips"].upsert(row, pk=("dataset", "model", "clusterer", "metric"))

    def skips(self, **filters: Any) -> list[dict]:
        """Return skip rows matching ``filters``."""
        where, params = self._where("skips", filters)
        sql = f"SELECT * FROM skips {where} ORDER BY dataset, model, clusterer, metric"
        return self._select(sql, params)

    # -- helpers ----------------------------------------------------------------------------

    def _fit_to_file(self, table: str, rows: list[dict]) -> list[dict]:
        """Return encoded ``rows`` ready for this file's ``table``, which may be older: a
        declared column it lacks is added when a row has a value for it, else dropped.

        Never at open: a new column changes every row ``SELECT *`` returns, so every trial
        digest and score-group fingerprint of an older file would change.
        """
        present = set(self.db[table].columns_dict)
        missing = [name for name in COLUMNS[table] if name not in present]
        if not missing:
            return rows
        used = {name for row in rows for name, value in row.items() if value is not None}
        for name in (name for name in missing if name in used):
            self.db.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {COLUMNS[table][name]}')
        unused = set(missing) - used
        return [{k: v for k, v in row.items() if k not in unused} for row in rows]

    def _where(self, table: str, filters: dict) -> tuple[str, list]:
        """Return a WHERE clause and its parameters for column filters on ``table``."""
        columns = set(self.db[table].columns_dict)
        unknown = sorted(set(filters) - columns)
        if unknown:
            # Column names go into the SQL text, so only real columns may pass.
            raise ValueError(f"unknown {table} column(s) {unknown}; known: {sorted(columns)}")
        clauses, params = [], []
        for name, value in filters.items():
            if value is None:
                clauses.append(f'"{name}" IS NULL')
            elif isinstance(value, (list, tuple, set, frozenset)):
                values = [_plain(v) for v in value]
                clauses.append(f'"{name}" IN ({", ".join("?" * len(values))})' if values else "0")
                params.extend(values)
            else:
                clauses.append(f'"{name}" = ?')
                params.append(_plain(value))
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _select_keys(self, table: str, keys: Iterable[str], where: str = "", params=(),
                     columns: str = "*") -> list[dict]:
        """Return ``columns`` of the ``table`` rows whose ``key`` is in ``keys`` (and ``where``)."""
        rows = []
        joiner = "AND" if where else "WHERE"
        for chunk in key_chunks(keys):
            sql = (f"SELECT {columns} FROM {table} {where} {joiner} "
                   f"key IN ({', '.join('?' * len(chunk))})")
            rows.extend(self._select(sql, list(params) + chunk))
        return rows

    def _select(self, sql: str, params: list) -> list[dict]:
        """Return all rows of a SELECT as dicts, read under the write lock."""
        # sqlite-utils wraps reads in a savepoint; interleaved with a write from another
        # thread on the same connection, that savepoint would end up inside the write's
        # transaction.
        with self._lock:
            return [dict(row) for row in self.db.query(sql, params)]

