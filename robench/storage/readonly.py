"""Read-only access to the results database: opening it, and SQL for ``robench query``.

:func:`readonly_uri` opens it ``mode=ro`` (``immutable=1`` where a WAL read would leave files
behind: docs/database.md). A write is refused by its first keyword, then by an authorizer
vetoing every write and non-reading PRAGMA (``mode=ro`` and ``query_only`` are backstops); a
progress handler and ``interrupt()`` stop a statement past its time limit.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterator

from robench.errors import QueryTimeout, ReadOnlyQueryError  # noqa: F401 (public here too)
from robench.storage import cells
from robench.storage.migrations import SchemaError, check_readable

#: Seconds ``robench query`` lets one statement run by default.
DEFAULT_TIMEOUT = 5.0
#: Longest text or BLOB a statement may make or read (SQLite's own limit is 1 GB): one
#: step of SQL on longer strings (printf, replace) ran seconds past any time limit.
MAX_LENGTH = 64 << 20
_HEADER = b"SQLite format 3\x00"


def readonly_uri(path) -> str:
    """Return the SQLite URI that opens ``path`` read-only (see the module docstring);
    FileNotFoundError if there is no file, migrations.SchemaError if it is not SQLite."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results database at {path}; run `robench run` first to "
                                "create it")
    with open(path, "rb") as fh:
        header = fh.read(100)
    if header and not header.startswith(_HEADER):
        raise SchemaError(f"{path} is not an SQLite database (no SQLite header)")
    # as_uri() percent-encodes the path, so a '?' or '#' in a directory name cannot break it
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal = len(header) >= 20 and header[18] == 2 and header[19] == 2
    shm, log = Path(f"{path}-shm"), Path(f"{path}-wal")
    if wal and not shm.exists() and (not log.exists()
                                     or not os.access(path.resolve().parent, os.W_OK)):
        uri += "&immutable=1"
    return uri


def schema_objects(schema: str) -> tuple[list, list]:
    """Return (table names, view names) that a schema's CREATE statements make, in order."""
    found = re.findall(r"CREATE\s+(TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(\w+)", schema,
                       flags=re.I)
    return ([n for kind, n in found if kind.upper() == "TABLE"],
            [n for kind, n in found if kind.upper() == "VIEW"])


def connect_readonly(path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open the results database read-only and check that it is one (SchemaError if not)."""
    conn = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=check_same_thread)
    try:
        conn.execute("PRAGMA query_only = ON")
        check_readable(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def decode_json_cells(rows: list[tuple]) -> list[tuple]:
    """Return rows with every text cell holding a JSON object or array decoded."""
    def cell(value):
        if isinstance(value, str) and value[:1] in "{[":
            return cells.decoded(value, otherwise=value)  # not JSON, or too deep: the text
        return value

    return [tuple(cell(v) for v in row) for row in rows]


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
_FUNCTION = 31
# SQL functions refused by name: fts3_tokenizer(name) returns a tokenizer's address (a heap
# pointer) and fts3_tokenizer(name, pointer) makes SQLite call through any address given;
# load_extension loads code.
_DENIED_FUNCTIONS = {"fts3_tokenizer", "load_extension"}
_UPDATE = 23
# SQLite reports its own schema bookkeeping as UPDATEs of these while preparing plain reads
# such as SELECT ... FROM pragma_table_info(...); a user cannot write them without a CREATE.
_SCHEMA_TABLES = {"sqlite_master", "sqlite_temp_master", "sqlite_schema", "sqlite_temp_schema"}
# PRAGMAs that only read. Anything else (an assignment, or a side effect like wal_checkpoint
# or optimize) is refused.
_READ_PRAGMAS_WITH_ARGUMENT = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
}  # fmt: skip
_READ_PRAGMAS = _READ_PRAGMAS_WITH_ARGUMENT | {
    "database_list", "collation_list", "function_list", "module_list", "pragma_list",
    "compile_options", "page_count", "page_size", "freelist_count", "data_version",
    "encoding", "user_version", "schema_version", "application_id", "journal_mode",
    "foreign_keys", "query_only", "auto_vacuum",
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
    return ReadOnlyQueryError(f"the query interface is read-only: refused a {kind} statement "
                              "(only SELECT, WITH ... SELECT, EXPLAIN and read-only PRAGMAs "
                              "are allowed)")


def stream_readonly(path, sql: str, params=(), timeout: float = DEFAULT_TIMEOUT,
                    batch_size: int = 1000) -> tuple[list[str], Iterator[list[tuple]]]:
    """Run one read-only SQL statement; return (columns, an iterator of row batches)."""
    path = Path(path)
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
        if action == _FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            refused.append(f"{arg2.lower()}()")
            return sqlite3.SQLITE_DENY
        if action == _PRAGMA:
            name = (arg1 or "").lower()
            if name not in _READ_PRAGMAS or (arg2 is not None
                                             and name not in _READ_PRAGMAS_WITH_ARGUMENT):
                refused.append(f"PRAGMA {name}" + ("" if arg2 is None else f" = {arg2}"))
                return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    # mode=ro and query_only are the backstops; the authorizer is what names the refusal.
    conn = connect_readonly(path)
    deadline = [None]

    def too_long():
        # called every few thousand virtual-machine steps; non-zero interrupts the statement
        return 1 if deadline[0] is not None and time.monotonic() > deadline[0] else 0

    def translated(exc):
        if deadline[0] is not None and time.monotonic() > deadline[0] and "interrupt" in str(exc):
            return QueryTimeout(
                f"the query was stopped after its time limit of {timeout:g} s (a runaway "
                "WITH RECURSIVE?); add a LIMIT, or raise it with --timeout SECONDS")
        if "too big" in str(exc):
            return ValueError(f"SQL error: {exc} (text and BLOBs are limited to "
                              f"{MAX_LENGTH >> 20} MB in a query)")
        if refused:
            return _refusal(refused[0])
        if "readonly" in str(exc) or "read-only" in str(exc):
            return _refusal(keyword or "write")
        return ValueError(f"SQL error: {exc}")

    watchdog = None
    try:
        conn.set_authorizer(authorize)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
        if timeout and timeout > 0:
            conn.set_progress_handler(too_long, 10_000)
            deadline[0] = time.monotonic() + timeout
            # the progress handler runs between steps; interrupt() also reaches a long one
            watchdog = threading.Timer(timeout, conn.interrupt)
            watchdog.daemon = True
            watchdog.start()
        try:
            cursor = conn.execute(sql, params)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise translated(exc) from None
        columns = [d[0] for d in cursor.description or ()]
    except BaseException:
        if watchdog is not None:
            watchdog.cancel()
        conn.close()
        raise

    def batches():
        try:
            if not cursor.description:
                return
            while True:
                try:
                    batch = cursor.fetchmany(batch_size)
                except (sqlite3.Error, sqlite3.Warning) as exc:
                    raise translated(exc) from None
                if not batch:
                    return
                yield [tuple(row) for row in batch]
        finally:
            if watchdog is not None:
                watchdog.cancel()
            conn.close()

    return columns, batches()
