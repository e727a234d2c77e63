"""``robench diff A B``: every score two results databases share, the change and a decision.

Scores are matched by what they are: data set, model, clusterer, metric and score name, in the
same configuration (what their trials were run with). For each pair the change ``B - A`` gets
a 95% interval:

- **paired by repeat** where both scores carry their per-repeat values (rho's exclusive and
  inclusive accuracies, a mean's per-repeat values), both are in the same configuration (so
  repeat r of each used the same partitions and seeds) and share at least 2 repeats: the
  delta-method interval of the difference of the two ratios of means over the common repeats
  (:func:`robench.stats.sequential.paired_difference`, the interval ``--until decided`` and
  the leaderboard's ranks use). Two estimates made on the same partitions move together:
  compared as independent, a rho halved in every repeat (0.79 -> 0.39, 2 repeats) was
  "within [-1.77, +0.98]"; paired, it is worse. A side whose per-repeat values do not give
  its stored value is not paired (said in the reason);
- otherwise **independent**: the stored intervals' half-widths combined,
  ``sqrt(h_A^2 + h_B^2)`` either side (a score stored without an interval contributes none;
  two without give a point: any change beyond rounding is then a change).

The decision: **better** / **worse** when the interval excludes 0, in the score's direction
(``higher_is_better``; a score without a direction is **changed**); **within noise** when it
includes 0 (the data cannot tell: not "unchanged"); **same** when the two values are equal;
**not comparable** when the two scores were computed in different configurations (the
differing knobs, seed, repeats and sources are named), by another version of the metric, from
trials of another version of a component (the data set, model, clusterer or protocol's own
version, or other data), or one of them has no value. ``compare_anyway`` compares those too,
independently, and keeps the reason beside the decision.

Plugin and robench versions themselves may differ (that is what comparing before and after an
upgrade is for); the components' own versions and the data may not.
"""

from __future__ import annotations

import json
import math
from typing import Optional
from robench.stats.sequential import paired_difference

#: Decisions, in the order a report lists them.
DECISIONS = ("worse", "better", "changed", "within noise", "same", "not comparable")
#: Level of the interval of a change.
LEVEL = 0.95
#: Relative change below which two values are the same number (rounding of stored floats).
_ROUNDING = 1e-9
_IDENTITY = ("dataset", "model", "clusterer", "metric", "score")


def _own(version) -> str:
    """Return a component's own version from 'plugin-version/component-version'."""
    return str(version or "").rpartition("/")[2]


def _components(versions: dict) -> dict:
    out = {}
    for name, value in (versions or {}).get("components", {}).items():
        out[name] = value if name.endswith("_content") else _own(value)
    return out


def _half_width(row: dict) -> Optional[float]:
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if lo is None or hi is None:
        return None
    return max(float(hi) - float(lo), 0.0) / 2.0


def repeat_samples(row: dict) -> dict:
    """Return a score's per-repeat values {repeat: (numerator, denominator)} ({} if unknown).

    Two shapes of a score's ``details`` are read: a ratio of means (``acc_exclusive`` and
    ``acc_inclusive`` lists with their ``repeats_exclusive`` / ``repeats_inclusive``: rho,
    eq. 3) and a mean (``per_repeat``, with ``repeats`` where stored; denominator 1).
    Positions stand for repeats only where no repeat list is stored.
    """
    details = row.get("details")
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return {}
    if not isinstance(details, dict):
        return {}
    xs, is_ = details.get("acc_exclusive"), details.get("acc_inclusive")
    if isinstance(xs, list) and isinstance(is_, list):
        rx = details.get("repeats_exclusive")
        ri = details.get("repeats_inclusive")
        rx = rx if isinstance(rx, list) and len(rx) == len(xs) else list(range(len(xs)))
        ri = ri if isinstance(ri, list) and len(ri) == len(is_) else list(range(len(is_)))
        x, i = dict(zip(rx, xs)), dict(zip(ri, is_))
        pairs = {r: (x[r], i[r]) for r in x if r in i}
    elif isinstance(details.get("per_repeat"), list):
        per = details["per_repeat"]
        reps = details.get("repeats")
        reps = reps if isinstance(reps, list) and len(reps) == len(per) else range(len(per))
        pairs = {r: (v, 1.0) for r, v in zip(reps, per)}
    else:
        return {}
    return {r: (float(a), float(b)) for r, (a, b) in pairs.items()
            if isinstance(a, (int, float)) and isinstance(b, (int, float))
            and math.isfinite(a) and math.isfinite(b)}


def _gives(samples: dict, value) -> bool:
    """Return whether per-repeat values give the stored value (ratio of their means)."""
    den = sum(d for _, d in samples.values())
    if not samples or not den:
        return False
    ratio = sum(n for n, _ in samples.values()) / den
    return abs(ratio - float(value)) <= 1e-6 * max(1.0, abs(float(value)))


def _paired(a: dict, b: dict) -> tuple:
    """Return ((low, high, n) of the paired interval of b - a, or None, why not paired)."""
    import numpy as np


    sa, sb = repeat_samples(a), repeat_samples(b)
    if not sa or not sb:
        return None, None
    common = sorted(set(sa) & set(sb), key=str)
    if len(common) < 2:
        return None, "fewer than 2 common repeats: not paired"
    for side, samples, row in (("A", sa, a), ("B", sb, b)):
        if not _gives(samples, row["value"]):
            return None, f"{side}'s per-repeat values do not give its stored value: not paired"
    xa, ia = (np.array([sa[r][k] for r in common]) for k in (0, 1))
    xb, ib = (np.array([sb[r][k] for r in common]) for k in (0, 1))
    out = paired_difference(xb, ib, xa, ia, LEVEL)
    low, high = float(out["low"]), float(out["high"])
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, "per-repeat differences without spread: not paired"
    return (low, high, int(out["n"])), None


def compare(a: dict, b: dict, *, anyway: bool = False, paired: bool = True) -> dict:
    """Return the comparison of two score rows with the same identity (see the module doc).

    Each row may carry ``versions`` (:meth:`robench.storage.store.Store.score_versions`).
    ``anyway`` compares rows that are not comparable (the reason is kept); ``paired`` allows
    pairing by repeat (only for rows of one configuration: shared partitions).
    """
    out = {c: a.get(c) for c in _IDENTITY}
    out.update(configuration=a.get("configuration"), a=a.get("value"), b=b.get("value"),
               change=None, low=None, high=None, reason=None, method=None)
    why = []
    if str(a.get("metric_version")) != str(b.get("metric_version")):
        why.append(f"metric version {a.get('metric_version')} vs {b.get('metric_version')}")
    ca, cb = _components(a.get("versions") or {}), _components(b.get("versions") or {})
    for name in sorted(set(ca) & set(cb)):
        if ca[name] != cb[name]:
            why.append(f"{name} {ca[name]} vs {cb[name]}")
    if a.get("value") is None or b.get("value") is None:
        out.update(decision="not comparable",
                   reason="no value in " + ("A" if a.get("value") is None else "B"))
        return out
    if why and not anyway:
        out.update(decision="not comparable", reason="; ".join(why))
        return out
    va, vb = float(a["value"]), float(b["value"])
    change = vb - va
    if abs(change) <= _ROUNDING * max(1.0, abs(va), abs(vb)):
        change = 0.0
    interval, note = _paired(a, b) if paired and not why else (None, None)
    if interval is not None:
        low, high, n = interval
        method = f"paired by repeat ({n} repeats)"
    else:
        widths = [w for w in (_half_width(a), _half_width(b)) if w is not None]
        half = math.sqrt(sum(w * w for w in widths)) if widths else 0.0
        low, high = change - half, change + half
        method = "independent intervals"
    out.update(change=change, low=low, high=high, method=method)
    if change == 0.0:
        decision = "same"
    elif low <= 0.0 <= high:
        decision = "within noise"
    else:
        up = low > 0
        hib = a.get("higher_is_better")
        decision = "changed" if hib is None else ("better" if up == bool(hib) else "worse")
    out["decision"] = decision
    notes = [w for w in why] + ([note] if note else [])
    if notes:
        out["reason"] = "; ".join(notes)
    return out


def _flat(value, prefix: str = "") -> dict:
    """Return a nested dict as {dotted path: leaf value}."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}


def configuration_differences(one: Optional[dict], other: Optional[dict]) -> list:
    """Return what differs between two configurations ('seed 0 vs 1', 'train.max_epochs 2
    vs 5', ...), each a ``configurations`` row (knobs and description decoded or JSON)."""
    if not one or not other:
        return []

    def decoded(row, key):
        value = row.get(key)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    out = []
    for key in ("profile", "seed", "repeats", "sources"):
        if one.get(key) != other.get(key):
            out.append(f"{key} {one.get(key)} vs {other.get(key)}")
    ka, kb = _flat(decoded(one, "knobs") or {}), _flat(decoded(other, "knobs") or {})
    for name in sorted(set(ka) | set(kb)):
        if ka.get(name) != kb.get(name):
            out.append(f"{name} {json.dumps(ka.get(name))} vs {json.dumps(kb.get(name))}")
    if not out:
        da, db = _flat(decoded(one, "description") or {}), _flat(decoded(other, "description") or {})
        for name in sorted(set(da) | set(db)):
            if da.get(name) != db.get(name):
                out.append(f"{name} {json.dumps(da.get(name))} vs {json.dumps(db.get(name))}")
    return out


def diff_scores(rows_a: list, rows_b: list, *, configs_a: Optional[dict] = None,
                configs_b: Optional[dict] = None, anyway: bool = False) -> list:
    """Return one comparison per score present in both lists (see the module docstring).

    ``configs_a`` / ``configs_b``: {configuration id: configurations row} of each side, to
    name what differs when a score is only in different configurations; ``anyway`` compares
    such scores too (independently: their partitions may differ).
    """
    def index(rows):
        out = {}
        for r in rows:
            ident = tuple(r.get(c) or "" for c in _IDENTITY)
            out.setdefault(ident, {})[r.get("configuration")] = r
        return out

    ia, ib = index(rows_a), index(rows_b)
    out = []
    for ident in sorted(set(ia) & set(ib)):
        common = sorted(set(ia[ident]) & set(ib[ident]), key=str)
        if not common:
            ka, kb = sorted(ia[ident], key=str), sorted(ib[ident], key=str)
            a, b = ia[ident][ka[-1]], ib[ident][kb[-1]]
            what = configuration_differences((configs_a or {}).get(ka[-1]),
                                             (configs_b or {}).get(kb[-1]))
            reason = ("configuration differs (A: " + ", ".join(map(str, ka)) + "; B: "
                      + ", ".join(map(str, kb)) + ")" + (": " + "; ".join(what) if what else ""))
            if anyway:
                row = compare(a, b, anyway=True, paired=False)
                row["reason"] = reason + ("; " + row["reason"] if row.get("reason") else "")
            else:
                row = {c: v for c, v in zip(_IDENTITY, ident)}
                row.update(configuration=None, a=a.get("value"), b=b.get("value"),
                           change=None, low=None, high=None, method=None,
                           decision="not comparable", reason=reason)
            out.append(row)
            continue
        for config in common:
            out.append(compare(ia[ident][config], ib[ident][config], anyway=anyway))
    return out


def counts(comparisons: list) -> dict:
    """Return {decision: how many} over ``comparisons``, every decision present."""
    out = dict.fromkeys(DECISIONS, 0)
    for c in comparisons:
        out[c["decision"]] += 1
    return out
