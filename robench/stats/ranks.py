"""Ranks of a table of models: paired where they share repeats, Holm over adjacent pairs.

A table ranks models by one score (rho, a mean accuracy). Where the models' repeats share
their partitions (repeat r of every model of a data set and clusterer uses the same test
masks and seeds), their per-repeat values move together, and marginal intervals, which
ignore that, can overlap while the difference is clear (or, less often, the other way
round). The rule here (:func:`rank_models`):

1. A model that may not be ranked gets no rank and says why (``unranked``: no value, or
   its accuracy is not shown to be above chance, :func:`chance_reason`); it is listed after
   the ranked ones with its value.
2. The others are ordered by their estimate, best first.
3. Each *adjacent* pair (a above b) is tested. Where both models have per-repeat values for
   at least two common repeats, by the paired interval of their difference (the delta
   method over the common repeats, :func:`robench.stats.sequential.paired_difference`, the
   interval ``robench run --until decided`` uses; a mean is the ratio with denominator 1):
   its Student-t p-value ``2 P(T_{n-1} > |d| / se)``. The m paired tests of a table are
   corrected together by Holm's step-down procedure (S. Holm, "A simple sequentially
   rejective multiple test procedure", Scand. J. Statist. 6(2), 1979): sorted by p-value,
   the k-th smallest is rejected at ``alpha / (m - k + 1)`` while every smaller one was.
   A pair is *ordered* when its test is rejected and its difference over the common repeats
   has the sign of the estimates' order. Where the two share fewer than 2 repeats
   (independent samples, or per-repeat values not known), the pair is ordered only when
   their marginal intervals do not overlap (a model without one counts as its point).
4. Competition ranks: a new rank starts after an ordered pair, otherwise a model shares the
   rank of the pair above it (1, 1, 3, ...); ``tied`` marks a shared rank.

The familywise probability of calling some adjacent pair ordered when its upper model is
not better is at most alpha (Holm) when each paired test has its level; simulation pins it
on correlated and skewed per-repeat effects (tests/stats/test_ranks.py, docs/intervals.md):
at most 5% in every setting but one, a two-model table whose difference carries a skewed
shared effect, where the t-test's unequal tails give ~5.3% (pinned at most 5.5%).

Everything here is a pure function of numbers and small dicts.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from robench.stats import is_finite

#: Familywise error rate of a table's ordered pairs.
ALPHA = 0.05


# --- chance -------------------------------------------------------------------------------


def chance_level(n_classes: Optional[int], majority: Optional[float] = None) -> tuple:
    """Return (chance accuracy, its basis in words): 1/classes, or the majority-class rate
    of the test sets where that is higher (None, reason where neither is known)."""
    if not n_classes or n_classes < 1:
        if is_finite(majority):
            return float(majority), f"majority-class rate {100 * majority:.1f}%"
        return None, "the number of classes is not recorded"
    uniform = 1.0 / int(n_classes)
    if is_finite(majority) and majority > uniform:
        return float(majority), (f"majority-class rate {100 * majority:.1f}% of the test "
                                 f"sets (above 1/{int(n_classes)})")
    return uniform, f"1/{int(n_classes)} classes"


def chance_reason(value, low, high, chance: Optional[float], basis: str, *,
                  values: Sequence = (), interval_reason: Optional[str] = None,
                  name: str = "E[AccI]") -> Optional[str]:
    """Return why an accuracy is not shown to be above chance (None: it is).

    Above chance means the accuracy's interval lies above the chance level (``low >
    chance``). Without an interval: all repeats equal (no spread) and above chance counts as
    above; anything else (one repeat, no value) cannot show it and is not ranked.
    """
    if chance is None:
        return None  # nothing to compare with: ranked as before, the basis says why
    if not is_finite(value):
        return f"no {name} to compare with chance"
    if is_finite(low) and is_finite(high):
        if low > chance:
            return None
        return (f"at chance: {name} {100 * value:.1f}% [{100 * low:.1f}, {100 * high:.1f}] "
                f"does not exclude chance ({100 * chance:.1f}%, {basis})")
    vals = [float(v) for v in values if is_finite(v)]
    if len(vals) >= 2 and min(vals) == max(vals) and vals[0] > chance:
        return None
    why = interval_reason or "no interval"
    return (f"not shown above chance: {name} {100 * value:.1f}% has no interval ({why}), "
            f"chance {100 * chance:.1f}% ({basis})")


# --- the rule -------------------------------------------------------------------------------


def paired_pvalues(xa, ia, xb, ib) -> dict:
    """Return the paired test of ``value(a) - value(b)`` over common repeats, vectorised.

    Inputs have shape (..., R): per repeat the numerator and denominator of each model (a
    mean: denominator 1), NaN where a repeat is missing. :func:`paired_difference` gives the
    difference of the two ratios of means over the repeats both have (``d``), its
    delta-method standard error (``se``) and their number (``n``); ``p`` is the two-sided
    Student-t p-value ``2 P(T_{n-1} > |d| / se)``: 1 where the differences have no spread
    (the same values in every common repeat) or fewer than 2 repeats are common.
    """
    from scipy import stats

    from robench.stats.sequential import paired_difference

    pd = paired_difference(xa, ia, xb, ib, 1 - ALPHA)
    d, se, n = pd["d"], pd["se"], pd["n"]
    with np.errstate(divide="ignore", invalid="ignore"):
        usable = (n >= 2) & np.isfinite(d) & (se > 1e-12 * np.maximum(np.abs(d), 1e-3))
        p = np.where(usable, 2 * stats.t.sf(np.abs(d) / np.where(usable, se, 1.0),
                                            np.maximum(n - 1, 1)), 1.0)
    return {"d": d, "se": np.where(n >= 2, se, np.nan), "n": n, "p": p}


def holm(pvalues, alpha: float = ALPHA) -> tuple:
    """Return (rejected, thresholds) of Holm's step-down procedure, vectorised over rows.

    ``pvalues`` has shape (..., m); NaN marks a pair that is not tested (it is neither
    counted nor rejected). With m' tests in a row, its k-th smallest p-value (k = 1..m') is
    compared with ``alpha / (m' - k + 1)``; rejection stops at the first that exceeds its
    threshold. ``thresholds`` is the level each tested p-value was compared with (NaN for an
    untested one).
    """
    p = np.asarray(pvalues, float)
    tested = np.isfinite(p)
    m = tested.sum(-1, keepdims=True)
    order = np.argsort(np.where(tested, p, np.inf), axis=-1, kind="stable")
    k = np.arange(p.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where(k < m, alpha / (m - k), np.nan)
    sorted_p = np.take_along_axis(p, order, -1)
    ok = sorted_p <= steps  # False for NaN
    rejected_sorted = np.cumprod(ok, axis=-1).astype(bool)
    rejected = np.zeros(p.shape, bool)
    thresholds = np.full(p.shape, np.nan)
    np.put_along_axis(rejected, order, rejected_sorted, -1)
    np.put_along_axis(thresholds, order, steps, -1)
    return rejected, thresholds


def adjacent_decisions(x, i, *, alpha: float = ALPHA, higher_is_better: bool = True) -> dict:
    """Return the decisions on the adjacent pairs of tables already in estimate order.

    ``x``, ``i``: shape (..., M, R), models best first, per repeat the numerator and
    denominator (NaN where missing). Each adjacent pair gets :func:`paired_pvalues`; pairs
    with at least 2 common repeats are tested and corrected together by :func:`holm`.
    Returns per pair (..., M - 1): ``d``, ``se``, ``n``, ``p`` (NaN if untested),
    ``paired``, ``level`` (Holm's threshold), ``ordered`` (rejected, with the difference on
    the side of the estimates' order).
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    res = paired_pvalues(x[..., :-1, :], i[..., :-1, :], x[..., 1:, :], i[..., 1:, :])
    paired = res["n"] >= 2
    p = np.where(paired, res["p"], np.nan)
    rejected, level = holm(p, alpha)
    sign = 1.0 if higher_is_better else -1.0
    with np.errstate(invalid="ignore"):
        ordered = rejected & (sign * res["d"] > 0)
    return {"d": res["d"], "se": res["se"], "n": res["n"], "p": p, "paired": paired,
            "level": level, "ordered": ordered}


def rank_models(models: Sequence[dict], *, higher_is_better: bool = True,
                alpha: float = ALPHA) -> dict:
    """Rank a table of models (the rule in the module docstring); return the ranking.

    Parameters
    ----------
    models : sequence of dict
        One per model: ``model`` (name), ``value`` (estimate or None), ``ci_low``,
        ``ci_high`` (its marginal interval, None where undefined), ``samples``
        ({repeat: (numerator, denominator)} for a ratio of means, {repeat: value} for a
        mean; None where the per-repeat values are not known) and ``unranked`` (why it may
        not be ranked, or None).
    higher_is_better : bool
        Direction of the score.
    alpha : float
        Familywise error rate of the ordered pairs.

    Returns
    -------
    dict
        ``rows``: the input dicts (copied) best first, ranked ones then unranked ones, each
        with ``rank``, ``tied``, ``unranked`` and ``next`` (its pair with the ranked model
        below it, or None); ``pairs``: the adjacent pairs (``pair``, ``difference``, ``n``,
        ``p``, ``level``, ``paired``, ``ordered``); ``tests``: the number of paired tests
        Holm corrected over; ``rule``: the rule in one sentence.
    """
    sign = 1.0 if higher_is_better else -1.0
    rows = [dict(m) for m in models]
    for r in rows:
        r["unranked"] = r.get("unranked") or (None if is_finite(r.get("value")) else "no value")
    ranked = sorted((r for r in rows if r.get("unranked") is None),
                    key=lambda r: -sign * float(r["value"]))
    rest = [r for r in rows if r.get("unranked") is not None]
    per_model = [_samples(r.get("samples")) for r in ranked]
    repeats = sorted({k for s in per_model for k in s})
    col = {k: j for j, k in enumerate(repeats)}
    x = np.full((len(ranked), max(len(repeats), 1)), np.nan)
    i = np.full_like(x, np.nan)
    for m, s in enumerate(per_model):
        for k, (num, den) in s.items():
            x[m, col[k]], i[m, col[k]] = num, den
    pairs = []
    if len(ranked) > 1:
        dec = adjacent_decisions(x, i, alpha=alpha, higher_is_better=higher_is_better)
        for j, (a, b) in enumerate(zip(ranked, ranked[1:])):
            if dec["paired"][j]:
                pairs.append({"pair": [a["model"], b["model"]], "paired": True,
                              "difference": _num(dec["d"][j]), "n": int(dec["n"][j]),
                              "p": _num(dec["p"][j]), "level": _num(dec["level"][j]),
                              "ordered": bool(dec["ordered"][j])})
                continue
            (la, ha), (lb, hb) = _span(a), _span(b)
            apart = la > hb or lb > ha
            pairs.append({"pair": [a["model"], b["model"]], "paired": False,
                          "difference": float(a["value"]) - float(b["value"]), "n": None,
                          "p": None, "level": None, "ordered": bool(apart)})
    for r, p in zip(ranked, pairs + [None]):
        r["next"] = p
    rank = 1
    for j, r in enumerate(ranked):
        if j > 0 and pairs[j - 1]["ordered"]:
            rank = j + 1
        r["rank"] = rank
    counts: dict = {}
    for r in ranked:
        counts[r["rank"]] = counts.get(r["rank"], 0) + 1
    for r in ranked:
        r["tied"] = counts[r["rank"]] > 1
    for r in rest:
        r.update(rank=None, tied=False, next=None)
    tests = sum(p["paired"] for p in pairs)
    return {"rows": ranked + rest, "pairs": pairs, "tests": tests,
            "rule": rule_text(tests, len(pairs) - tests, alpha)}


def _span(row: dict) -> tuple:
    """Return a model's marginal interval; without one, the point [value, value]."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if not (is_finite(lo) and is_finite(hi)):
        return float(row["value"]), float(row["value"])
    return min(lo, hi), max(lo, hi)


def _num(v) -> Optional[float]:
    v = float(v)
    return v if math.isfinite(v) else None


def _samples(s) -> dict:
    """Return {repeat: (numerator, denominator)} of a model's per-repeat values ({} if none)."""
    if not isinstance(s, dict):
        return {}
    out = {}
    for k, v in s.items():
        pair = tuple(v) if isinstance(v, (list, tuple)) else (v, 1.0)
        if len(pair) == 2 and all(is_finite(u) for u in pair):
            out[k] = (float(pair[0]), float(pair[1]))
    return out


def rule_text(tests: int, unpaired: int = 0, alpha: float = ALPHA) -> str:
    """Return the ranking rule of a table in one sentence (shown where its ranks are)."""
    parts = []
    if tests:
        parts.append(f"adjacent models get different ranks when the paired difference over "
                     f"their shared repeats is significant, Holm-corrected over the {tests} "
                     f"paired adjacent pair{'s' if tests != 1 else ''} (familywise "
                     f"{100 * alpha:g}%)")
    if unpaired:
        parts.append(f"{unpaired} adjacent pair{'s' if unpaired != 1 else ''} without shared "
                     "repeats: different ranks only when their 95% intervals do not overlap")
    if not parts:
        return "one ranked model"
    return "; ".join(parts)
