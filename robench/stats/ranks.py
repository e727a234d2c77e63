"""Ranks of a table of models: every pair tested, rank intervals, a chance bar with a margin.

:func:`rank_models`: models not shown above chance plus a margin are unranked; the others
are sorted by estimate (a point estimate), every pair is tested by
:func:`robench.stats.paired.compare_all` (Holm; TOST within :func:`equivalence_margin`) and
each model gets the rank interval best = 1 + shown better, worst = M - shown worse.
docs/intervals.md ("Ranks") has the rule and why. Pure functions of numbers and small dicts.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Optional, Sequence

import numpy as np

from robench.stats import is_finite
from robench.stats.paired import (ALPHA, EQUIVALENT, ORDERED, UNDECIDED, chance_bar, compare_all,
                                  complete_cycles, rank_text)

#: ``ROBENCH_MARGIN`` sets a table's practical-equivalence margin per metric:
#: ``"rho=0.03,coverage=0.01"`` (:func:`equivalence_margin`).
MARGIN_ENV = "ROBENCH_MARGIN"

#: Relevance margin of the chance bar: a model is ranked only when its E[AccI] interval lies
#: above ``chance + CHANCE_MARGIN * (1 - chance)`` (:func:`robench.stats.paired.chance_bar`;
#: a tenth of the way from guessing to perfect). ``ROBENCH_CHANCE_MARGIN`` sets another.
CHANCE_MARGIN = 0.1


def chance_margin() -> float:
    """Return the chance bar's relevance margin: ``ROBENCH_CHANCE_MARGIN`` where set (a number
    in [0, 1)), else :data:`CHANCE_MARGIN`. Every path that ranks reads it here."""
    raw = os.environ.get("ROBENCH_CHANCE_MARGIN")
    if raw is None or raw.strip() == "":
        return CHANCE_MARGIN
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"ROBENCH_CHANCE_MARGIN must be a number in [0, 1), got {raw!r}") from None
    if not 0.0 <= value < 1.0:
        raise ValueError(f"ROBENCH_CHANCE_MARGIN must be a number in [0, 1), got {raw!r}")
    return value


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
                  name: str = "E[AccI]", margin: Optional[float] = None) -> Optional[str]:
    """Return why an accuracy is not shown above chance plus the margin (None: it is)."""
    if chance is None:
        return None  # nothing to compare with: ranked as before, the basis says why
    margin = chance_margin() if margin is None else float(margin)
    if not is_finite(value):
        return f"no {name} to compare with chance"
    bar = chance_bar(chance, margin)
    said = (f"chance {100 * chance:.1f}% ({basis}) + margin {margin:g} of the rest = "
            f"{100 * bar:.1f}%")
    if is_finite(low) and is_finite(high):
        if low > bar:
            return None
        return (f"at chance: {name} {100 * value:.1f}% [{100 * low:.1f}, {100 * high:.1f}] "
                f"is not shown above {said}")
    vals = [float(v) for v in values if is_finite(v)]
    if len(vals) >= 2 and min(vals) == max(vals) and vals[0] > bar:
        return None
    why = interval_reason or "no interval"
    return (f"at chance: {name} {100 * value:.1f}% has no interval ({why}), so it is not shown "
            f"above {said}")


def equivalence_margin(metric: str, default: float) -> float:
    """Return ``metric``'s equivalence margin: its ``ROBENCH_MARGIN`` entry, else ``default``."""
    raw = os.environ.get(MARGIN_ENV) or ""
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        try:
            number = float(value) if sep else float("nan")
        except ValueError:
            number = float("nan")
        if not (sep and name.strip() and math.isfinite(number) and number > 0):
            raise ValueError(f"{MARGIN_ENV} must read metric=margin[,metric=margin] with "
                             f"margins > 0, got {raw!r}")
        if name.strip() == metric:
            return number
    return float(default)


def rank_models(models: Sequence[dict], *, higher_is_better: bool = True,
                alpha: float = ALPHA, precision: Optional[float] = None,
                looks: int = 1) -> dict:
    """Rank a table of models (docs/intervals.md, "Ranks"); return the ranking.

    ``models``: one dict per model with ``model``, ``value`` (or None), ``samples`` ({repeat:
    (numerator, denominator)} or {repeat: value}; None where unknown), ``cycle`` (the balanced
    design's, or None) and ``unranked`` (why not, or None). ``precision``: the equivalence
    margin (None: no TOST); ``looks``: the planned looks of the ``--until decided`` run whose
    repeats these are (tests at ``alpha / looks``, as it ran them).
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
    # columns are repeat indices where known, so cycles of the balanced design line up
    by_index = bool(repeats) and all(isinstance(k, int) and k >= 0 for k in repeats)
    col = {k: (k if by_index else j) for j, k in enumerate(repeats)}
    x = np.full((len(ranked), max(col.values(), default=0) + 1), np.nan)
    i = np.full_like(x, np.nan)
    for m, s in enumerate(per_model):
        for k, (num, den) in s.items():
            x[m, col[k]], i[m, col[k]] = num, den
    cycles = {r.get("cycle") for r in ranked}
    cycle = cycles.pop() if len(cycles) == 1 else None
    cycle = int(cycle) if by_index and isinstance(cycle, (int, float)) and cycle >= 2 else None
    pairs, m = [], len(ranked)
    best, worst = [1] * m, [m] * m
    if m > 1:
        res = compare_all(x, i, alpha=alpha, precision=precision, cycle=cycle, looks=looks,
                          higher_is_better=higher_is_better)
        best, worst = res["best"].tolist(), res["worst"].tolist()
        back = {c: k for k, c in col.items()}
        for k, (a, b) in enumerate(res["pairs"]):
            st, bad = int(res["status"][k]), int(res["degraded"][k])
            common = complete_cycles(np.isfinite(x[a]) & np.isfinite(i[a]) & np.isfinite(x[b])
                                     & np.isfinite(i[b]), cycle)  # the repeats the test used
            status = {1: ORDERED, -1: ORDERED, 2: EQUIVALENT}.get(st, UNDECIDED)
            repeat = back.get(bad) if bad >= 0 else None
            pairs.append({"pair": [ranked[a]["model"], ranked[b]["model"]], "status": status,
                          "above": {1: ranked[a]["model"], -1: ranked[b]["model"]}.get(st),
                          "difference": float(ranked[a]["value"]) - float(ranked[b]["value"]),
                          "n": int(common.sum()), "margin": precision, "degraded_repeat": repeat,
                          "verdict": verdict_text(status, precision, repeat)})
    for j, r in enumerate(ranked):
        r.update(rank=j + 1, rank_best=int(best[j]), rank_worst=int(worst[j]),
                 rank_interval=rank_text(int(best[j]), int(worst[j])),
                 tied=int(best[j]) != int(worst[j]))
    for r in rest:
        r.update(rank=None, rank_best=None, rank_worst=None, rank_interval=None, tied=False)
    design = "balanced" if cycle else "any"
    return {"rows": ranked + rest, "pairs": pairs, "tests": len(pairs), "design": design,
            "cycle": cycle, "rule": rule_text(len(pairs), alpha, cycle, precision)}


def _samples(s) -> dict:
    """Return {repeat: (numerator, denominator)} of a model's per-repeat values ({} if none)."""
    if not isinstance(s, dict):
        return {}
    out = {}
    for k, v in s.items():
        pair = tuple(v) if isinstance(v, (list, tuple)) else (v, 1.0)
        if len(pair) == 2 and all(is_finite(u) for u in pair):
            with contextlib.suppress(TypeError, ValueError):
                k = int(k)
            out[k] = (float(pair[0]), float(pair[1]))
    return out


def verdict_text(status: str, margin: Optional[float], degraded=None) -> str:
    """Return a pair's verdict in words, with the margin that decided an equivalence and the
    repeat that kept a pair undecided where the data show one."""
    if status == ORDERED:
        return "ordered"
    if status == EQUIVALENT:
        return f"equivalent within +-{margin:g} (two one-sided tests)"
    if degraded is not None:
        return (f"undecided: repeat {degraded} looks degraded (a training run far from the "
                "others; more repeats, or a rerun of it, decide)")
    return "undecided"


def rule_text(tests: int, alpha: float = ALPHA, cycle: Optional[int] = None,
              precision: Optional[float] = None) -> str:
    """Return the ranking rule of a table in one sentence (shown where its ranks are)."""
    if not tests:
        return "one ranked model"
    how = (f"over complete cycles of the balanced held-out design ({cycle} repeats a cycle), "
           "a pair with a repeat that looks degraded left undecided" if cycle else
           "over the shared repeats (independent repeats)")
    eq = (f"; equivalent: within the margin +-{precision:g}, two one-sided tests"
          if precision else "")
    return (f"rank intervals from all {tests} pair{'s' if tests != 1 else ''}: the paired "
            f"difference by Hall's skew-corrected t {how}, Holm-corrected (familywise "
            f"{100 * alpha:.3g}%); best = 1 + models shown better, worst = M - models shown "
            f"worse{eq}; # is the order of the estimates (a point estimate)")
