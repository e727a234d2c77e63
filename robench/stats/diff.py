"""``robench diff A B``: every score two results databases share, the change and a decision.

The change ``B - A`` gets a 95% interval, paired by repeat (same configuration), paired on
the shared repeats (one side's trials include the other's) or from independent intervals;
the decisions are :data:`MEANING`. docs/contributions.md ("robench diff A B") has the rules.
Plugin and robench versions may differ (before and after an upgrade); components' own
versions and the data may not.
"""

from __future__ import annotations

import json
import math
from typing import Optional
import numpy as np
from robench.stats.sequential import paired_difference

#: Decisions, in the order a report lists them.
DECISIONS = ("worse", "better", "changed", "within noise", "same", "not comparable")
#: What each decision means, one line each (the diff command's help and docs say the same).
MEANING = {
    "worse": "the change's interval excludes 0 on the score's bad side",
    "better": "the change's interval excludes 0 on the score's good side",
    "changed": "the interval excludes 0 but the score has no direction (neither better nor "
               "worse is defined for it)",
    "within noise": "the interval includes 0: the data cannot tell (not 'unchanged')",
    "same": "the two values are equal, or neither side has one",
    "not comparable": "other configurations that do not nest (what differs is named), another "
                      "metric or component version, other data, or only one side has a value",
}
#: Level of the interval of a change.
LEVEL = 0.95
#: Relative change below which two values are the same number (rounding of stored floats).
_ROUNDING = 1e-9
_IDENTITY = ("dataset", "model", "clusterer", "metric", "score")


def _components(versions: dict) -> dict:
    """Return {component: its own version} ('plugin-version/component-version' -> the last)."""
    return {name: value if name.endswith("_content") else str(value or "").rpartition("/")[2]
            for name, value in (versions or {}).get("components", {}).items()}


def repeat_samples(row: dict) -> dict:
    """Return a score's per-repeat values {repeat: (numerator, denominator)} ({} if unknown)."""
    details = row.get("details")
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return {}
    if not isinstance(details, dict):
        return {}

    def labelled(values, key):
        reps = details.get(key)
        return zip(reps if isinstance(reps, list) and len(reps) == len(values)
                   else range(len(values)), values)

    xs, is_ = details.get("acc_exclusive"), details.get("acc_inclusive")
    if isinstance(xs, list) and isinstance(is_, list):
        x, i = dict(labelled(xs, "repeats_exclusive")), dict(labelled(is_, "repeats_inclusive"))
        pairs = {r: (x[r], i[r]) for r in x if r in i}
    elif isinstance(details.get("per_repeat"), list):
        pairs = {r: (v, 1.0) for r, v in labelled(details["per_repeat"], "repeats")}
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


def _paired(a: dict, b: dict, repeats=None) -> tuple:
    """Return ((low, high, n, change, (a, b)) of the paired interval of b - a, or None, why not)."""
    sa, sb = repeat_samples(a), repeat_samples(b)
    if not sa or not sb:
        return None, None if repeats is None else "no per-repeat values: not paired"
    common = set(sa) & set(sb)
    if repeats is not None:
        common &= set(repeats)
    common = sorted(common, key=str)
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
    return (low, high, int(out["n"]), float(out["d"]),
            (float(xa.sum() / ia.sum()), float(xb.sum() / ib.sum()))), None


def compare(a: dict, b: dict, *, anyway: bool = False, paired: bool = True,
            repeats=None) -> dict:
    """Return the comparison of two score rows with the same identity (rows may carry versions)."""
    out = {c: a.get(c) for c in _IDENTITY}
    out.update(configuration=a.get("configuration"), a=a.get("value"), b=b.get("value"),
               change=None, low=None, high=None, reason=None, method=None)
    why = []
    if str(a.get("metric_version")) != str(b.get("metric_version")):
        why.append(f"metric version {a.get('metric_version')} vs {b.get('metric_version')}")
    ca, cb = _components(a.get("versions") or {}), _components(b.get("versions") or {})
    if repeats is not None:
        # shared trials have the same keys, and a key holds every version: one trial picked
        # from each group (score_versions) may be of another kind, with another protocol version
        ca = cb = {}
    for name in sorted(set(ca) & set(cb)):
        if ca[name] != cb[name]:
            why.append(f"{name} {ca[name]} vs {cb[name]}")
    if a.get("value") is None and b.get("value") is None:
        # nothing on either side: nothing changed (a report must not count it as a change)
        out.update(decision="same", reason="no value in either")
        return out
    if a.get("value") is None or b.get("value") is None:
        out.update(decision="not comparable",
                   reason="no value in " + ("A" if a.get("value") is None else "B"))
        return out
    if why and not anyway:
        out.update(decision="not comparable", reason="; ".join(why))
        return out
    va, vb = float(a["value"]), float(b["value"])
    change = vb - va
    interval, note = _paired(a, b, repeats) if paired and not why else (None, None)
    if interval is not None:
        low, high, n, shared, (on_a, on_b) = interval
        if repeats is not None:
            change = shared
            method = f"paired on the {n} shared repeats, {on_a:.4g} -> {on_b:.4g} there"
            out.update(shared_a=on_a, shared_b=on_b)
        else:
            method = f"paired by repeat ({n} repeats)"
    else:
        widths = [max(float(r["ci_high"]) - float(r["ci_low"]), 0.0) / 2.0 for r in (a, b)
                  if r.get("ci_low") is not None and r.get("ci_high") is not None]
        half = math.sqrt(sum(w * w for w in widths)) if widths else 0.0
        low, high = change - half, change + half
        method = "independent intervals"
    if abs(change) <= _ROUNDING * max(1.0, abs(va), abs(vb)):
        change = 0.0
    out.update(change=change, low=low, high=high, method=method)
    hib = a.get("higher_is_better")
    out["decision"] = ("same" if change == 0.0 else "within noise" if low <= 0.0 <= high
                       else "changed" if hib is None
                       else "better" if (low > 0) == bool(hib) else "worse")
    notes = why + ([note] if note else [])
    if notes:
        out["reason"] = "; ".join(notes)
    return out


def _flat(value, prefix: str = "") -> dict:
    """Return a nested dict as {dotted path: leaf value}."""
    if isinstance(value, dict):
        return {path: leaf for k, v in value.items()
                for path, leaf in _flat(v, f"{prefix}{k}.").items()}
    return {prefix.rstrip("."): value}


def configuration_differences(one: Optional[dict], other: Optional[dict]) -> list:
    """Return what differs between two ``configurations`` rows ('seed 0 vs 1', ...)."""
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

    out = [f"{key} {one.get(key)} vs {other.get(key)}"
           for key in ("profile", "seed", "repeats", "sources") if one.get(key) != other.get(key)]
    for key in ("knobs", "description"):  # the description only where nothing else differs
        if key == "description" and out:
            break
        ka, kb = _flat(decoded(one, key) or {}), _flat(decoded(other, key) or {})
        out += [f"{name} {json.dumps(ka.get(name))} vs {json.dumps(kb.get(name))}"
                for name in sorted(set(ka) | set(kb)) if ka.get(name) != kb.get(name)]
    return out


def _extension(ta: dict, tb: dict) -> Optional[dict]:
    """Return how two score groups' trials ({trial key: repeat}) nest, or None where they do not."""
    if not ta or not tb:
        return None
    keys_a, keys_b = set(ta), set(tb)
    if not (keys_a <= keys_b or keys_b <= keys_a):
        return None
    shared = {ta[k] for k in keys_a & keys_b}
    return {"shared": shared, "more_a": {ta[k] for k in keys_a - keys_b} - shared,
            "more_b": {tb[k] for k in keys_b - keys_a} - shared}


def _extension_note(ext: dict) -> str:
    more_a, more_b = len(ext["more_a"]), len(ext["more_b"])
    if bool(more_a) == bool(more_b):
        return "the same trials in another configuration"
    side, n = ("B extends A", more_b) if more_b else ("A extends B", more_a)
    return f"{side} by {n} repeat{'s' if n != 1 else ''}"


def _label(configs: Optional[dict], config) -> str:
    row = (configs or {}).get(config) or {}
    return str(row.get("label") or "a configuration not described in the file")


def diff_scores(rows_a: list, rows_b: list, *, configs_a: Optional[dict] = None,
                configs_b: Optional[dict] = None, anyway: bool = False,
                trials_a: Optional[dict] = None, trials_b: Optional[dict] = None) -> list:
    """Return one comparison per score present in both lists.

    ``configs_a`` / ``configs_b``: {configuration id: row}, to name what differs; ``anyway``:
    compare such scores too (independently). ``trials_a`` / ``trials_b``: {(data set, model,
    clusterer, metric, configuration): {trial key: repeat}}: nested groups are paired on their
    shared repeats whatever their configurations say.
    """
    def index(rows):
        out = {}
        for r in rows:
            ident = tuple(r.get(c) or "" for c in _IDENTITY)
            out.setdefault(ident, {})[r.get("configuration")] = r
        return out

    def group(trials, ident, config):
        return (trials or {}).get((*ident[:4], config)) or {}

    ia, ib = index(rows_a), index(rows_b)
    out = []
    for ident in sorted(set(ia) & set(ib)):
        common = sorted(set(ia[ident]) & set(ib[ident]), key=str)
        if common:
            out.extend(compare(ia[ident][c], ib[ident][c], anyway=anyway) for c in common)
            continue
        ka, kb = sorted(ia[ident], key=str), sorted(ib[ident], key=str)
        nested = next(((x, y, e) for x in ka for y in kb
                       if (e := _extension(group(trials_a, ident, x),
                                           group(trials_b, ident, y))) is not None), None)
        if nested is not None:
            x, y, ext = nested
            row = compare(ia[ident][x], ib[ident][y], repeats=ext["shared"])
            row["reason"] = _extension_note(ext) + ("; " + row["reason"] if row.get("reason")
                                                     else "")
            row.update(extends=len(ext["more_b"]) - len(ext["more_a"]),
                       shared_repeats=len(ext["shared"]))
            out.append(row)
            continue
        a, b = ia[ident][ka[-1]], ib[ident][kb[-1]]
        what = configuration_differences((configs_a or {}).get(ka[-1]),
                                         (configs_b or {}).get(kb[-1]))
        reason = ("configuration differs: " + "; ".join(what) if what else
                  f"configuration differs ({_label(configs_a, ka[-1])} vs "
                  f"{_label(configs_b, kb[-1])})")
        if anyway:
            row = compare(a, b, anyway=True, paired=False)
            row["reason"] = reason + ("; " + row["reason"] if row.get("reason") else "")
        else:
            row = {c: v for c, v in zip(_IDENTITY, ident)}
            row.update(configuration=None, a=a.get("value"), b=b.get("value"),
                       change=None, low=None, high=None, method=None,
                       decision="not comparable", reason=reason)
        out.append(row)
    return out


def counts(comparisons: list) -> dict:
    """Return {decision: how many} over ``comparisons``, every decision present."""
    out = dict.fromkeys(DECISIONS, 0)
    for c in comparisons:
        out[c["decision"]] += 1
    return out
