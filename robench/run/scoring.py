"""Scores from stored trials: their keys and digests, and reuse when nothing they read changed.

A score group is one metric on one (dataset, model, clusterer) (docs/database.md,
``score_groups``). Keys, digests and fingerprints must match what older versions stored
(``tests/test_keys_stable.py``): changing how one is computed makes every stored score stale.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, Optional

from robench import __version__
from robench.data.cache import content_key
from robench.run.configurations import LEGACY
from robench.storage.migrations import metric_id
from robench.process.provenance import utc_now
from robench.specs import Score
from robench.storage.store import decode_row, encode_row

if TYPE_CHECKING:  # pragma: no cover
    from robench.storage.store import Store

#: Columns of a score row that carry its content (what a reused score must still match).
_SCORE_CONTENT = ("key", "metric_version", "value", "ci_low", "ci_high", "n",
                  "higher_is_better", "metric_id", "details")


def score_key(dataset: str, model: str, clusterer: str, metric: str, score: str,
              configuration: Optional[str] = None) -> str:
    """Return the primary key of one score row: sha256 of the JSON of what identifies it
    (without ``configuration``, or ``legacy``: the key from before configurations)."""
    identity = [dataset, model, clusterer or "", metric, score]
    if configuration is not None and configuration != LEGACY:
        identity.append(configuration)
    return hashlib.sha256(json.dumps(identity).encode("utf-8")).hexdigest()


def score_row(score: Score, run_id: int, definitions: dict, computed_at: str,
              inputs: Optional[str] = None, configuration: Optional[str] = None) -> dict:
    """Return the scores-table row of ``score``, encoded for SQLite; ``definitions`` maps a
    metric name to ``(version, definition text)``, ``configuration`` None means ``legacy``."""
    s = score
    if s.metric not in definitions:
        raise ValueError(f"no definition given for metric {s.metric!r}; every score row must "
                         "say which definition produced it")
    version, definition = definitions[s.metric]
    return encode_row("scores", {
        "key": score_key(s.dataset, s.model, s.clusterer, s.metric, s.score, configuration),
        "run_id": run_id, "dataset": s.dataset, "model": s.model,
        "clusterer": s.clusterer or "", "metric": s.metric, "metric_version": str(version),
        "score": s.score, "value": s.value, "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n,
        "higher_is_better": int(bool(s.higher_is_better)),
        "metric_id": metric_id(s.metric, version, definition), "details": dict(s.details or {}),
        "computed_at": computed_at, "inputs": inputs, "configuration": configuration or LEGACY,
    })


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


def metric_rows(definitions: dict, score_rows: list[dict], run_id: int, now: str) -> list[dict]:
    """Return the ``metrics`` rows the score rows point to (one per name and version)."""
    used = {row["metric_id"] for row in score_rows}
    return [{"id": mid, "name": name, "version": str(version), "definition": definition,
             "run_id": run_id, "created_at": now}
            for name, (version, definition) in definitions.items()
            if (mid := metric_id(name, version, definition)) in used]


def score_groups(groups: Iterable, store: "Store", run_id: int, *,
                 versions: Optional[dict] = None, rescore: bool = False) -> tuple:
    """Reuse or compute every group's scores, store what was computed in one transaction and
    return ``(scores, n_aggregated, n_reused)``, the scores in group order.

    ``groups`` are like the runner's ``Group``; ``versions`` maps a metric name to its registry
    version. A group whose inputs and stored score rows are unchanged reports its stored scores
    unless ``rescore``; a group none of whose trials is stored gives no score.
    """
    groups = list(groups)
    versions = versions or {}
    now = utc_now()
    digests = store.trial_digests({k for g in groups for k in g.keys})
    records = {} if rescore else store.score_groups(_group_key(g) for g in groups)
    stored = store.score_rows({k for r in records.values() for k, _ in r.get("scores") or []})
    definitions = {g.metric.name: (g.metric.version, g.metric.definition) for g in groups}
    written = {}  # score key -> (digest, Score) this run writes
    all_scores, score_rows, group_rows = [], [], []
    n_aggregated = n_reused = 0
    # each stored row digested and decoded once
    stored_digest = functools.cache(lambda k: score_digest(stored[k]) if k in stored else None)
    stored_score = functools.cache(lambda k: _stored_score(stored[k]))

    def current(k):  # the digest of score k as it will be once this run's writes are done
        return written[k][0] if k in written else stored_digest(k)

    def reused(k):
        return written[k][1] if k in written else stored_score(k)

    for group in groups:
        metric = group.metric
        gkey = _group_key(group)
        inputs = _inputs_fingerprint(group, digests, versions.get(metric.name, ""))
        record = records.get(gkey)
        if record is not None and record.get("inputs") == inputs:
            pairs = record.get("scores") or []
            if all(current(k) == d for k, d in pairs):
                all_scores.extend(reused(k) for k, _ in pairs)
                n_reused += 1
                continue
        rows = store.trials(keys=group.keys)
        if group.keys and not rows:
            # none of its trials ran (a --budget spent before they started): the metric did
            # not run for this group, and a score row saying "no trial" for every model
            # would read as if it had (issue 51); its next run that has trials scores it
            continue
        scores = [_with_direction(s, metric) for s in metric.aggregate(group.key_dict, rows)]
        if (finish := getattr(group, "finish", None)) is not None:
            scores = list(finish(scores))
        config = getattr(group, "configuration", None)
        new = [(s, score_row(s, run_id, definitions, now, inputs, config)) for s in scores]
        # A group none of whose trials succeeded has measured nothing: it never replaces a
        # score stored from trials that did (issue 16: a bad run must not erase good results).
        keep = (set() if any(r.get("status") == "ok" for r in rows)
                else set(store.score_rows(row["key"] for _, row in new)))
        if keep:
            stored.update(store.score_rows(keep))
        pairs = []
        for s, row in new:
            if row["key"] in keep:
                all_scores.append(reused(row["key"]))
                continue
            digest = score_digest(row)
            written[row["key"]] = (digest, s)
            score_rows.append(row)
            pairs.append([row["key"], digest])
            all_scores.append(s)
        if keep:  # its stored record still says what the kept scores came from
            n_reused += 1
            continue
        group_rows.append({"key": gkey, "run_id": run_id, **group.key_dict, "metric": metric.name,
                           "metric_version": str(metric.version), "inputs": inputs,
                           "trial_keys": sorted(set(group.keys)), "scores": pairs,
                           "computed_at": now, "configuration": config or LEGACY})
        n_aggregated += 1
    store.save_score_groups(score_rows, group_rows,
                            metrics=metric_rows(definitions, score_rows, run_id, now))
    return all_scores, n_aggregated, n_reused


def _group_key(group) -> str:
    """Return the key of a group's score-group record: metric, combination, configuration."""
    return group_key(group.metric.name, group.key_dict, getattr(group, "configuration", None))


def group_key(metric: str, key_dict: dict, configuration: Optional[str] = None) -> str:
    """Return the key of the score-group record of ``metric`` on one combination."""
    legacy = configuration is None or configuration == LEGACY
    return content_key("score-group", metric, key_dict, *([] if legacy else [configuration]))


def _inputs_fingerprint(group, digests: dict, component_version: str) -> str:
    """Return a hash of what a group's aggregate reads: its trials, the metric's identity."""
    metric = group.metric
    definition = hashlib.sha256(metric.definition.encode("utf-8")).hexdigest()
    payload = {"metric": [metric.name, str(metric.version), metric.moved_from or metric.plugin,
                          component_version, definition],
               "robench": __version__, "group": group.key_dict,
               "trials": sorted((k, digests.get(k)) for k in set(group.keys))}
    options = getattr(group, "options", None)
    if options:  # absent for a plain run: its fingerprints stay what they were
        payload["options"] = options
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _stored_score(row: dict) -> Score:
    """Return the Score a stored score row holds (JSON decoded)."""
    row = decode_row("scores", dict(row))
    fields = ("dataset", "model", "clusterer", "metric", "score", "value", "ci_low", "ci_high",
              "n", "higher_is_better")
    details = row.get("details")
    return Score(**{f: row[f] for f in fields},
                 details=details if isinstance(details, dict) else {})


def _with_direction(score: Score, metric) -> Score:
    """Return ``score`` with the metric's ranking direction if it is the headline score."""
    return (replace(score, higher_is_better=metric.higher_is_better)
            if score.score == metric.name else score)
