"""``robench diff A B`` on two files: read both, compare (:mod:`robench.stats.diff`), lay out
as text (no line over :data:`WIDTH`, names escaped and shortened), JSON or Markdown."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field
from typing import Optional

from robench.escaping import json_text, markdown_cell, markdown_text, shorten, terminal
from robench.stats.diff import DECISIONS, MEANING, counts, diff_scores
from robench.storage.cells import decoded
from robench.storage.store import Store, key_chunks

#: Most columns a line of text output takes.
WIDTH = 120
#: Characters of a stored name (data set, model, ...) shown on a line.
NAME = 40
#: Characters of a reason (configuration differences quote knob values) shown.
REASON = 400


@dataclass
class Diff:
    """What ``robench diff`` found: the two files, one comparison per shared score, counts."""

    a: str
    b: str
    scores: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    @property
    def worse(self) -> int:
        return self.counts.get("worse", 0)


def score_trials(store: Store) -> dict:
    """Return {(data set, model, clusterer, metric, configuration): {trial key: repeat}}."""
    db = store.db
    if not db["score_groups"].exists() or "trial_keys" not in db["score_groups"].columns_dict:
        return {}
    config = "configuration" if "configuration" in db["score_groups"].columns_dict else "NULL"
    groups = {}
    for *ident, cell in db.execute(f"SELECT dataset, model, clusterer, metric, {config}, "
                                   "trial_keys FROM score_groups").fetchall():
        keys = decoded(cell, []) if isinstance(cell, str) else []  # [] where it is no JSON
        if isinstance(keys, list):
            groups[(*(v or "" for v in ident[:4]), ident[4] or "legacy")] = [
                k for k in keys if isinstance(k, str)]
    repeat = {}
    for chunk in key_chunks(sorted({k for keys in groups.values() for k in keys})):
        repeat.update(db.execute(f"SELECT key, repeat FROM trials WHERE key IN "
                                 f"({', '.join('?' * len(chunk))})", chunk).fetchall())
    return {ident: {k: repeat[k] for k in keys if k in repeat} for ident, keys in groups.items()}


def versioned_scores(store: Store, metric: Optional[str] = None) -> list:
    """Return ``store``'s score rows (of ``metric``), each with the ``versions`` behind it."""
    rows = store.scores(metric=metric)
    for row, versions in zip(rows, store.score_versions(rows)):
        row["versions"] = versions
    return rows


def _read(path, metric):
    if not os.path.exists(path):
        raise FileNotFoundError(f"no results database at {path}")
    with Store(path, readonly=True) as store:
        return versioned_scores(store, metric), store.configurations(), score_trials(store)


def diff_databases(path_a, path_b, *, metric=None, models=None, anyway=False) -> Diff:
    """Return the comparison of every score two results databases share (both only read).

    ``models`` (MODEL_A, MODEL_B): MODEL_A's scores in A against MODEL_B's in B (A and B may
    be one file); ``anyway``: other configurations or component versions too. ValueError for
    a metric or model neither file has.
    """
    (rows_a, configs_a, trials_a), (rows_b, configs_b, trials_b) = (
        _read(path, metric) for path in (path_a, path_b))
    if metric is not None and not (rows_a or rows_b):
        raise ValueError(f"neither database has a score of metric '{metric}' (--metric)")
    if models:
        for path, name, found in zip((path_a, path_b), models, (rows_a, rows_b)):
            if not any(r["model"] == name for r in found):
                raise ValueError(f"{path} has no score of model '{name}' (--models)")
        label = f"{models[0]} -> {models[1]}"
        rows_a, rows_b = ([dict(r, model=label) for r in found if r["model"] == name]
                          for name, found in zip(models, (rows_a, rows_b)))
        trials_a, trials_b = ({(i[0], label, *i[2:]): t for i, t in trials.items()
                               if i[1] == name}
                              for name, trials in zip(models, (trials_a, trials_b)))
    scores = diff_scores(rows_a, rows_b, configs_a=configs_a, configs_b=configs_b,
                         anyway=anyway, trials_a=trials_a, trials_b=trials_b)
    return Diff(str(path_a), str(path_b), scores, counts(scores))


def summary(diff: Diff) -> str:
    """Return the counts line: every decision that occurred, and 'worse' always."""
    shown = [f"{n} {d}" for d, n in diff.counts.items() if n or d == "worse"]
    return f"{len(diff.scores)} score(s) in both: " + ", ".join(shown)


def number_text(value) -> str:
    return "" if value is None else f"{value:.4g}"


def change_text(c) -> str:
    """Return a comparison's change and its interval, or "" where it has none."""
    return "" if c["change"] is None else f"{c['change']:+.4g} [{c['low']:+.4g}, {c['high']:+.4g}]"


def _notes(c) -> str:
    notes = [n for n in (c.get("method"), c.get("reason")) if n]
    return shorten("; ".join(notes), REASON) if notes else ""


def _name(c) -> str:
    return " ".join(shorten(c[k], NAME) for k in ("dataset", "model", "clusterer", "metric",
                                                  "score") if c.get(k))


def text_lines(diff: Diff, width: int = WIDTH) -> list:
    """Return the text report: an entry per score, the counts, what each decision means."""
    wrap = textwrap.TextWrapper(width=width, subsequent_indent="    ", break_on_hyphens=False)
    out = []
    for c in diff.scores:
        head = (f"{_name(c)}: {number_text(c['a'])} -> {number_text(c['b'])} {change_text(c)} "
                f"{c['decision']}")
        notes = _notes(c)
        out += wrap.wrap(terminal(" ".join(head.split()) + (f" ({notes})" if notes else "")))
    out += wrap.wrap(terminal(summary(diff)))
    out += wrap.wrap(terminal(f"A: {shorten(diff.a)}; B: {shorten(diff.b)}"))
    for decision in DECISIONS:
        if diff.counts.get(decision):
            out += wrap.wrap(f"  {decision}: {MEANING[decision]}")
    return out


def markdown_lines(diff: Diff) -> list:
    """Return the Markdown report (a table; every stored name a code span, prose escaped)."""
    out = ["| data set | model | clusterer | metric | score | A | B | change [interval] "
           "| decision |", "|---|---|---|---|---|---|---|---|---|"]
    for c in diff.scores:
        names = [markdown_cell(shorten(c[k], NAME)) for k in ("dataset", "model", "clusterer",
                                                                "metric", "score")]
        notes = _notes(c)
        decision = c["decision"] + (f" ({notes})" if notes else "")
        out.append("| " + " | ".join(names + [markdown_text(v) for v in (
            number_text(c["a"]), number_text(c["b"]), change_text(c), decision)]) + " |")
    out += ["", f"{markdown_text(summary(diff))} (A: {markdown_cell(shorten(diff.a))}, B: "
                f"{markdown_cell(shorten(diff.b))})"]
    out += [f"- {decision}: {markdown_text(MEANING[decision])}" for decision in DECISIONS
            if diff.counts.get(decision)]
    return out


def json_document(diff: Diff) -> str:
    """Return the JSON report: both files, the counts, every comparison."""
    return json_text({"a": diff.a, "b": diff.b, "counts": diff.counts,
                      "decisions": MEANING, "scores": diff.scores}, indent=2)
