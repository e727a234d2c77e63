"""``robench diff A B``: every score two results databases share, the change and a decision.

Scores are matched by what they are: data set, model, clusterer, metric and score name, in the
same configuration (what their trials were run with). For each pair the change ``B - A`` gets
an interval: the stored intervals' half-widths combined as for a difference of independent
estimates, ``sqrt(h_A^2 + h_B^2)`` either side (a score stored without an interval contributes
none; two without give a point: any change beyond rounding is then a change). The decision:

- **better** / **worse**: the interval of the change excludes 0, in the score's direction
  (``higher_is_better``; a score without a direction is **changed**);
- **unchanged**: it includes 0;
- **not comparable**: the two scores were computed in different configurations, by another
  version of the metric, from trials of another version of a component (the data set, model,
  clusterer or protocol's own version, or other data), or one of them has no value.

Plugin and robench versions themselves may differ (that is what comparing before and after an
upgrade is for); the components' own versions and the data may not.
"""

from __future__ import annotations

import math
from typing import Optional

#: Decisions, in the order a report lists them.
DECISIONS = ("worse", "better", "changed", "unchanged", "not comparable")
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


def compare(a: dict, b: dict) -> dict:
    """Return the comparison of two score rows with the same identity and configuration.

    Each row may carry ``versions`` (:meth:`robench.storage.store.Store.score_versions`).
    """
    out = {c: a.get(c) for c in _IDENTITY}
    out.update(configuration=a.get("configuration"), a=a.get("value"), b=b.get("value"),
               change=None, low=None, high=None, reason=None)
    why = []
    if str(a.get("metric_version")) != str(b.get("metric_version")):
        why.append(f"metric version {a.get('metric_version')} vs {b.get('metric_version')}")
    ca, cb = _components(a.get("versions") or {}), _components(b.get("versions") or {})
    for name in sorted(set(ca) & set(cb)):
        if ca[name] != cb[name]:
            why.append(f"{name} {ca[name]} vs {cb[name]}")
    if a.get("value") is None or b.get("value") is None:
        why.append("no value in " + ("A" if a.get("value") is None else "B"))
    if why:
        out.update(decision="not comparable", reason="; ".join(why))
        return out
    va, vb = float(a["value"]), float(b["value"])
    change = vb - va
    widths = [w for w in (_half_width(a), _half_width(b)) if w is not None]
    half = math.sqrt(sum(w * w for w in widths)) if widths else 0.0
    if abs(change) <= _ROUNDING * max(1.0, abs(va), abs(vb)):
        change = 0.0
    low, high = change - half, change + half
    out.update(change=change, low=low, high=high)
    if low <= 0.0 <= high:
        decision = "unchanged"
    else:
        up = low > 0
        hib = a.get("higher_is_better")
        decision = "changed" if hib is None else ("better" if up == bool(hib) else "worse")
    out["decision"] = decision
    return out


def diff_scores(rows_a: list, rows_b: list) -> list:
    """Return one comparison per score present in both lists (see the module docstring)."""
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
            row = {c: v for c, v in zip(_IDENTITY, ident)}
            row.update(configuration=None, a=None, b=None, change=None, low=None, high=None,
                       decision="not comparable",
                       reason="configuration differs (A: "
                              + ", ".join(sorted(map(str, ia[ident]))) + "; B: "
                              + ", ".join(sorted(map(str, ib[ident]))) + ")")
            out.append(row)
            continue
        for config in common:
            out.append(compare(ia[ident][config], ib[ident][config]))
    return out


def counts(comparisons: list) -> dict:
    """Return {decision: how many} over ``comparisons``, every decision present."""
    out = dict.fromkeys(DECISIONS, 0)
    for c in comparisons:
        out[c["decision"]] += 1
    return out
