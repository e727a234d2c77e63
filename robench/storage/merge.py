"""Merge contributors' results databases into one: ``robench merge A.db B.db --db C.db``.

A contributor's database is untrusted input. Each source is opened read-only with SQLite's
``trusted_schema`` off and checked (a robench database of a known schema version; every
table it shares with robench has only declared columns; keys, run ids, statuses and JSON
columns hold what they should); anything else is refused with a message naming the file.
A consistent snapshot of it is taken with SQLite's backup API into a temporary file whose
triggers and views are dropped before it is migrated to the current schema there; only rows
are copied from it, never its schema, triggers or views.

Into the target (created or migrated like any database ``robench run`` writes):

- **runs** are copied with new ids; ``contributions`` records, per copied run, where it came
  from (contributor name, source file name and checksum, the run's id there) and a
  fingerprint of the run row, so merging the same run again (from the same file, or a later
  copy of it) copies nothing.
- **configurations**, **metrics**, **clusterings** and **skips** are keyed by content or
  name: one that is already there is kept.
- **trials** are keyed by their definition. A trial already there with the same results is a
  duplicate and skipped; one with different results is a **conflict**: recorded in
  ``conflicts`` (which columns differ, the incoming row) and reported with the stored and
  incoming values and where the kept row came from, never written over the stored one. An
  incoming 'ok' trial replaces a stored 'failed' one (counted and reported as such); an
  incoming 'failed' one never replaces anything (counted as not copied).
- **scores** and **score_groups** (what a metric's scores were computed from) likewise: new
  ones are copied, identical ones are duplicates, a different one under a stored key is a
  conflict, reported and kept apart.

Merging twice changes nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from robench.storage.migrations import CURRENT, SchemaError, check_readable, migrate
from robench.storage.provenance import utc_now
from robench.errors import MergeError  # noqa: F401 (public here too)

#: Trial columns that say where and when a trial ran, not what it found: not compared.
_TRIAL_CIRCUMSTANCES = ("run_id", "worker", "finished_at", "seconds", "device", "clustering")
#: Score columns that say when and by which run a score was computed: not compared.
_SCORE_CIRCUMSTANCES = ("run_id", "computed_at", "inputs")
#: Score-group columns that say when and by which run a group was computed: not compared.
_GROUP_CIRCUMSTANCES = ("run_id", "computed_at")
#: Columns that name what a conflicting row is about, for the report.
_LABEL = ("dataset", "model", "clusterer", "metric", "score", "protocol", "partition", "repeat")
#: Run columns outside a run's fingerprint (its id is the source's own).
_RUN_ID = ("id",)
#: Columns an older schema had that a migration moved elsewhere.
_MOVED = {"scores": {"definition"}}


@dataclass
class MergeReport:
    """What one merge did, per source and in total."""

    sources: list = field(default_factory=list)  # dicts: source, contributor, counts
    conflicts: list = field(default_factory=list)  # dicts: kind, key, label, source,
    # contributor, columns, stored and incoming values of those columns, kept (its origin)


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_source(conn, path) -> None:
    """Refuse a source whose tables or values do not fit robench's schema."""
    from robench.storage.store import COLUMNS, JSON_COLUMNS, RUN_STATUSES, TRIAL_STATUSES

    check_readable(conn, path)
    tables = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    for table in sorted(tables & set(COLUMNS)):
        present = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        extra = set(present) - set(COLUMNS[table]) - _MOVED.get(table, set())
        if extra:
            raise MergeError(f"{path}: table {table} has columns robench does not declare "
                             f"({', '.join(sorted(extra))}); refusing to merge it")
        if table in ("trials", "scores", "score_groups", "clusterings") and "key" in present:
            bad = conn.execute(f'SELECT count(*) FROM "{table}" WHERE typeof(key) != \'text\' '
                               "OR length(key) = 0 OR length(key) > 128").fetchone()[0]
            if bad:
                raise MergeError(f"{path}: {bad} {table} row(s) without a valid key")
        if "run_id" in present:
            bad = conn.execute(f'SELECT count(*) FROM "{table}" WHERE run_id IS NOT NULL '
                               "AND typeof(run_id) != 'integer'").fetchone()[0]
            if bad:
                raise MergeError(f"{path}: {bad} {table} row(s) with a run id that is not an "
                                 "integer")
        for column in JSON_COLUMNS.get(table, ()):
            if column in present:
                bad = conn.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}" IS NOT NULL '
                                   f'AND NOT json_valid("{column}")').fetchone()[0]
                if bad:
                    raise MergeError(f"{path}: {bad} {table} row(s) whose {column} is not JSON")
    statuses = {"trials": TRIAL_STATUSES, "runs": RUN_STATUSES}
    for table, allowed in statuses.items():
        if table in tables:
            marks = ", ".join("?" * len(allowed))
            bad = conn.execute(f'SELECT count(*) FROM "{table}" WHERE status IS NOT NULL AND '
                               f"status NOT IN ({marks})", allowed).fetchone()[0]
            if bad:
                raise MergeError(f"{path}: {bad} {table} row(s) with an unknown status")


def _snapshot(path: Path, into: Path) -> None:
    """Copy a checked source into ``into`` (backup API), drop its triggers and views, and
    migrate the copy to the current schema."""
    from robench.storage.readonly import connect_readonly
    from robench.storage.store import SCHEMA

    src = connect_readonly(path)
    try:
        src.execute("PRAGMA trusted_schema = OFF")
        _check_source(src, path)
        dst = sqlite3.connect(into)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    conn = sqlite3.connect(into, isolation_level=None)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        for kind, name in conn.execute(
                "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
        ).fetchall():
            conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    finally:
        conn.close()
    try:
        migrate(into, SCHEMA)
    except (sqlite3.DatabaseError, SchemaError) as exc:
        raise MergeError(f"{path}: cannot be brought to schema {CURRENT}: {exc}") from None


def _rows(conn, table: str) -> list[dict]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (table,)).fetchone()
    if not exists:
        return []
    cursor = conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def _insert(conn, table: str, row: dict, verb: str = "INSERT") -> None:
    names = list(row)
    conn.execute(f'{verb} INTO "{table}" ({", ".join(names)}) '
                 f'VALUES ({", ".join("?" * len(names))})', [row[n] for n in names])


def _stored(conn, table: str, key: str) -> Optional[dict]:
    """Return the target's row of ``table`` with ``key``, or None."""
    cursor = conn.execute(f'SELECT * FROM "{table}" WHERE key = ?', (key,))
    row = cursor.fetchone()
    return None if row is None else dict(zip([d[0] for d in cursor.description], row))


def _differs(old: dict, new: dict, ignore) -> list[str]:
    """Return the columns (outside ``ignore``) in which two rows differ."""
    out = []
    for name in sorted(set(old) | set(new)):
        if name in ignore:
            continue
        a, b = old.get(name), new.get(name)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if float(a) != float(b):
                out.append(name)
        elif a != b:
            out.append(name)
    return out


def merge_databases(sources: list, target, contributors: Optional[list] = None) -> MergeReport:
    """Merge ``sources`` (paths) into the database at ``target``; return what was done.

    ``contributors`` names each source's contributor (default: the file's stem). See the
    module docstring for what is copied, de-duplicated and reported as a conflict.
    """
    from robench.storage.store import Store

    sources = [Path(s) for s in sources]
    target = Path(target)
    contributors = list(contributors or []) + [None] * len(sources)
    for path in sources:
        if not path.is_file():
            raise FileNotFoundError(f"no database to merge at {path}")
        if target.exists() and path.resolve() == target.resolve():
            raise MergeError(f"{path} is the target itself; merge it into another file")
    report = MergeReport()
    with Store(target) as store:
        conn = store.db.conn
        for path, contributor in zip(sources, contributors):
            contributor = contributor or path.stem
            with tempfile.TemporaryDirectory(prefix="robench-merge-") as tmp:
                copy = Path(tmp) / "source.db"
                _snapshot(path, copy)
                src = sqlite3.connect(copy)
                try:
                    src.execute("PRAGMA trusted_schema = OFF")
                    with store._write():
                        counts = _merge_one(conn, src, path, contributor, _file_sha256(path),
                                            report)
                finally:
                    src.close()
            report.sources.append({"source": str(path), "contributor": contributor, **counts})
    return report


def _merge_one(conn, src, path: Path, contributor: str, sha: str, report: MergeReport) -> dict:
    """Copy one migrated snapshot's rows into the target connection (inside a transaction)."""
    counts = dict.fromkeys((
        "runs", "runs_known", "trials", "trials_duplicate", "trials_conflict",
        "trials_replaced_failed", "trials_failed_skipped", "scores", "scores_duplicate",
        "scores_conflict", "score_groups", "score_groups_duplicate", "score_groups_conflict"), 0)
    now = utc_now()
    run_map = {}
    # a run the source itself had merged in keeps its original contributor
    origin = {r["run_id"]: r for r in _rows(src, "contributions")}
    for run in _rows(src, "runs"):
        fingerprint = _digest({k: v for k, v in run.items() if k not in _RUN_ID})
        known = conn.execute("SELECT run_id FROM contributions WHERE run_fingerprint = ?",
                             (fingerprint,)).fetchone()
        if known:
            run_map[run["id"]] = known[0]
            counts["runs_known"] += 1
            continue
        row = {k: v for k, v in run.items() if k != "id"}
        _insert(conn, "runs", row)
        new_id = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        run_map[run["id"]] = new_id
        first = origin.get(run["id"]) or {}
        _insert(conn, "contributions", {
            "run_id": new_id, "contributor": first.get("contributor") or contributor,
            "source": first.get("source") or path.name,
            "source_sha256": sha, "source_run_id": run["id"], "run_fingerprint": fingerprint,
            "merged_at": now})
        counts["runs"] += 1

    def remap(row):
        if row.get("run_id") is not None:
            row["run_id"] = run_map.get(row["run_id"])
        return row

    for table, key in (("configurations", "id"), ("metrics", "id"), ("clusterings", "key")):
        for row in _rows(src, table):
            _insert(conn, table, remap(row), "INSERT OR IGNORE")
    for row in _rows(src, "trials"):
        remap(row)
        if row.get("clustering") is not None and not conn.execute(
                "SELECT 1 FROM clusterings WHERE key = ?", (row["clustering"],)).fetchone():
            row["clustering"] = None
        old = _stored(conn, "trials", row["key"])
        if old is None:
            _insert(conn, "trials", row)
            counts["trials"] += 1
            continue
        diff = _differs(old, row, _TRIAL_CIRCUMSTANCES)
        if not diff:
            counts["trials_duplicate"] += 1
        elif old.get("status") == "failed" and row.get("status") == "ok":
            conn.execute("DELETE FROM trials WHERE key = ?", (row["key"],))
            _insert(conn, "trials", row)
            counts["trials_replaced_failed"] += 1
        elif row.get("status") == "failed":
            counts["trials_failed_skipped"] += 1  # a failure never replaces anything
        else:
            _conflict(conn, "trial", old, row, diff, path, contributor, now, report)
            counts["trials_conflict"] += 1
    for kind, table, ignore in (("score", "scores", _SCORE_CIRCUMSTANCES),
                                ("score_group", "score_groups", _GROUP_CIRCUMSTANCES)):
        for row in _rows(src, table):
            remap(row)
            old = _stored(conn, table, row["key"])
            if old is None:
                _insert(conn, table, row)
                counts[table] += 1
                continue
            diff = _differs(old, row, ignore)
            if diff:
                _conflict(conn, kind, old, row, diff, path, contributor, now, report)
                counts[f"{table}_conflict"] += 1
            else:
                counts[f"{table}_duplicate"] += 1
    for row in _rows(src, "skips"):
        _insert(conn, "skips", remap(row), "INSERT OR IGNORE")
    return counts


def _origin(conn, run_id) -> str:
    """Say where the target's run ``run_id`` came from: a merged contributor or a local run."""
    if run_id is None:
        return "a row without a run"
    row = conn.execute("SELECT contributor, source, source_run_id FROM contributions "
                       "WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return f"run {run_id} of the target"
    return f"{row[0]} ({row[1]}, run {row[2]} there)"


def _short(value, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def _conflict(conn, kind, old, row, columns, path, contributor, now, report) -> None:
    """Record a conflicting row (once per kind, key and incoming content) and report it."""
    incoming = json.dumps(row, sort_keys=True, default=str)
    conn.execute(
        "INSERT OR IGNORE INTO conflicts (kind, key, columns, contributor, source, incoming, "
        "incoming_sha256, detected_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (kind, row["key"], json.dumps(columns), contributor, path.name, incoming,
         hashlib.sha256(incoming.encode()).hexdigest(), now))
    label = " ".join(str(row[c]) for c in _LABEL if row.get(c) not in (None, ""))
    report.conflicts.append({
        "kind": kind, "key": row["key"], "label": label, "source": str(path),
        "contributor": contributor, "columns": columns,
        "stored": {c: _short(old.get(c)) for c in columns},
        "incoming": {c: _short(row.get(c)) for c in columns},
        "kept": _origin(conn, old.get("run_id"))})
