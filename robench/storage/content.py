"""What defines a stored result, apart from when, where and by which worker it was computed.

Two honest runs of one trial (same key: same spec, seed and versions) store the same accuracies
and predictions but another run time, finish time, worker, host and cache hits. ``robench
merge`` compares rows by :func:`trial_content` and :func:`score_content`, so such duplicates
are duplicates; ``robench verify`` compares a re-run with the stored trial the same way.
"""

from __future__ import annotations

from typing import Any

from robench.storage import cells

#: Trial columns that hold what a trial found or what defines it (its key hashes the spec).
TRIAL_RESULT = ("dataset", "model", "clusterer", "protocol", "kind", "repeat", "seed",
                "status", "accuracy", "train_accuracy", "val_accuracy", "all_accuracy",
                "last_val_accuracy", "last_test_accuracy", "n_train", "n_val", "n_test",
                "epochs", "best_epoch", "per_class", "correct", "history", "details", "extra",
                "not_applicable", "params", "versions")
#: Trial columns holding accuracies (compared within a tolerance when devices differ).
ACCURACIES = ("accuracy", "train_accuracy", "val_accuracy", "all_accuracy",
              "last_val_accuracy", "last_test_accuracy")
#: Score columns that hold what a score is (its key hashes its identity).
SCORE_RESULT = ("dataset", "model", "clusterer", "metric", "score", "configuration",
                "metric_version", "value", "ci_low", "ci_high", "n", "higher_is_better",
                "details")
#: Score-group columns that say what a group was computed from (not its inputs fingerprint,
#: which digests whole trial rows, run times included).
GROUP_RESULT = ("dataset", "model", "clusterer", "metric", "metric_version", "configuration",
                "trial_keys")
#: Keys inside JSON columns that record time, place or caching, never a result.
_VOLATILE = frozenset(("timings", "seconds", "cache_hit", "worker", "host", "finished_at",
                       "started_at", "computed_at"))
_JSON_COLUMNS = ("per_class", "history", "details", "extra", "params", "versions", "trial_keys",
                 "scores", "spec")


def _volatile(name: str) -> bool:
    return name in _VOLATILE or name.endswith(("_seconds", "_cache_hit"))


def _number(value: Any) -> Any:
    # SQLite's column affinity turns 1 into 1.0 in a REAL column: compare numbers as numbers
    if isinstance(value, (int, float)):  # a bool too: 0 or 1
        value = float(value)
        return int(value) if value.is_integer() else value
    return value


def plain(value: Any) -> Any:
    """Return ``value`` (decoded JSON) with volatile keys removed and numbers normalised."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items()) if not _volatile(str(k))}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return _number(value)


def _decoded(name: str, value: Any) -> Any:
    if name in _JSON_COLUMNS and isinstance(value, str):
        return cells.decoded(value, otherwise=value)  # a damaged cell is hashed as its text
    return value


def content(row: dict, columns) -> dict:
    """Return the ``columns`` of ``row`` that define its result, comparable across runs."""
    return {c: plain(_decoded(c, row.get(c))) for c in columns}


def trial_content(row: dict) -> dict:
    """Return what defines a trial row's result (see :data:`TRIAL_RESULT`)."""
    return content(row, TRIAL_RESULT)


def score_content(row: dict) -> dict:
    """Return what defines a score row (see :data:`SCORE_RESULT`)."""
    out = content(row, SCORE_RESULT)
    out["clusterer"] = out["clusterer"] or ""
    return out


def group_content(row: dict) -> dict:
    """Return what a score-group record says its scores came from, and which scores."""
    out = content(row, GROUP_RESULT)
    out["clusterer"] = out["clusterer"] or ""
    pairs = plain(_decoded("scores", row.get("scores"))) or []
    out["scores"] = sorted(p[0] for p in pairs if isinstance(p, list) and p)
    return out


def same_raw(old: dict, new: dict, columns) -> bool:
    """Return whether two rows as stored hold the same values in ``columns`` (a fast check
    before decoding: rows written by the same code are usually byte-identical there)."""
    return all(_number(old.get(c)) == _number(new.get(c)) for c in columns)


def differing(old: dict, new: dict) -> list[str]:
    """Return the names whose values differ between two content dicts."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any]:
    """Return (JSON path, old value, new value) of the first place two content values differ:
    dict keys (in sorted order) and list indices joined with ``/`` (``history/3/val_accuracy``);
    both values whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            if key not in old or key not in new:
                return f"{path}/{key}".lstrip("/"), old.get(key), new.get(key)
            if old[key] != new[key]:
                return first_difference(old[key], new[key], f"{path}/{key}")
    elif (isinstance(old, list) and isinstance(new, list) and len(old) == len(new)):
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                return first_difference(a, b, f"{path}/{i}")
    return path.lstrip("/"), old, new
