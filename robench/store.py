"""SQLite results store: runs, trials, scores, clusterings and skips, written with upserts.

Every result row has a hashed or compound primary key and is written with an upsert, so a
second ``robench run`` with the same config rewrites nothing it does not have to. Only the
driver process writes (invariant 5), and every finished trial is committed on its own, so a
crash loses at most the trials that were still in flight.

``score_groups`` holds, per metric and (dataset, model, clusterer), what its scores were
computed from: a fingerprint of the inputs (the trial rows as stored, the metric's name,
version and definition), the trial keys, and a digest of every score row written. A rerun
whose inputs are unchanged reports the stored scores instead of computing them again; each
score row's ``inputs`` column holds the fingerprint it was computed from, and its ``run_id``
the run that computed it.

This module must stay importable without torch: ``robench leaderboard`` and ``robench query``
read results on machines that never trained anything.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import platform
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

import sqlite_utils

from robench import __version__

if TYPE_CHECKING:  # pragma: no cover
    from robench.specs import Score

#: Run statuses, in the order a run can move through them.
RUN_STATUSES = ("running", "ok", "failed", "interrupted")
#: Trial statuses; only 'ok' trials count as cached.
TRIAL_STATUSES = ("ok", "failed")
#: Counters ``finish_run`` accepts.
RUN_COUNTS = ("n_planned", "n_cached", "n_ok", "n_failed", "n_skipped")

#: Columns that hold JSON text, per table; they are encoded on write and decoded on read.
JSON_COLUMNS = {
    "runs": ("config", "plugin_versions"),
    "trials": ("params", "spec", "versions", "per_class", "history"),
    "scores": ("details",),
    "score_groups": ("trial_keys", "scores"),
    "clusterings": ("details",),
    "skips": (),
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT,
    finished_at TEXT,
    status TEXT,
    command TEXT,
    robench_version TEXT,
    python TEXT,
    platform TEXT,
    torch_version TEXT,
    git_rev TEXT,
    seed INTEGER,
    config TEXT,
    plugin_versions TEXT,
    n_planned INTEGER,
    n_cached INTEGER,
    n_ok INTEGER,
    n_failed INTEGER,
    n_skipped INTEGER
);
CREATE TABLE IF NOT EXISTS trials (
    key TEXT PRIMARY KEY,
    run_id INTEGER,
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    protocol TEXT,
    kind TEXT,
    repeat INTEGER,
    seed INTEGER,
    params TEXT,
    spec TEXT,
    versions TEXT,
    status TEXT,
    error TEXT,
    accuracy REAL,
    train_accuracy REAL,
    val_accuracy REAL,
    per_class TEXT,
    n_train INTEGER,
    n_val INTEGER,
    n_test INTEGER,
    epochs INTEGER,
    best_epoch INTEGER,
    history TEXT,
    seconds REAL,
    worker TEXT,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS scores (
    key TEXT PRIMARY KEY,
    run_id INTEGER,
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    metric_version TEXT,
    score TEXT,
    value REAL,
    ci_low REAL,
    ci_high REAL,
    n INTEGER,
    higher_is_better INTEGER,
    definition TEXT,
    details TEXT,
    computed_at TEXT,
    inputs TEXT
);
CREATE TABLE IF NOT EXISTS score_groups (
    key TEXT PRIMARY KEY,
    run_id INTEGER,
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    metric_version TEXT,
    inputs TEXT,
    trial_keys TEXT,
    scores TEXT,
    computed_at TEXT
);
CREATE TABLE IF NOT EXISTS clusterings (
    key TEXT PRIMARY KEY,
    run_id INTEGER,
    dataset TEXT,
    clusterer TEXT,
    k INTEGER,
    seed INTEGER,
    fingerprint TEXT,
    silhouette REAL,
    details TEXT,
    seconds REAL,
    created_at TEXT
);
CREATE TABLE IF NOT EXISTS skips (
    dataset TEXT,
    model TEXT,
    clusterer TEXT,
    metric TEXT,
    reason TEXT,
    run_id INTEGER,
    PRIMARY KEY (dataset, model, clusterer, metric)
);
CREATE INDEX IF NOT EXISTS idx_trials_group ON trials (dataset, model, clusterer, protocol);
CREATE INDEX IF NOT EXISTS idx_scores_dataset_metric ON scores (dataset, metric);
"""

# SQLite's default limit on bound parameters is 999 in older builds; stay well below it.
_CHUNK = 500


def utc_now() -> str:
    """Return the current time as an ISO 8601 UTC string with second precision."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def score_key(dataset: str, model: str, clusterer: str, metric: str, score: str) -> str:
    """Return the primary key of one score row: sha256 of the JSON of what identifies it."""
    payload = json.dumps([dataset, model, clusterer or "", metric, score])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def score_row(score: "Score", run_id: int, definitions: dict, computed_at: str,
              inputs: Optional[str] = None) -> dict:
    """Return the scores-table row of ``score``, encoded for SQLite.

    ``definitions`` maps a metric name to ``(version, definition text)``; ``inputs`` is the
    fingerprint of what the score was computed from (see ``score_groups``), if known.
    """
    s = score
    if s.metric not in definitions:
        raise ValueError(
            f"no definition given for metric {s.metric!r}; every score row must say "
            "which definition produced it"
        )
    version, definition = definitions[s.metric]
    return _encode_row(
        "scores",
        {
            "key": score_key(s.dataset, s.model, s.clusterer, s.metric, s.score),
            "run_id": run_id,
            "dataset": s.dataset,
            "model": s.model,
            "clusterer": s.clusterer or "",
            "metric": s.metric,
            "metric_version": str(version),
            "score": s.score,
            "value": s.value,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "n": s.n,
            "higher_is_better": int(bool(s.higher_is_better)),
            "definition": definition,
            "details": dict(s.details or {}),
            "computed_at": computed_at,
            "inputs": inputs,
        },
    )


#: Columns of a score row that carry its content (what a reused score must still match).
_SCORE_CONTENT = ("key", "metric_version", "value", "ci_low", "ci_high", "n",
                  "higher_is_better", "definition", "details")


def _number(value: Any) -> Any:
    # SQLite's column affinity turns 1 into 1.0 in a REAL column and 3.0 into 3 in an INTEGER
    # one; compare numbers the way they come back.
    if isinstance(value, (bool, int, float)):
        value = float(value)
        return int(value) if value.is_integer() else value
    return value


def score_digest(row: dict) -> str:
    """Return a digest of a score row's content, as written by :func:`score_row` or as stored."""
    content = [_number(row.get(c)) for c in _SCORE_CONTENT]
    return hashlib.sha256(repr(content).encode("utf-8")).hexdigest()


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


def _encode_json(value: Any) -> Optional[str]:
    """Return ``value`` as JSON text; a string is taken to be JSON already."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(_plain(value), sort_keys=True, allow_nan=False, default=str)


def _decode_json(text: Any) -> Any:
    """Return the Python value of JSON text, or the text itself if it is not JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _encode_row(table: str, row: dict) -> dict:
    """Return a copy of ``row`` ready for SQLite: JSON columns encoded, scalars made plain."""
    json_columns = JSON_COLUMNS[table]
    out = {}
    for name, value in row.items():
        if name in json_columns:
            out[name] = _encode_json(value)
            continue
        value = _plain(value)
        # an extra column may carry a numpy array or a dict; SQLite can only bind scalars
        out[name] = _encode_json(value) if isinstance(value, (dict, list)) else value
    return out


def _decode_row(table: str, row: dict) -> dict:
    """Return ``row`` with its JSON columns decoded back to Python values."""
    for name in JSON_COLUMNS[table]:
        if name in row:
            row[name] = _decode_json(row[name])
    if table == "scores" and row.get("higher_is_better") is not None:
        row["higher_is_better"] = bool(row["higher_is_better"])
    return row


#: Vector instruction sets, best first: torch and oneDNN pick kernels by the best one present,
#: and kernels for different sets may round differently in the last bit.
_VECTOR_ISAS = ("avx512f", "avx2", "avx", "asimd", "neon")


def platform_description(cpuinfo: str = "/proc/cpuinfo") -> str:
    """Return the OS platform plus the CPU model and its best vector instruction set.

    Trials are bit-identical across runs and executors on one machine, but torch dispatches
    to kernels for the CPU's instruction set, so the same seed can give results differing in
    the last bits (and, through early stopping, in a few predictions) on another CPU. Stored
    with every run so such differences can be traced. Reads ``cpuinfo`` on Linux; elsewhere
    falls back to :func:`platform.processor`.
    """
    model, flags = "", set()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model", "hardware") and not model:
                    model = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    isa = next((name for name in _VECTOR_ISAS if name in flags), None)
    cpu = f"{model}, {isa}" if isa else model
    return f"{platform.platform()}; CPU: {cpu}"


def _torch_version() -> Optional[str]:
    """Return the installed torch version without importing torch, or None."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return getattr(torch, "__version__", None)
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_rev() -> Optional[str]:
    """Return the git commit of the robench source tree, or None outside a checkout."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=3,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = result.stdout.strip()
    return rev if result.returncode == 0 and rev else None


class Store:
    """The results database of one robench installation or project.

    Parameters
    ----------
    path : str or Path
        SQLite file; its parent directory is created and the schema is created if missing.

    Examples
    --------
    >>> store = Store(tmp_path / "robench.db")          # doctest: +SKIP
    >>> run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    """

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The runner may hand finished trials over from an executor's callback thread; the lock
        # below serialises those writes on this single connection.
        conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.RLock()
        # WAL lets `robench leaderboard` or `robench query` read while a run is writing.
        self.db.enable_wal()
        self.db.executescript(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Bring a database written by an older robench up to this schema (additive only)."""
        with self._lock:
            # scores.inputs (the fingerprint of what a score was computed from) came with
            # score_groups; older rows keep NULL there and are recomputed on the next run.
            if "inputs" not in self.db["scores"].columns_dict:
                self.db.execute("ALTER TABLE scores ADD COLUMN inputs TEXT")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection."""
        self.db.close()

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, *, command: str, seed: int, config: dict, plugin_versions: dict) -> int:
        """Record a new run with its config and the versions involved; return its id."""
        row = {
            "started_at": utc_now(),
            "status": "running",
            "command": command,
            "robench_version": __version__,
            "python": platform.python_version(),
            "platform": platform_description(),
            "torch_version": _torch_version(),
            "git_rev": _git_rev(),
            "seed": seed,
            "config": config,
            "plugin_versions": plugin_versions,
        }
        with self._lock, self.db.atomic():
            table = self.db["runs"].insert(_encode_row("runs", row))
        return int(table.last_pk)

    def finish_run(self, run_id: int, status: str, **counts: int) -> None:
        """Mark a run finished with ``status`` and its trial counters (n_planned, n_ok, ...)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
        unknown = sorted(set(counts) - set(RUN_COUNTS))
        if unknown:
            raise ValueError(f"unknown run counters {unknown}; expected some of {RUN_COUNTS}")
        updates = {"finished_at": utc_now(), "status": status}
        updates.update({name: _plain(value) for name, value in counts.items()})
        with self._lock, self.db.atomic():
            self.db["runs"].update(run_id, updates)

    def runs(self, ids: Optional[Iterable[int]] = None) -> list[dict]:
        """Return run rows (all, or those with the given ids), oldest first, JSON decoded."""
        where, params = self._where("runs", {} if ids is None else {"id": list(ids)})
        rows = self._select(f"SELECT * FROM runs {where} ORDER BY id", params)
        return [_decode_row("runs", row) for row in rows]

    # -- trials -----------------------------------------------------------------------------

    def trial_seconds(self) -> list:
        """Return the mean seconds of successful trials per (dataset, model, protocol)."""
        sql = ("SELECT dataset, model, protocol, AVG(seconds) AS seconds FROM trials "
               "WHERE status = 'ok' AND seconds IS NOT NULL GROUP BY dataset, model, protocol")
        return list(self._select(sql, []))

    def ok_trial_keys(self, keys: Iterable[str]) -> set[str]:
        """Return the subset of ``keys`` already stored with status 'ok'."""
        found: set[str] = set()
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            placeholders = ", ".join("?" * len(chunk))
            sql = f"SELECT key FROM trials WHERE status = 'ok' AND key IN ({placeholders})"
            found.update(row["key"] for row in self._select(sql, chunk))
        return found

    def save_trial(self, row: dict) -> None:
        """Upsert one trial row by its ``key`` and commit it at once."""
        if not row.get("key"):
            raise ValueError("a trial row needs a non-empty 'key'")
        status = row.get("status")
        if status not in TRIAL_STATUSES:
            raise ValueError(f"trial status must be one of {TRIAL_STATUSES}, got {status!r}")
        row = dict(row)
        # '' rather than NULL keeps (dataset, model, clusterer) comparable with '=' and unique
        row["clusterer"] = row.get("clusterer") or ""
        row.setdefault("finished_at", utc_now())
        with self._lock, self.db.atomic():
            # alter=True: a protocol may record an extra field without a schema migration
            self.db["trials"].upsert(_encode_row("trials", row), pk="key", alter=True)

    def trials(self, keys: Optional[Iterable[str]] = None, **filters: Any) -> list[dict]:
        """Return trial rows, JSON decoded, optionally only ``keys`` and matching ``filters``.

        A filter value that is a list, tuple or set matches any of its items; None matches NULL.
        """
        where, params = self._where("trials", filters)
        order = "dataset, model, clusterer, protocol, kind, repeat, key"
        if keys is None:
            sql = f"SELECT * FROM trials {where} ORDER BY {order}"
            rows = self._select(sql, params)
        else:
            rows = []
            keys = list(dict.fromkeys(keys))
            joiner = "AND" if where else "WHERE"
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                placeholders = ", ".join("?" * len(chunk))
                sql = f"SELECT * FROM trials {where} {joiner} key IN ({placeholders})"
                rows.extend(self._select(sql, params + chunk))
            # None sorts last and is never compared with a value, so mixed columns cannot clash
            columns = order.split(", ")
            rows.sort(
                key=lambda r: tuple((r[c] is None, 0 if r[c] is None else r[c]) for c in columns)
            )
        return [_decode_row("trials", row) for row in rows]

    # -- scores -----------------------------------------------------------------------------

    def save_scores(self, scores: list["Score"], run_id: int, definitions: dict) -> None:
        """Upsert scores by key in one transaction, each tagged with its metric's definition.

        ``definitions`` maps a metric name to ``(version, definition text)``.
        """
        now = utc_now()
        self.save_score_groups([score_row(s, run_id, definitions, now) for s in scores], [])

    def save_score_groups(self, score_rows: list[dict], groups: list[dict]) -> None:
        """Upsert score rows (from :func:`score_row`) and score-group records in one transaction.

        A score-group record says what one metric's scores of one (dataset, model, clusterer)
        were computed from: the fingerprint of their inputs (``inputs``), the trial keys, and
        ``scores``, the ``[score key, digest]`` pairs in the order the metric returned them.
        """
        groups = [_encode_row("score_groups", g) for g in groups]
        if not score_rows and not groups:
            return
        with self._lock, self.db.atomic():
            if score_rows:
                self.db["scores"].upsert_all(score_rows, pk="key")
            if groups:
                self.db["score_groups"].upsert_all(groups, pk="key")

    def score_groups(self, keys: Iterable[str]) -> dict[str, dict]:
        """Return {key: score-group record, JSON decoded} for the stored ones among ``keys``."""
        rows = self._select_keys("score_groups", keys)
        return {row["key"]: _decode_row("score_groups", row) for row in rows}

    def score_rows(self, keys: Iterable[str]) -> dict[str, dict]:
        """Return {key: score row as stored (JSON not decoded)} for the stored ones among ``keys``."""
        return {row["key"]: row for row in self._select_keys("scores", keys)}

    def trial_digests(self, keys: Iterable[str]) -> dict[str, str]:
        """Return {key: digest of the stored trial row} for the stored ones among ``keys``.

        The digest covers every column as stored, so any rewrite of a trial (run again, another
        status, a changed value) gives another digest.
        """
        out = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                sql = f"SELECT * FROM trials WHERE key IN ({', '.join('?' * len(chunk))})"
                cursor = self.db.conn.execute(sql, chunk)
                at = [d[0] for d in cursor.description].index("key")
                for row in cursor:
                    out[row[at]] = hashlib.sha256(repr(row).encode("utf-8")).hexdigest()
        return out

    def scores(
        self,
        dataset: Optional[str] = None,
        metric: Optional[str] = None,
        model: Optional[str] = None,
    ) -> list[dict]:
        """Return score rows, JSON decoded, optionally filtered by dataset, metric and model."""
        filters = {"dataset": dataset, "metric": metric, "model": model}
        where, params = self._where("scores", {k: v for k, v in filters.items() if v is not None})
        sql = f"SELECT * FROM scores {where} ORDER BY dataset, metric, clusterer, model, score"
        return [_decode_row("scores", row) for row in self._select(sql, params)]

    # -- clusterings and skips --------------------------------------------------------------

    def save_clustering(self, row: dict) -> None:
        """Upsert one clustering row (sources found in a data set) by its ``key``."""
        if not row.get("key"):
            raise ValueError("a clustering row needs a non-empty 'key'")
        row = dict(row)
        row.setdefault("created_at", utc_now())
        with self._lock, self.db.atomic():
            self.db["clusterings"].upsert(_encode_row("clusterings", row), pk="key", alter=True)

    def clusterings(self, **filters: Any) -> list[dict]:
        """Return clustering rows, JSON decoded, matching ``filters``."""
        where, params = self._where("clusterings", filters)
        sql = f"SELECT * FROM clusterings {where} ORDER BY dataset, clusterer, k, seed, key"
        return [_decode_row("clusterings", row) for row in self._select(sql, params)]

    def save_skip(
        self,
        *,
        dataset: str,
        model: str,
        clusterer: str,
        metric: str,
        reason: str,
        run_id: Optional[int] = None,
    ) -> None:
        """Record that a (dataset, model, clusterer, metric) combination could not apply."""
        row = {
            "dataset": dataset,
            "model": model or "",
            "clusterer": clusterer or "",
            "metric": metric or "",
            "reason": reason,
            "run_id": run_id,
        }
        with self._lock, self.db.atomic():
            self.db["skips"].upsert(row, pk=("dataset", "model", "clusterer", "metric"))

    def skips(self, **filters: Any) -> list[dict]:
        """Return skip rows matching ``filters``."""
        where, params = self._where("skips", filters)
        sql = f"SELECT * FROM skips {where} ORDER BY dataset, model, clusterer, metric"
        return self._select(sql, params)

    # -- helpers ----------------------------------------------------------------------------

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
                if not values:
                    clauses.append("0")
                    continue
                clauses.append(f'"{name}" IN ({", ".join("?" * len(values))})')
                params.extend(values)
            else:
                clauses.append(f'"{name}" = ?')
                params.append(_plain(value))
        return ("WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _select_keys(self, table: str, keys: Iterable[str]) -> list[dict]:
        """Return the rows of ``table`` whose ``key`` is among ``keys`` (not decoded)."""
        rows = []
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            sql = f"SELECT * FROM {table} WHERE key IN ({', '.join('?' * len(chunk))})"
            rows.extend(self._select(sql, chunk))
        return rows

    def _select(self, sql: str, params: list) -> list[dict]:
        """Return all rows of a SELECT as dicts, read under the write lock."""
        # sqlite-utils wraps reads in a savepoint; interleaved with a write from another
        # thread on the same connection, that savepoint would end up inside the write's
        # transaction.
        with self._lock:
            return [dict(row) for row in self.db.query(sql, params)]


# -- read-only SQL for `robench query` --------------------------------------------------------


class ReadOnlyQueryError(Exception):
    """A statement given to the read-only query interface would change the database."""


# Statements refused by their first keyword before SQLite sees them; some (VACUUM INTO, REINDEX)
# act before, or without, any authorizer callback.
_WRITE_KEYWORDS = {
    "INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "DROP", "CREATE", "ALTER", "ATTACH",
    "DETACH", "VACUUM", "REINDEX", "ANALYZE", "BEGIN", "COMMIT", "END", "ROLLBACK",
    "SAVEPOINT", "RELEASE",
}  # fmt: skip

# SQLite authorizer action codes (sqlite3.h); Python's module names some of them ambiguously.
_DENIED_ACTIONS = {
    1: "CREATE INDEX", 2: "CREATE TABLE", 3: "CREATE INDEX", 4: "CREATE TABLE",
    5: "CREATE TRIGGER", 6: "CREATE VIEW", 7: "CREATE TRIGGER", 8: "CREATE VIEW",
    9: "DELETE", 10: "DROP INDEX", 11: "DROP TABLE", 12: "DROP INDEX", 13: "DROP TABLE",
    14: "DROP TRIGGER", 15: "DROP VIEW", 16: "DROP TRIGGER", 17: "DROP VIEW", 18: "INSERT",
    22: "transaction", 23: "UPDATE", 24: "ATTACH", 25: "DETACH", 26: "ALTER TABLE",
    27: "REINDEX", 28: "ANALYZE", 29: "CREATE VIRTUAL TABLE", 30: "DROP VIRTUAL TABLE",
    32: "SAVEPOINT",
}  # fmt: skip
_PRAGMA = 19
_UPDATE = 23
# SQLite reports its own schema bookkeeping as UPDATEs of these while preparing plain reads
# such as SELECT ... FROM pragma_table_info(...); a user cannot write them without a CREATE.
_SCHEMA_TABLES = {"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"}
# PRAGMAs that only read. Anything else (an assignment, or a side effect like wal_checkpoint
# or optimize) is refused.
_READ_PRAGMAS = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    "database_list", "collation_list", "function_list", "module_list", "pragma_list",
    "compile_options", "page_count", "page_size", "freelist_count", "data_version",
    "encoding", "user_version", "schema_version", "application_id", "journal_mode",
    "foreign_keys", "query_only", "auto_vacuum",
}  # fmt: skip
_READ_PRAGMAS_WITH_ARGUMENT = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
}  # fmt: skip


def _first_keyword(sql: str) -> str:
    """Return the first SQL keyword of ``sql``, upper-cased, skipping whitespace and comments."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i].isspace() or sql[i] in ";\ufeff":
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
        else:
            break
    j = i
    while j < n and (sql[j].isalnum() or sql[j] == "_"):
        j += 1
    return sql[i:j].upper()


def _refusal(kind: str) -> ReadOnlyQueryError:
    """Return the error for a refused statement of the given kind."""
    return ReadOnlyQueryError(
        f"the query interface is read-only: refused a {kind} statement "
        "(only SELECT, WITH ... SELECT, EXPLAIN and read-only PRAGMAs are allowed)"
    )


def query_readonly(path, sql: str, params=()) -> tuple[list[str], list[tuple]]:
    """Run one read-only SQL statement on the results database; return (columns, rows).

    Raises ReadOnlyQueryError for any statement that would write, FileNotFoundError if the
    database does not exist and ValueError (with SQLite's message) for invalid SQL.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no results database at {path}; run `robench run` first to create it"
        )
    keyword = _first_keyword(sql)
    if keyword in _WRITE_KEYWORDS:
        raise _refusal(keyword)

    refused: list[str] = []

    def authorize(action, arg1, arg2, db_name, trigger):
        # Prepare-time veto: a refused statement never runs, so the file cannot change.
        if action == _UPDATE and arg1 in _SCHEMA_TABLES:
            return sqlite3.SQLITE_OK
        if action in _DENIED_ACTIONS:
            refused.append(_DENIED_ACTIONS[action])
            return sqlite3.SQLITE_DENY
        if action == _PRAGMA:
            name = (arg1 or "").lower()
            allowed = name in _READ_PRAGMAS and (
                arg2 is None or name in _READ_PRAGMAS_WITH_ARGUMENT
            )
            if not allowed:
                refused.append(f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}"))
                return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    # mode=ro and query_only are the backstops; the authorizer is what names the refusal.
    # as_uri() percent-encodes the path, so a '?' or '#' in a directory name cannot break it
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(authorize)
        try:
            cursor = conn.execute(sql, params)
            columns = [d[0] for d in cursor.description or ()]
            rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        except (sqlite3.Error, sqlite3.Warning) as exc:
            if refused:
                raise _refusal(refused[0]) from None
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise _refusal(keyword or "write") from None
            raise ValueError(f"SQL error: {exc}") from None
        return columns, rows
    finally:
        conn.close()


def summarize_skips(skipped: Iterable[dict]) -> list[dict]:
    """Group skip rows by (metric, reason); name what each reason does not already name.

    Returns dicts with ``metric``, ``reason`` and ``where`` ("models: a, b" and/or "data sets:
    x, y", empty when the reason names them all), in first-seen order.
    """
    groups: dict = {}
    for s in skipped:
        groups.setdefault((s["metric"], s["reason"]), []).append(s)
    out = []
    for (metric, reason), rows in groups.items():
        where = []
        for kind, label in (("model", "models"), ("dataset", "data sets")):
            names = sorted({r[kind] for r in rows if r.get(kind)})
            if names and not all(f"'{n}'" in reason for n in names):
                where.append(f"{label}: {', '.join(names)}")
        out.append({"metric": metric, "reason": reason, "where": "; ".join(where)})
    return out
