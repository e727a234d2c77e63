"""Schema versions of the results database (``PRAGMA user_version``; 0 before versions were
recorded) and the migrations between them, applied all or none in one ``BEGIN IMMEDIATE``
transaction when a database is opened to write; read commands never migrate.
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import suppress
from pathlib import Path
from typing import Callable, Optional

from robench.errors import SchemaError  # noqa: F401 (public here too)
from robench.data.cache import content_key
from robench.process.provenance import utc_now

#: ``PRAGMA application_id`` of a robench results database: "RBNC" as a big-endian int32.
APPLICATION_ID = 0x52424E43
#: The configuration of scores stored before configurations were recorded (migration v1).
LEGACY = "legacy"
LEGACY_LABEL = "legacy (stored before robench recorded configurations)"


def _statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (executescript would COMMIT first)."""
    out, current = [], []
    for line in script.splitlines(keepends=True):
        current.append(line)
        text = "".join(current)
        if sqlite3.complete_statement(text):
            out.append(text.strip())
            current = []
    rest = "".join(current).strip()
    if rest and not rest.startswith("--"):
        out.append(rest)
    return [s for s in out if s.strip(" ;\n")]


def _columns(conn, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _tables(conn) -> set[str]:
    return {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}


def _to_v1(conn) -> None:
    """Scores and score groups gain ``configuration``; stored ones become ``legacy``."""
    for table in ("scores", "score_groups"):
        if "configuration" not in _columns(conn, table):
            conn.execute(f'ALTER TABLE "{table}" ADD COLUMN configuration TEXT')
        conn.execute(f'UPDATE "{table}" SET configuration = ? WHERE configuration IS NULL',
                     (LEGACY,))
    if "inputs" not in _columns(conn, "scores"):
        conn.execute("ALTER TABLE scores ADD COLUMN inputs TEXT")
    if conn.execute("SELECT count(*) FROM scores").fetchone()[0]:  # legacy scores
        conn.execute(
            "INSERT OR IGNORE INTO configurations (id, label, description) VALUES (?, ?, ?)",
            (LEGACY, LEGACY_LABEL, '{"legacy": true}'))


def metric_id(name: str, version, definition) -> str:
    """Return the ``metrics.id`` of a metric definition: a hash of name, version and text."""
    return content_key("metric", name, str(version or ""), definition or "")


_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \(", re.I)


def _rebuild(conn, table: str, create: str, fill: Optional[dict] = None) -> None:
    """Rebuild ``table`` as ``create`` declares it (column order, foreign keys), copying the
    columns both have; ``fill`` gives SQL expressions for new columns. SQLite cannot add a
    foreign key to an existing table, hence the copy."""
    new = f"{table}__v2"
    conn.execute(_CREATE.sub(f'CREATE TABLE "{new}" (', create, count=1))
    declared = _columns(conn, new)
    present = set(_columns(conn, table))
    fill = fill or {}
    names = [c for c in declared if c in present or c in fill]
    values = [fill.get(c, f'"{c}"') for c in names]
    order = " ORDER BY rowid" if table != "skips" else ""
    conn.execute(f'INSERT INTO "{new}" ({", ".join(names)}) '
                 f'SELECT {", ".join(values)} FROM "{table}"{order}')
    conn.execute(f'DROP TABLE "{table}"')
    conn.execute(f'ALTER TABLE "{new}" RENAME TO "{table}"')


def _to_v2(conn, schema: str) -> None:
    """Foreign keys, metric definitions once, human-readable columns first, a trial's sources."""
    creates = {m.group(1): s for s in _statements(schema) if (m := _CREATE.match(s))}
    tables = _tables(conn)
    for table in sorted(tables & set(creates) - {"runs"}):
        if "run_id" in _columns(conn, table):
            conn.execute(f'UPDATE "{table}" SET run_id = NULL WHERE run_id IS NOT NULL '
                         "AND run_id NOT IN (SELECT id FROM runs)")
    # every configuration a score names is described (a placeholder for an unknown one)
    for table in ("scores", "score_groups"):
        conn.execute(f'INSERT OR IGNORE INTO configurations (id, label, description) '
                     f'SELECT DISTINCT configuration, configuration, \'{{"unknown": true}}\' '
                     f'FROM "{table}" WHERE configuration IS NOT NULL')
    score_fill = {}
    if "definition" in _columns(conn, "scores"):
        now = utc_now()
        rows = conn.execute("SELECT metric, metric_version, definition, MIN(run_id) FROM scores "
                            "GROUP BY metric, metric_version, definition").fetchall()
        for name, version, definition, run_id in rows:
            conn.execute("INSERT OR IGNORE INTO metrics (id, name, version, definition, run_id, "
                         "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (metric_id(name, version, definition), name, version, definition,
                          run_id, now))
        conn.execute("CREATE TEMP TABLE metric_ids AS SELECT id, name, version, definition "
                     "FROM metrics")
        score_fill["metric_id"] = (
            "(SELECT m.id FROM temp.metric_ids m WHERE m.name IS scores.metric "
            "AND m.version IS scores.metric_version AND m.definition IS scores.definition)")
    trial_fill = {}
    if "trials" in tables and "clustering" not in _columns(conn, "trials"):
        trial_fill["clustering"] = (
            "(SELECT MIN(c.key) FROM clusterings c WHERE c.dataset = trials.dataset "
            "AND c.clusterer = trials.clusterer AND trials.clusterer != '' "
            "AND c.k = json_extract(trials.params, '$.k') AND c.seed = trials.seed "
            "HAVING COUNT(*) = 1)")
    for table in ("runs", "configurations", "metrics", "clusterings", "trials", "scores",
                  "score_groups", "skips"):
        if table in tables or table in ("configurations", "metrics"):
            fill = {"scores": score_fill, "trials": trial_fill}.get(table)
            _rebuild(conn, table, creates[table], fill)
    conn.execute("DROP TABLE IF EXISTS temp.metric_ids")
    problems = conn.execute("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise SchemaError(f"migration to schema 2 left {len(problems)} broken reference(s), "
                          f"e.g. {problems[0]}; nothing was changed")


def _to_v6(conn, schema: str) -> None:
    """Rebuild ``ranks`` empty with its new key (configuration) and ``ranking`` column: the
    ranks are recomputed from the scores after the migration (``robench migrate``, or the
    next write), so no row is carried over."""
    conn.execute("DROP VIEW IF EXISTS leaderboard")
    conn.execute("DROP TABLE IF EXISTS ranks")
    create = next(s for s in _statements(schema)
                  if re.match(r"CREATE TABLE IF NOT EXISTS ranks\b", s, re.I))
    conn.execute(create)


#: (version produced, summary, step(conn, schema)). A step runs after the current SCHEMA's
#: missing tables were created, so it may fill new tables; it must not assume columns added
#: by later steps.
MIGRATIONS: list[tuple[int, str, Callable]] = [
    (1, "score identity includes its configuration (scores.configuration, configurations "
        "table); stored scores become configuration 'legacy'", lambda conn, schema: _to_v1(conn)),
    (2, "foreign keys (trials, scores, score groups, clusterings, skips -> runs; trials -> "
        "clusterings; scores -> configurations, metrics), each metric definition stored once "
        "(metrics table), human-readable columns first, indexes and the views leaderboard, "
        "trial_summary and configuration_choice", _to_v2),
    (3, "contributions and conflicts tables for `robench merge`",
     lambda conn, schema: None),  # the tables are created from the schema
    (4, "merged_sources and verifications tables for `robench merge` and `robench verify`",
     lambda conn, schema: None),  # the tables are created from the schema
    (5, "ranks table (the ranks the site shows, stored when scores change); the leaderboard "
        "view reads them instead of ranking by value, and leaves helper models out",
     lambda conn, schema: conn.execute("DROP VIEW IF EXISTS leaderboard")),
    (6, "ranks stored per configuration with the whole ranking of each row (ranks.ranking: "
        "interval, pair verdicts, rule); every view reads them, none ranks again", _to_v6),
]
#: The schema version this robench writes.
CURRENT = MIGRATIONS[-1][0]


def schema_version(conn) -> int:
    """Return the file's ``PRAGMA user_version``."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_readable(conn, path) -> int:
    """Return the schema version of an open database; SchemaError if it is not robench's."""
    try:
        app = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = schema_version(conn)
        tables = _tables(conn)
    except sqlite3.DatabaseError as exc:
        raise SchemaError(f"{path} is not an SQLite database ({exc})") from None
    if app not in (0, APPLICATION_ID):
        raise SchemaError(f"{path} is an SQLite database of another application "
                          f"(application_id {app:#x}), not a robench results database")
    if not {"runs", "scores"} <= tables:
        raise SchemaError(f"{path} is not a robench results database (it has no runs and "
                          "scores tables)")
    if version > CURRENT:
        raise SchemaError(f"{path} has schema version {version}, newer than this robench "
                          f"knows ({CURRENT}); upgrade robench to use it")
    return version


def unwritable(path) -> Optional[str]:
    """Return why robench cannot write the database at ``path`` (None: it can, as far as known)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        return None
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "robench may not write that file or its folder"
    return None


def _write_refused(path, exc) -> SchemaError:
    """The error for a database that cannot be opened for writing."""
    reason = unwritable(path)
    if reason:
        return SchemaError(f"{path} cannot be written: {reason}; pick a --db on a writable "
                           "disk (results, query and leaderboard read it where it is)")
    return SchemaError(f"{path} is not an SQLite database ({exc})")


def migrate(path, schema: str, timeout: float = 60.0) -> list[tuple[int, str]]:
    """Create or migrate the database at ``path`` to :data:`CURRENT` in one transaction
    (VACUUM after, if free); return the steps applied."""
    path = Path(path)
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=timeout)
    except sqlite3.DatabaseError as exc:
        raise _write_refused(path, exc) from None
    try:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as exc:
            raise _write_refused(path, exc) from None
        try:
            applied = _migrate_locked(conn, path, schema)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if applied:  # a rebuilt table leaves its old pages free: give them back, unless
            with suppress(sqlite3.OperationalError):  # another connection is reading
                conn.execute("VACUUM")
        return applied
    finally:
        conn.close()


def _migrate_locked(conn, path, schema: str) -> list[tuple[int, str]]:
    tables = _tables(conn)
    if not tables:  # a new file: the current schema as it is
        for statement in _statements(schema):
            conn.execute(statement)
        _stamp(conn, CURRENT)
        return []
    version = check_readable(conn, path)
    statements = _statements(schema)
    creates = [s for s in statements if s.upper().startswith("CREATE TABLE")]
    for statement in creates:  # new tables first; columns of old ones come from the steps
        conn.execute(statement)
    if version == CURRENT:
        return []
    applied = []
    for target, summary, step in MIGRATIONS:
        if target > version:
            step(conn, schema)
            applied.append((target, summary))
    for statement in statements:  # indexes and views, now that every column exists
        if not statement.upper().startswith("CREATE TABLE"):
            conn.execute(statement)
    _stamp(conn, CURRENT)
    return applied


def _stamp(conn, version: int) -> None:
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {int(version)}")
