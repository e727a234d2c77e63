"""What a family's metric modules share: trial triage, the score index and helper models.

The table of docs/plugin-hooks.md ("The family kit") says what each function returns. Pure
functions over rows as the store returns them (dicts, JSON columns decoded); they import
nothing of robench.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, Union

#: A level of :func:`score_index`: a field's name, or a tuple of names (a tuple key).
Level = Union[str, Sequence[str]]


def error_line(trial: dict) -> Optional[str]:
    """Return the first line of a trial row's error, or None when it records none."""
    error = trial.get("error")
    return error.splitlines()[0] if error else None


def failure(trial: dict) -> Optional[str]:
    """Return why a trial did not finish (its error's first line, else ``"failed"``), or None
    for a trial whose status is ``ok``."""
    if trial.get("status") == "ok":
        return None
    line = error_line(trial)
    return "failed" if line is None else line


def not_applicable(trial: dict) -> Optional[str]:
    """Return why a finished trial had nothing to measure (its ``not_applicable`` column, else
    ``extra["not_applicable"]`` where ``extra`` is a dict: decode it first), or None."""
    extra = trial.get("extra")
    return trial.get("not_applicable") or (
        extra.get("not_applicable") if isinstance(extra, dict) else None)


def by_repeat(trials: Iterable[dict], protocol: Optional[str] = None) -> dict:
    """Return {repeat: trial row} of ``trials`` (of ``protocol`` only, if given), ordered by
    repeat; of two rows of one repeat the later one in ``trials`` is kept."""
    out: dict = {}
    for t in trials:
        if protocol is None or t.get("protocol") == protocol:
            out[int(t.get("repeat") or 0)] = t
    return {r: out[r] for r in sorted(out)}


def _key(row: dict, level: Level):
    if isinstance(level, str):
        return row.get(level)
    return tuple(row.get(name) for name in level)


def score_index(rows: Iterable[dict], metric: Optional[str] = None,
                by: Sequence[Level] = ("dataset", "model")) -> dict:
    """Return the score rows of ``metric`` (every metric's if None) nested by ``by``, then by
    score name (``{dataset: {model: {score: row}}}`` by default); a level that is a tuple of
    field names makes a tuple key. Of two rows with the same keys the later one is kept."""
    out: dict = {}
    for r in rows:
        if metric is not None and r.get("metric") != metric:
            continue
        node = out
        for level in by:
            node = node.setdefault(_key(r, level), {})
        node[r["score"]] = r
    return out


def is_helper(row: dict, helpers) -> bool:
    """Return whether a score row's (dataset, model) is a helper model (``helpers``: what
    :meth:`robench.storage.store.Store.helper_models` returns, or any set of such pairs)."""
    return (row.get("dataset"), row.get("model")) in helpers


def without_helpers(rows: Iterable[dict], helpers) -> list:
    """Return the rows that are not a helper model's: what every ranked view ranks."""
    return [r for r in rows if not is_helper(r, helpers)]
