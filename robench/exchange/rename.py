"""Rename the file data sets an older robench stored by absolute path (``npz:/home/a/x.npz``)
to their stable names (``npz:x-1a2b3c4d``), every key recomputed (``robench migrate``)."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing

from robench.data import DatasetError
from robench.data.references import parse_reference, stable_name
from robench.run.scoring import group_key, score_key
from robench.run.trials import trial_key
from robench.storage.cells import decoded

#: A stored data set name that is a path reference: ``SCHEME:/absolute/path``.
_PATH_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*:/")


def _text(value) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False, default=str)


def new_names(conn) -> tuple[dict, list]:
    """Return ({path name: stable name}, [path names left as they are, with why])."""
    contents: dict = {}
    for name, versions in conn.execute("SELECT DISTINCT dataset, versions FROM trials"):
        if isinstance(name, str) and _PATH_NAME.match(name):
            found = (decoded(versions) or {}).get("dataset_content")
            contents.setdefault(name, set()).add(found if isinstance(found, str) else None)
    names, kept = {}, []
    for name, found in sorted(contents.items()):
        if len(found) != 1 or None in found:
            kept.append(f"{name}: its trials recorded {len(found - {None})} contents")
            continue
        scheme, target, options = parse_reference(name)
        try:
            names[name] = stable_name(scheme, target, options.get("name"), found.pop())
        except DatasetError as exc:
            kept.append(f"{name}: {exc}")
    return names, kept


def _rekey(conn, table: str, old: str, new: str, columns: dict) -> None:
    """Re-key row ``old`` of ``table`` as ``new`` with ``columns``, or drop it if ``new`` exists."""
    if old == new or not conn.execute(f"SELECT 1 FROM {table} WHERE key = ?", (new,)).fetchone():
        sets = ", ".join(f'"{c}" = ?' for c in ("key", *columns))
        conn.execute(f"UPDATE {table} SET {sets} WHERE key = ?", (new, *columns.values(), old))
    else:
        conn.execute(f"DELETE FROM {table} WHERE key = ?", (old,))


def rename_file_datasets(path) -> tuple[dict, list]:
    """Rename the path-named file data sets at ``path`` in one transaction (dropping their
    ranks); return ({old name: new name}, [names kept, with why])."""
    with closing(sqlite3.connect(str(path), isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            names, kept = new_names(conn)
            if names:
                _rename(conn, names)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return names, kept


def _rename(conn, names: dict) -> None:
    where = f"WHERE dataset IN ({', '.join('?' * len(names))})"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    trials = _rename_trials(conn, names, where)
    scores = {}  # old key -> new key
    for key, *ident in conn.execute("SELECT key, dataset, model, clusterer, metric, score, "
                                    f"configuration FROM scores {where}", list(names)).fetchall():
        ident[0] = names[ident[0]]
        scores[key] = score_key(*ident)
        _rekey(conn, "scores", key, scores[key], {"dataset": ident[0]})
    for key, dataset, model, clusterer, metric, configuration, keys, made in conn.execute(
            "SELECT key, dataset, model, clusterer, metric, configuration, trial_keys, scores "
            f"FROM score_groups {where}", list(names)).fetchall():
        new = group_key(metric, {"dataset": names[dataset], "model": model,
                                 "clusterer": clusterer or ""}, configuration)
        _rekey(conn, "score_groups", key, new, {
            "dataset": names[dataset],
            "trial_keys": _text(sorted(trials.get(k, k) for k in decoded(keys) or [])),
            "scores": _text([[scores.get(p[0], p[0]), *p[1:]] for p in decoded(made) or []])})
    if "ranks" in tables:
        conn.execute(f"DELETE FROM ranks {where}", list(names))
    if "skips" in tables:
        for old, new in names.items():
            conn.execute("UPDATE OR REPLACE skips SET dataset = ? WHERE dataset = ?", (new, old))
    if "verifications" in tables:
        _rename_verified(conn, names, trials)


def _rename_trials(conn, names: dict, where: str) -> dict:
    """Rename the trials and re-key them as a run keys them; return {old key: new key}."""
    trials = {}
    for key, spec in conn.execute(f"SELECT key, spec FROM trials {where}",
                                  list(names)).fetchall():
        spec = decoded(spec)
        if not isinstance(spec, dict):
            continue
        spec["dataset"] = names[spec["dataset"]]
        spec.pop("key", None)
        spec["key"] = trials[key] = trial_key(spec)
        _rekey(conn, "trials", key, spec["key"], {"dataset": spec["dataset"], "spec": _text(spec)})
    return trials


def _rename_verified(conn, names: dict, trials: dict) -> None:
    """Rename the data sets and trial keys the verification records list."""
    for rid, checked in conn.execute("SELECT id, trials FROM verifications").fetchall():
        checked = decoded(checked)
        found = [t for t in checked if isinstance(t, dict) and t.get("dataset") in names] \
            if isinstance(checked, list) else []
        for t in found:
            t["dataset"], t["key"] = names[t["dataset"]], trials.get(t.get("key"), t.get("key"))
        if found:
            conn.execute("UPDATE verifications SET trials = ? WHERE id = ?", (_text(checked), rid))
