"""Verification records: what ``robench verify`` re-ran and found, and how a page says so.

One ``verifications`` row per verification (when, host, device, versions, the sampled trials
with their outcome and, for a mismatch, both values). ``robench merge`` copies a source's
records, marked with the contributor and file they were recorded in. :func:`status` turns
the records into what ``robench results`` and the site print for a model or a data set:
"verified k of n sampled trials on HOST, DATE" or "not verified".
"""

from __future__ import annotations

import hashlib
import json
from typing import Optional
from robench.storage.store import decode_row, encode_row

#: Who writes a leaderboard's own records: ``robench publish``'s merge step records its verify
#: step's verification of a contribution as ``"<PIPELINE>: publish verify of <file>"``.
PIPELINE = "the leaderboard's pipeline"


def own_record(record: dict) -> bool:
    """Whether a verification record is this database's own: ``recorded_in`` empty or the
    pipeline's (ending ``.db``; a merged one always ends ``)``, so it cannot be forged)."""
    where = record.get("recorded_in")
    return not where or (where.startswith(f"{PIPELINE}: publish verify of ")
                         and where.endswith(".db"))


def save_verification(store, result, *, seed: int, contributor: Optional[str],
                      environment: dict, plugin_versions: dict, finished_at: str) -> int:
    """Insert one verification (a :class:`robench.exchange.verify.Verification`); return its id."""
    trials = result.trials
    row = {
        "started_at": result.started_at, "finished_at": finished_at, "host": result.host,
        "device": result.device, "platform": environment.get("platform"),
        "robench_version": environment.get("robench_version"),
        "python": environment.get("python"), "torch_version": environment.get("torch_version"),
        "plugin_versions": plugin_versions, "seed": int(seed), "contributor": contributor,
        "n_sampled": len(trials), "n_matched": result.count("match"),
        "n_mismatched": result.count("mismatch"), "n_refused": result.count("refused"),
        "trials": trials,
    }
    row["fingerprint"] = hashlib.sha256(
        json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()
    row = encode_row("verifications", row)
    with store._write():
        store._fit_to_file("verifications", [row])
        cursor = store.db.conn.execute(
            f'INSERT INTO verifications ({", ".join(row)}) VALUES ({", ".join("?" * len(row))})',
            list(row.values()))
    return int(cursor.lastrowid)


def verifications(store) -> list:
    """Return every verification record, oldest first, JSON decoded ([] before the table)."""
    if not store.db["verifications"].exists():
        return []
    rows = store._select("SELECT * FROM verifications ORDER BY finished_at, id", [])
    return [decode_row("verifications", r) for r in rows]


def status(records: list, *, dataset: Optional[str] = None, model: Optional[str] = None) -> dict:
    """Return the newest verification (own records first) that re-ran trials of ``model``
    and/or ``dataset``, or ``{"text": "not verified"}``."""
    ordered = ([r for r in reversed(records) if own_record(r)]
               + [r for r in reversed(records) if not own_record(r)])
    for record in ordered:
        mine = _rerun(record, dataset, model)
        if not mine:
            continue
        k = sum(t["outcome"] == "match" for t in mine)
        date = str(record.get("finished_at") or "")[:10]
        where = record.get("recorded_in")
        text = f"verified {k} of {len(mine)} sampled trials on {record.get('host')}, {date}"
        if where:
            text += (f" (recorded in {where})" if own_record(record)
                     else f" (as reported by {where}, not re-run here)")
        every = _rerun(record)
        return {"verified": k, "sampled": len(mine), "mismatched": len(mine) - k,
                "record_verified": sum(t["outcome"] == "match" for t in every),
                "record_sampled": len(every), "host": record.get("host"), "date": date,
                "recorded_in": where, "text": text}
    return {"text": "not verified"}


def _rerun(record: dict, dataset: Optional[str] = None, model: Optional[str] = None) -> list:
    """Return the trials of ``record`` re-run with an outcome, of ``dataset`` / ``model``."""
    return [t for t in (record.get("trials") or []) if isinstance(t, dict)
            and (dataset is None or t.get("dataset") == dataset)
            and (model is None or t.get("model") == model)
            and t.get("outcome") in ("match", "mismatch")]

