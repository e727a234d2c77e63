"""Merge contributors' results databases into one: ``robench merge A.db B.db --db C.db``.

A source is untrusted: checked, snapshotted, migrated and its keys checked before anything is
copied; docs/contributions.md says how, and what is compared and refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from robench.errors import MergeError  # noqa: F401 (public here too)
from robench.process.provenance import utc_now
from robench.storage.content import (ACCURACIES, TRIAL_RESULT, differing, group_content, same_raw,
                                     score_content, trial_content)
from robench.storage.migrations import CURRENT, SchemaError, check_readable, migrate
from robench.plugins import get_registry
from robench.run.ranking import refresh_ranks
from robench.run.scoring import group_key, score_key, score_row
from robench.run.trials import trial_key
from robench.storage.cells import MAX_JSON_DEPTH, TooDeep, decoded, loads
from robench.storage.readonly import connect_readonly
from robench.storage.store import (COLUMNS, JSON_COLUMNS, RUN_STATUSES, SCHEMA, TRIAL_STATUSES,
                                   Store, decode_row, key_chunks)

#: Columns that name what a conflicting row is about, for the report.
_LABEL = ("dataset", "model", "clusterer", "metric", "score", "protocol", "kind", "repeat")
#: Run columns outside a run's fingerprint (its id is the source's own).
_RUN_ID = ("id",)
#: Columns an older schema had that a migration moved elsewhere.
_MOVED = {"scores": {"definition"}}
#: Tables whose rows are identified by a ``key`` column.
_KEYED = ("trials", "scores", "score_groups", "clusterings")
#: What a trial spec's key hashes (robench.run.trials.keyed_spec); the row repeats these columns.
_SPEC_CORE = ("protocol", "dataset", "model", "clusterer", "kind", "repeat", "seed", "params",
              "versions")
#: Relative and absolute tolerance of a recomputed score: the same code on the same trials
#: gives the same number up to the order of floating-point sums.
SCORE_TOLERANCE = 1e-9
_COUNTS = ("runs", "runs_known", "trials", "trials_duplicate", "trials_conflict",
           "trials_replaced_failed", "trials_failed_skipped", "scores", "scores_duplicate",
           "scores_conflict", "scores_without_trials", "scores_unchecked", "score_groups",
           "score_groups_duplicate", "score_groups_conflict", "verifications")


@dataclass
class MergeReport:
    """What one merge did, per source and in total."""

    sources: list = field(default_factory=list)  # dicts: source, contributor, counts
    conflicts: list = field(default_factory=list)  # dicts: kind, key, label, source,
    # contributor, columns, stored and incoming values of those columns, kept (its origin)
    unchecked: list = field(default_factory=list)  # dicts: source, metric, version, n, why
    known_conflicts: int = 0  # conflicts an earlier merge recorded already (not listed again)


def file_sha256(path: Path) -> str:
    """Return the sha256 of a file's bytes (how a merged source, or a contribution, is known)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_source(conn, path) -> None:
    """Refuse a source whose tables or values do not fit robench's schema."""
    check_readable(conn, path)
    objects = {r[0]: (r[1] or "") for r in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    for table in sorted(set(objects) & set(COLUMNS)):
        present = _check_table(conn, path, table, objects[table])
        _check_numbers(conn, path, table, present)
        _check_json(conn, path, table, present)
    for table, allowed in {"trials": TRIAL_STATUSES, "runs": RUN_STATUSES}.items():
        if table in objects:
            _refuse_rows(conn, path, table, "with an unknown status", "status IS NOT NULL AND "
                         f"status NOT IN ({', '.join('?' * len(allowed))})", *allowed)


def _refuse(path, table: str, what: str):
    return MergeError(f"{path}: table {table} {what}; refusing to merge it")


def _check_table(conn, path, table: str, sql: str) -> list:
    """Refuse a table of a kind or with columns robench never writes; return its columns."""
    if sql.lstrip().upper().startswith("CREATE VIRTUAL"):
        raise _refuse(path, table, "is a virtual table, which robench never writes")
    try:
        conn.execute(f'SELECT rowid FROM "{table}" LIMIT 0')
    except sqlite3.OperationalError:
        raise _refuse(path, table, "is a WITHOUT ROWID table, which robench never "
                      "writes") from None
    info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
    hidden = sorted(r[1] for r in info if r[6])
    if hidden:
        raise _refuse(path, table, f"has generated or hidden column(s) ({', '.join(hidden)}) "
                      "robench never writes")
    present = [r[1] for r in info]
    extra = set(present) - set(COLUMNS[table]) - _MOVED.get(table, set())
    if extra:
        raise _refuse(path, table, f"has columns robench does not declare "
                      f"({', '.join(sorted(extra))})")
    if table in _KEYED and "key" not in present:
        raise _refuse(path, table, "has no key column, so its rows cannot be matched")
    return present


def _refuse_rows(conn, path, table: str, what: str, where: str, *args) -> None:
    """Refuse the source if any row of ``table`` matches ``where``, saying ``what`` they are."""
    bad = conn.execute(f'SELECT count(*) FROM "{table}" WHERE {where}', args).fetchone()[0]
    if bad:
        raise MergeError(f"{path}: {bad} {table} row(s) {what}")


def _check_numbers(conn, path, table: str, present: list) -> None:
    """Refuse rows without a valid key, with a run id or number that is not one."""
    if table in _KEYED:
        _refuse_rows(conn, path, table, "without a valid key",
                     "typeof(key) != 'text' OR length(key) = 0 OR length(key) > 128")
    if "run_id" in present:
        _refuse_rows(conn, path, table, "with a run id that is not an integer",
                     "run_id IS NOT NULL AND typeof(run_id) != 'integer'")
    for column, sqltype in COLUMNS[table].items():
        if column in present and sqltype.upper() in ("INTEGER", "REAL"):
            _refuse_rows(conn, path, table, f"whose {column} is not a finite number",
                         f'"{column}" IS NOT NULL AND (typeof("{column}") NOT IN (\'integer\', '
                         f'\'real\') OR abs("{column}") > 1.7976931348623157e308)')


def _check_json(conn, path, table: str, present: list) -> None:
    """Refuse a JSON column holding what is not JSON, or nests deeper than robench writes."""
    for column in JSON_COLUMNS.get(table, ()):
        if column not in present:
            continue
        _refuse_rows(conn, path, table, f"whose {column} is not JSON",
                     f'"{column}" IS NOT NULL AND NOT json_valid("{column}")')
        # only a cell with that many brackets can nest that deep: the rest is skipped
        deep = conn.execute(
            f'SELECT "{column}" FROM "{table}" WHERE length("{column}") - length('
            f'replace(replace("{column}", \'[\', \'\'), \'{{\', \'\')) > ?',
            (MAX_JSON_DEPTH,)).fetchall()
        bad = 0
        for (text,) in deep:
            try:
                loads(text)
            except TooDeep:
                bad += 1
            except ValueError:
                pass
        if bad:
            raise MergeError(f"{path}: {bad} {table} row(s) whose {column} nests deeper "
                             f"than {MAX_JSON_DEPTH} levels (robench never writes that); "
                             "refusing to merge it")


def _check_identities(conn, path) -> None:
    """Refuse a (migrated) source whose keys do not hash what their rows say they are."""
    for row in _rows(conn, "trials"):
        if (why := _trial_identity(row)) is not None:
            label = " ".join(str(row.get(c)) for c in ("dataset", "model", "protocol", "kind",
                                                       "repeat"))
            raise MergeError(f"{path}: trial {row['key'][:16]} ({label}){why}; refusing to "
                             "merge it")
    for row in _rows(conn, "scores"):
        expected = score_key(row["dataset"], row["model"], row["clusterer"], row["metric"],
                             row["score"], row.get("configuration"))
        if expected != row["key"]:
            label = " ".join(str(row.get(c)) for c in _LABEL if row.get(c) not in (None, ""))
            raise MergeError(f"{path}: score {row['key'][:16]} ({label}): its key is not the one "
                             "of its data set, model, clusterer, metric, score and "
                             "configuration; refusing to merge it")
    for row in _rows(conn, "score_groups"):
        expected = group_key(row["metric"], {"dataset": row["dataset"], "model": row["model"],
                                             "clusterer": row["clusterer"] or ""},
                             row.get("configuration"))
        if expected != row["key"]:
            raise MergeError(f"{path}: score group {row['key'][:16]} ({row['dataset']} "
                             f"{row['model']} {row['metric']}): its key is not the one of what "
                             "it names; refusing to merge it")


def _trial_identity(row: dict) -> Optional[str]:
    """Return how a trial row's key, columns and spec disagree or contradict, or None."""
    spec = _json(row.get("spec"))
    if not isinstance(spec, dict) or any(c not in spec for c in _SPEC_CORE):
        return " has no spec its key can be checked against"
    core = {c: spec[c] for c in _SPEC_CORE}
    stated = {c: _json(row.get(c)) if c in ("params", "versions") else row.get(c)
              for c in _SPEC_CORE}
    stated["clusterer"] = stated["clusterer"] or ""
    if trial_key(core) != row["key"] or stated != {**core, "clusterer": core["clusterer"] or ""}:
        return ": its key or columns do not match its spec (edited by hand?)"
    why = trial_inconsistency(row)
    return None if why is None else f" contradicts itself: {why} (edited by hand?)"


#: How far a stored fraction may lie from a whole number of rows (float rounding only).
_ROWS_SLACK = 1e-6


def trial_inconsistency(row: dict) -> Optional[str]:
    """Return how an ok trial row's accuracies, correct bits and class counts disagree, or None."""
    if row.get("status") != "ok":
        return None
    return _accuracy_problem(row) or _bits_problem(row) or _per_class_problem(row)


def _accuracy_problem(row: dict) -> Optional[str]:
    """Return an accuracy outside [0, 1], or a test accuracy that is no whole number of rows."""
    for column in ACCURACIES:
        value = row.get(column)
        if value is not None and not 0.0 <= float(value) <= 1.0:
            return f"{column} {value} is not between 0 and 1"
    acc, n_test = row.get("accuracy"), row.get("n_test")
    if acc is not None and n_test:
        hits = float(acc) * int(n_test)
        if abs(hits - round(hits)) > _ROWS_SLACK * max(1, int(n_test)):
            return (f"accuracy {acc} is not a whole number of its {n_test} test rows "
                    f"({hits:.4f} correct)")
    return None


def _bits_problem(row: dict) -> Optional[str]:
    """Return how a trial's correct bits contradict its whole-data-set accuracy, or None."""
    bits = row.get("correct")
    if not bits:
        return None
    try:
        raw = base64.b64decode(bits, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return "its correct bits are not base64"
    if not raw:
        return "its correct bits are empty"
    hits = sum(bin(b).count("1") for b in raw)
    whole = row.get("all_accuracy")
    # the bits are packed in bytes: the data set has 8(L-1)+1 .. 8L rows
    sizes = range(8 * (len(raw) - 1) + 1, 8 * len(raw) + 1)
    if whole is None or not any(abs(hits / size - float(whole)) <= 1e-9 for size in sizes):
        return (f"all_accuracy {whole} is not the share of correct rows its stored correct "
                f"bits give ({hits} of {sizes.start}-{sizes.stop - 1} rows)")
    return None


def _per_class_problem(row: dict) -> Optional[str]:
    """Return how a trial's accuracy contradicts its per-class accuracies and counts, or None."""
    acc, n_test = row.get("accuracy"), row.get("n_test")
    per_class = _json(row.get("per_class"))
    if acc is None or not isinstance(per_class, list):
        return None
    values = [float(v) for v in per_class if isinstance(v, (int, float))]
    if values and not min(values) - 1e-9 <= float(acc) <= max(values) + 1e-9:
        return (f"accuracy {acc} lies outside its own per-class accuracies "
                f"({min(values):.4f}-{max(values):.4f})")
    extra = _json(row.get("extra"))
    counts = extra.get("test_class_counts") if isinstance(extra, dict) else None
    if not (isinstance(counts, list) and len(counts) == len(per_class) and n_test):
        return None
    if any(not isinstance(c, int) or c < 0 for c in counts) or sum(counts) != n_test:
        return f"its test class counts do not add up to its {n_test} test rows"
    hits = 0.0
    for value, count in zip(per_class, counts):
        if (value is None) != (count == 0):
            return "its per-class accuracies and test class counts disagree"
        if value is not None:
            part = float(value) * count
            if abs(part - round(part)) > _ROWS_SLACK * max(1, count):
                return "a per-class accuracy is not a whole number of that class's test rows"
            hits += part
    if abs(hits - float(acc) * n_test) > _ROWS_SLACK * max(1, n_test):
        return (f"accuracy {acc} is not what its per-class accuracies and test class "
                f"counts give ({hits / n_test:.6f})")
    return None


def _json(value):
    """Return a JSON cell decoded (text that is not JSON as it is: :func:`decoded`)."""
    return decoded(value, value)


def copy_database(source: Path, target: Path, check=None) -> None:
    """Copy the database at ``source`` to ``target`` read-only, after ``check(connection)``."""
    with closing(connect_readonly(source)) as src:
        src.execute("PRAGMA trusted_schema = OFF")
        if check is not None:
            check(src)
        with closing(sqlite3.connect(target)) as dst:
            src.backup(dst)


def _snapshot(path: Path, into: Path) -> None:
    """Copy a checked source into ``into``, drop triggers and views, migrate, check its keys."""
    def check(src):
        try:
            _check_source(src, path)
        except sqlite3.DatabaseError as exc:
            raise MergeError(f"{path}: cannot be read as a robench database ({exc})") from None

    try:
        copy_database(path, into, check)
    except SchemaError as exc:
        raise MergeError(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise MergeError(f"{path} is not an SQLite database ({exc})") from None
    with closing(sqlite3.connect(into, isolation_level=None)) as conn:
        conn.execute("PRAGMA trusted_schema = OFF")
        for kind, name in conn.execute(
                "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
        ).fetchall():
            conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    try:
        migrate(into, SCHEMA)
    except (sqlite3.DatabaseError, SchemaError) as exc:
        raise MergeError(f"{path}: cannot be brought to schema {CURRENT}: "
                         f"{str(exc).replace(str(into), path.name)}") from None
    with closing(sqlite3.connect(into)) as conn:
        _check_identities(conn, path)


def _rows(conn, table: str) -> list[dict]:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (table,)).fetchone():
        return []
    return _dicts(conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid'))


def _dicts(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def insert_row(conn, table: str, row: dict, verb: str = "INSERT") -> None:
    names = list(row)
    conn.execute(f'{verb} INTO "{table}" ({", ".join(names)}) '
                 f'VALUES ({", ".join("?" * len(names))})', [row[n] for n in names])


def _fit_columns(conn, table: str, rows: list) -> None:
    """Add to an older target the declared columns ``rows`` hold values for and it lacks."""
    present = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
    for name, sqltype in COLUMNS[table].items():
        if name not in present and any(r.get(name) is not None for r in rows):
            conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {sqltype}')


def _stored_rows(conn, table: str, keys) -> dict:
    """Return {key: row} of the target's ``table`` rows among ``keys``."""
    return {row["key"]: row for chunk in key_chunks(keys) for row in _dicts(conn.execute(
        f'SELECT * FROM "{table}" WHERE key IN ({", ".join("?" * len(chunk))})', chunk))}


def merge_databases(sources: list, target, contributors: Optional[list] = None,
                    registry=None) -> MergeReport:
    """Merge ``sources`` into ``target`` (per source its ``contributors`` entry, else stem)."""
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
            sha = file_sha256(path)
            known = conn.execute("SELECT contributor FROM merged_sources WHERE sha256 = ? AND "
                                 "complete = 1", (sha,)).fetchone()
            if known:
                report.sources.append({"source": str(path), "contributor": contributor,
                                       "already": known[0], **dict.fromkeys(_COUNTS, 0)})
                continue
            with tempfile.TemporaryDirectory(prefix="robench-merge-") as tmp:
                copy = Path(tmp) / "source.db"
                _snapshot(path, copy)
                with closing(sqlite3.connect(copy)) as src:
                    src.execute("PRAGMA trusted_schema = OFF")
                    try:
                        with store._write():
                            counts = _merge_one(conn, src, path, contributor, sha, report, registry)
                    except sqlite3.DatabaseError as exc:
                        raise MergeError(f"{path}: cannot be merged ({exc}); nothing of it was "
                                         "copied") from None
            report.sources.append({"source": str(path), "contributor": contributor, **counts})

        refresh_ranks(store, _Recompute(conn, registry).registry)  # the leaderboard view's
    return report


@dataclass
class _Recompute:
    """Recompute a score group's scores from the target's trials with the local metric code."""

    conn: sqlite3.Connection
    given: object = None  # the registry passed in, else the process-wide one

    @property
    def registry(self):
        return self.given if self.given is not None else get_registry()

    def metric(self, name: str, version: str):
        """Return (metric spec, None) or (None, why it cannot be recomputed here)."""
        if name not in self.registry.names("metrics"):
            return None, "not installed here"
        spec = self.registry.get("metrics", name)
        if str(spec.version) != str(version):
            return None, f"installed here at version {spec.version}"
        return spec, None

    def scores(self, metric, group: dict) -> dict:
        """Return {score key: score row} the metric computes from the group's stored trials."""
        keys = _json(group.get("trial_keys")) or []
        rows = [decode_row("trials", r) for r in _stored_rows(self.conn, "trials", keys).values()]
        rows.sort(key=lambda r: (r["dataset"], r["model"], r["clusterer"] or "", r["protocol"],
                                 r["kind"], r["repeat"] if r["repeat"] is not None else -1,
                                 r["key"]))
        key_dict = {"dataset": group["dataset"], "model": group["model"],
                    "clusterer": group["clusterer"] or ""}
        definitions = {metric.name: (metric.version, metric.definition)}
        made = [score_row(replace(s, higher_is_better=metric.higher_is_better)
                          if s.score == metric.name else s, 0, definitions, "",
                          configuration=group.get("configuration"))
                for s in metric.aggregate(key_dict, rows)]
        return {row["key"]: row for row in made}


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    return abs(a - b) <= SCORE_TOLERANCE * max(1.0, abs(a), abs(b))


def _recomputed_differs(claimed: dict, computed: Optional[dict]) -> list[str]:
    """Return the columns in which a claimed score differs from its recomputation."""
    if computed is None:
        return ["value"]
    columns = ["value", "n"]
    if "adaptive" not in (_json(claimed.get("details")) or {}):
        # a sequential stop recomputes its intervals at its own level (robench.run.adaptive)
        columns += ["ci_low", "ci_high"]
    return [c for c in columns if not _close(claimed.get(c), computed.get(c))]


@dataclass
class _Source:
    """One source being merged into the target (inside its transaction), and its counts."""

    conn: sqlite3.Connection  # the target's
    src: sqlite3.Connection  # the migrated snapshot's
    path: Path
    contributor: str
    now: str
    report: MergeReport
    counts: dict = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))
    run_map: dict = field(default_factory=dict)  # source run id -> run id here

    def remap(self, row: dict) -> dict:
        if row.get("run_id") is not None:
            row["run_id"] = self.run_map.get(row["run_id"])
        return row


def _merge_one(conn, src, path: Path, contributor: str, sha: str, report: MergeReport,
               registry) -> dict:
    """Copy one migrated snapshot's rows into the target connection (inside a transaction)."""
    s = _Source(conn, src, path, contributor, utc_now(), report)
    _merge_runs(s, sha)
    for table in ("configurations", "metrics", "clusterings", "skips"):
        for row in _rows(src, table):
            insert_row(conn, table, s.remap(row), "INSERT OR IGNORE")
    incoming = _rows(src, "trials")
    _fit_columns(conn, "trials", incoming)
    stored = _stored_rows(conn, "trials", [r["key"] for r in incoming])
    for row in incoming:
        s.remap(row)
        if row.get("clustering") is not None and not conn.execute(
                "SELECT 1 FROM clusterings WHERE key = ?", (row["clustering"],)).fetchone():
            row["clustering"] = None
        s.counts[_merge_trial(s, stored.get(row["key"]), row)] += 1
    _merge_scores(s, {r["key"] for r in incoming}, _Recompute(conn, registry))
    _merge_verifications(s)
    complete = not (s.counts["scores_without_trials"] or s.counts["scores_unchecked"])
    conn.execute("INSERT OR REPLACE INTO merged_sources (sha256, source, contributor, merged_at, "
                 "complete) VALUES (?, ?, ?, ?, ?)",
                 (sha, path.name, contributor, s.now, int(complete)))
    return s.counts


def _merge_runs(s: _Source, sha: str) -> None:
    """Copy the source's runs not merged before with their contributions rows; fill run_map."""
    for run in _rows(s.src, "runs"):
        fingerprint = hashlib.sha256(json.dumps({k: v for k, v in run.items() if k not in _RUN_ID},
                                                sort_keys=True, default=str).encode()).hexdigest()
        known = s.conn.execute("SELECT run_id FROM contributions WHERE run_fingerprint = ?",
                               (fingerprint,)).fetchone()
        if known:
            s.run_map[run["id"]] = known[0]
            s.counts["runs_known"] += 1
            continue
        insert_row(s.conn, "runs", {k: v for k, v in run.items() if k != "id"})
        new_id = s.conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        s.run_map[run["id"]] = new_id
        # who contributed it is what the person merging says, never what the source claims
        insert_row(s.conn, "contributions", {
            "run_id": new_id, "contributor": s.contributor, "source": s.path.name,
            "source_sha256": sha, "source_run_id": run["id"], "run_fingerprint": fingerprint,
            "merged_at": s.now})
        s.counts["runs"] += 1


def _merge_trial(s: _Source, old: Optional[dict], row: dict) -> str:
    """Merge one incoming trial against the stored one of its key; return what it counts as."""
    if old is None:
        insert_row(s.conn, "trials", row)
        return "trials"
    diff = ([] if same_raw(old, row, TRIAL_RESULT)
            else differing(trial_content(old), trial_content(row)))
    if not diff:
        return "trials_duplicate"
    if old.get("status") == "failed" and row.get("status") == "ok":
        s.conn.execute("DELETE FROM trials WHERE key = ?", (row["key"],))
        insert_row(s.conn, "trials", row)
        return "trials_replaced_failed"
    if row.get("status") == "failed":
        return "trials_failed_skipped"  # a failure never replaces anything
    _conflict(s, "trial", old, row, diff)
    return "trials_conflict"


def _merge_scores(s: _Source, source_trials: set, recompute: _Recompute) -> None:
    """Copy the source's score groups and scores that rest on its trials and recompute here."""
    scores = {r["key"]: r for r in _rows(s.src, "scores")}
    groups = _rows(s.src, "score_groups")
    stored_groups = _stored_rows(s.conn, "score_groups", [g["key"] for g in groups])
    stored_scores = _stored_rows(s.conn, "scores", list(scores))
    placed = set()  # score keys some group of the source accounts for
    unchecked = {}
    for group in groups:
        s.remap(group)
        trial_keys = _json(group.get("trial_keys")) or []
        if trial_keys and set(trial_keys) <= source_trials:  # else: scores without trials
            _merge_group(s, group, len(trial_keys), scores, stored_groups.get(group["key"]),
                         stored_scores, placed, unchecked, recompute)
    for k in sorted(set(scores) - placed):  # in no group of the source that holds its trials
        row, stored = s.remap(dict(scores[k])), stored_scores.get(k)
        if stored is not None:  # its identity is stored: compared, whatever its trials
            _against_stored(s, "score", stored, row)
        else:
            s.counts["scores_without_trials"] += 1
    for (metric, version), (why, n) in sorted(unchecked.items()):
        s.report.unchecked.append({"source": str(s.path), "metric": metric, "version": version,
                                   "n": n, "why": why})


def _merge_group(s: _Source, group: dict, n_trials: int, scores: dict, old: Optional[dict],
                 stored_scores: dict, placed: set, unchecked: dict,
                 recompute: _Recompute) -> None:
    """Merge a score group whose trials came with it and its scores not ``placed`` before."""
    pairs = _json(group.get("scores")) or []
    mine = [p[0] for p in pairs if isinstance(p, list) and p and p[0] in scores]
    if old is not None:
        _against_stored(s, "score_group", old, group)
    fresh = [k for k in mine if k not in stored_scores and k not in placed]
    computed = {}
    if fresh:
        metric, why = recompute.metric(group["metric"], group.get("metric_version"))
        if metric is None:  # not installed here at its version: counted, not merged
            ident = (group["metric"], group.get("metric_version"))
            unchecked.setdefault(ident, [why, 0])[1] += len(fresh)
            s.counts["scores_unchecked"] += len(fresh)
            placed.update(fresh)
            return
        computed = recompute.scores(metric, group)
    rows = {k: s.remap(dict(scores[k])) for k in mine if k not in placed}
    placed.update(rows)
    accepted = all([_merge_score(s, stored_scores, row, computed.get(k), n_trials)
                    for k, row in rows.items()])
    if old is None and accepted:
        insert_row(s.conn, "score_groups", group)
        s.counts["score_groups"] += 1


def _merge_score(s: _Source, stored_scores: dict, row: dict, computed: Optional[dict],
                 n_trials: int) -> bool:
    """Merge one incoming score; return False where it conflicts with its recomputation."""
    stored = stored_scores.get(row["key"])
    if stored is not None:
        _against_stored(s, "score", stored, row)
        return True
    diff = _recomputed_differs(row, computed)
    if diff:
        _conflict(s, "score", computed or {}, row, diff,
                  kept=f"recomputed here from its {n_trials} trial(s)")
        s.counts["scores_conflict"] += 1
        return False
    insert_row(s.conn, "scores", row)
    stored_scores[row["key"]] = row
    s.counts["scores"] += 1
    return True


def _against_stored(s: _Source, kind: str, stored: dict, row: dict) -> None:
    """Count an incoming score or score group whose key is stored: duplicate or conflict."""
    content, table = (score_content, "scores") if kind == "score" else (group_content,
                                                                        "score_groups")
    diff = differing(content(stored), content(row))
    if diff:
        _conflict(s, kind, stored, row, diff)
    s.counts[f"{table}_{'conflict' if diff else 'duplicate'}"] += 1


def _merge_verifications(s: _Source) -> None:
    """Copy the source's verification records once each, ``recorded_in`` its contributor."""
    for row in _rows(s.src, "verifications"):
        row = {k: v for k, v in row.items() if k != "id"}
        row["recorded_in"] = f"{s.contributor} ({s.path.name})"
        before = s.conn.total_changes
        insert_row(s.conn, "verifications", row, "INSERT OR IGNORE")
        s.counts["verifications"] += s.conn.total_changes - before


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


def _conflict(s: _Source, kind, old, row, columns, kept: Optional[str] = None) -> None:
    """Record a conflicting row (once per kind, key and incoming content) and report it."""
    incoming = json.dumps(row, sort_keys=True, default=str)
    cursor = s.conn.execute(
        "INSERT OR IGNORE INTO conflicts (kind, key, columns, contributor, source, incoming, "
        "incoming_sha256, detected_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (kind, row["key"], json.dumps(columns), s.contributor, s.path.name, incoming,
         hashlib.sha256(incoming.encode()).hexdigest(), s.now))
    if not cursor.rowcount:  # recorded by an earlier merge: nothing new to report
        s.report.known_conflicts += 1
        return
    label = " ".join(str(row[c]) for c in _LABEL if row.get(c) not in (None, ""))
    s.report.conflicts.append({
        "kind": kind, "key": row["key"], "label": label, "source": str(s.path),
        "contributor": s.contributor, "columns": columns,
        "stored": {c: _short(old.get(c)) for c in columns},
        "incoming": {c: _short(row.get(c)) for c in columns},
        "kept": kept or _origin(s.conn, old.get("run_id")), "recomputed": kept is not None})
