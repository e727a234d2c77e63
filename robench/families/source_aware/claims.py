"""The source-aware paper's claims, decided on stored rho scores (robench.stats.claims)."""

from __future__ import annotations

import functools
import math
from typing import Optional
import numpy as np

from robench.families.source_aware.rho import METRIC as RHO
from robench.stats.claims import (CONTROL_DRAWS, FAILS, HOLDS, SIDE, UNDECIDED, Claim,
                                  Control, OrderingPart, compare, controlled, decide_parts, fmt,
                                  matched, n_for_power, parts_need, repeats_needed,
                                  repeats_to_separate, tost_need, would)
from robench.stats.claims import combine as _combine
from robench.families.source_aware.leaderboard import rho_samples
from robench.metric_kit import score_index
from robench.stats.controls import source_aware_null
from robench.stats.equivalence import (EQUIVALENT, NOT_EQUIVALENT, difference_interval,
                                       equivalence)
from robench.stats.intervals import mean_interval
from robench.stats.jackknife import sd_ratio_independent
from robench.stats.paired import null_pairs
from robench.stats.sequential import paired_difference

PAPER = "Source-aware partitioning (Kilinc & Uysal)"
#: The paper's capacity order on MNIST (rho rises with capacity: SVM < MLP < CNN-1..3).
CAPACITY = ("svm", "mlp", "cnn-1", "cnn-2", "cnn-3")
#: E[AccI] ~ E[Acc]: "approximately equal" means within this many accuracy points (0.01 = 1
#: point), decided by two one-sided tests (robench.stats.equivalence).
EQUIVALENCE_MARGIN = 0.01


def _table(rows: list, clusterer: str = "kmeans") -> dict:
    """Return {dataset: {model: {score: row}}} of the rho metric's rows of one clusterer."""
    return score_index([r for r in rows if (r.get("clusterer") or "") == clusterer], RHO)


def _row(paper: str, claim: str, paper_figure: str, dataset: str, figure: str, verdict: str,
         why: str, evidence: dict, control, need=None, **kw) -> Claim:
    """Return a claim row judged against its control; ``need`` plans an undecided one."""
    return controlled(Claim(paper, claim, paper_figure, dataset, figure, verdict, why, evidence,
                            would_decide=would(need) if verdict == UNDECIDED else "", **kw),
                      control)


def _max_need(needs: list):
    """Return the largest planning figure (None if there is none, or one part has none)."""
    return None if not needs or None in needs else max(needs)


def _side(iv: dict, bound: float) -> str:
    """Return holds (``iv``'s interval above ``bound``), does not hold (below) or undecided."""
    return (UNDECIDED if iv["low"] is None else HOLDS if iv["low"] > bound
            else FAILS if iv["high"] < bound else UNDECIDED)


def _tost(res: dict, text: str, bound: str, tests: str = "") -> tuple:
    """Return (verdict, why, repeats) of an equivalence result with an interval."""
    if res["status"] == EQUIVALENT:
        return HOLDS, f"{text} inside {bound}{tests}", None
    if res["status"] == NOT_EQUIVALENT:
        return FAILS, f"{text} outside {bound}{tests}", None
    return UNDECIDED, f"{text} straddles {bound}", tost_need(res)


def _equivalence_part(inclusive, random):
    """Return the part "E[AccI] ~ E[Acc]" of one model: TOST at any level."""
    return lambda level: _equivalent(inclusive, random, level)[0]


def _equivalent(inclusive: dict, random: dict, alpha: float = 0.05) -> tuple:
    """Return (verdict, why, repeats) of E[AccI] ~ E[Acc] within the margin, by TOST (Welch:
    the two kinds' partitions are drawn independently)."""
    per = [_per_repeat(r) for r in (inclusive, random)]
    if not (per[0] and per[1]):
        return UNDECIDED, "a side has no per-repeat accuracies", None
    res = equivalence(per[0], per[1], EQUIVALENCE_MARGIN, paired=False, alpha=alpha)
    figure = f"{fmt(inclusive, True)} vs {fmt(random, True)}"
    if res["low"] is None:
        return UNDECIDED, f"{figure}: {res['reason']}", None
    return _tost(res, f"{figure}: difference {100 * res['estimate']:+.2f} points, 90% "
                      f"[{100 * res['low']:+.2f}, {100 * res['high']:+.2f}]",
                 f"±{100 * EQUIVALENCE_MARGIN:g}")


#: Capacity steps count as a tie ("equivalent") when shown within this many points of rho
#: (or of AccX): the third outcome of the ordering claims.
CAPACITY_MARGIN = 0.02
#: Null data sets (or shuffles) per control, each at the row's size (docs/claims.md).
CONTROL_REPLICATES = CONTROL_DRAWS
_CLUSTERING_NULL = ("k-means sources of i.i.d. Gaussian classes (no sources), nearest-mean "
                    "model")


@functools.cache
def _null(repeats: int) -> list:
    """Return the control's null data sets' per-repeat accuracies (cached per repeats)."""
    return [source_aware_null(seed, repeats=repeats) for seed in range(CONTROL_REPLICATES)]


def _arrays(samples: dict, width: int = 0):
    """Return (x, i) arrays over repeat indices of {repeat: (x, i)} (NaN where missing)."""
    width = max(width, 1, *(int(r) + 1 for r in samples))
    x, i = np.full(width, np.nan), np.full(width, np.nan)
    for r, (xv, iv) in samples.items():
        x[int(r)], i[int(r)] = xv, iv
    return x, i


def _cost_part(samples: dict, cycle):
    """Return the part "AccI above AccX" of one model (paired by repeat)."""
    x, i = _arrays(samples)
    one = np.where(np.isfinite(x), 1.0, np.nan)
    return OrderingPart(i, one, x, one, cycle=cycle)


def _null_control(repeats: int, part, figure: str) -> Control:
    """Return a held-out-source claim's control: its rule, ``part(AccX, AccI)``, on the
    :func:`_null` data sets at the row's repeats."""
    verdicts = [decide_parts([part(w["acc_exclusive"], w["acc_inclusive"])])
                for w in _null(repeats)]
    return matched(_CLUSTERING_NULL, verdicts, "null data sets", figure, f"{repeats} repeats")


def _cost_control(repeats: int, cycle) -> Control:
    """Return the control of "AccI > AccX": the same paired rule on :func:`_null` data sets."""
    gap = np.mean([float(np.mean(w["acc_inclusive"] - w["acc_exclusive"]))
                   for w in _null(repeats)])
    return _null_control(repeats, lambda x, i: _cost_part(dict(enumerate(zip(x, i))), cycle or 5),
                         f"AccI - AccX {100 * gap:+.1f} points")


#: The AccX-spread rule's measured level (both wrong calls, skewed repeats at a true ratio of
#: 1: tests/stats/test_claims_power.py; docs/claims.md), counted instead of the nominal 0.05.
SPREAD_LEVEL = 0.10


def _spread_part(x: list, i: list):
    return lambda level: _side(sd_ratio_independent(x, i, 1 - 2 * level), 1)


def _spread_control(repeats: int):
    """Return the control of "AccX spreads more": the same jackknife rule on :func:`_null`."""
    ratios = [sd_ratio_independent(w["acc_exclusive"].tolist(), w["acc_inclusive"].tolist())[
        "ratio"] or float("nan") for w in _null(repeats)]
    ratios = [r for r in ratios if np.isfinite(r)]
    return _null_control(repeats, lambda x, i: _spread_part(x.tolist(), i.tolist()),
                         f"median sd ratio {np.median(ratios):.1f}" if ratios else "")


def _steps(order: list, samples: list, cycle) -> list:
    """Return [(a, b, part, n)] for each adjacent step a -> b of the claimed order: the part
    "b above a", paired by repeat (samples: per model {repeat: (num, den)} or {repeat: v})."""
    rows = [{int(r): (v if isinstance(v, (tuple, list)) else (v, 1.0)) for r, v in s.items()}
            for s in samples]
    width = max((max(s) for s in rows if s), default=-1) + 1
    out = []
    for k, (a, b) in enumerate(zip(order, order[1:])):
        common = set(rows[k]) & set(rows[k + 1])
        xa, ia = _arrays({r: rows[k + 1][r] for r in common}, width)
        xb, ib = _arrays({r: rows[k][r] for r in common}, width)
        out.append((a, b, OrderingPart(xa, ia, xb, ib, cycle=cycle, margin=CAPACITY_MARGIN),
                    len(common)))
    return out


def _step_text(a, b, part, n, percent: bool, steps: int = 1) -> str:
    """One step's line, with the verdict the row's rule gives it (robench.stats.claims.
    decide_parts): a step "does not hold" only when shown falling at ``SIDE / steps``
    (Bonferroni); shown falling at ``SIDE`` alone it says so and stays undecided."""
    if n < 2:
        return (f"{a} -> {b}: no per-repeat values to pair (scores stored before they were "
                "kept: rescore them)")
    d = part.stats()["d"]
    shown = f"{100 * d:+.1f} points" if percent else f"{d:+.3f}"
    verdict = part(SIDE)
    if verdict == FAILS and part(SIDE / max(steps, 1)) != FAILS:
        verdict = (f"{UNDECIDED} (falling at one-sided {SIDE:g}, not at {SIDE:g} / {steps})")
    return f"{a} -> {b}: {shown} over {n} shared repeats: {verdict}"


def _capacity_control(repeats: int, steps: int, cycle, verdict: str = HOLDS,
                      parts: Optional[list] = None):
    """Return the capacity claims' control, per direction (docs/claims.md): models of equal
    rho, or for a "does not hold" the stored steps with every falling step mirrored."""
    if verdict == FAILS and parts:
        moved = [OrderingPart(p.v[0] - 2 * min(0.0, p.stats()["d"]) * p.v[1], *p.v[1:],
                              cycle=p.cycle, margin=p.margin) for p in parts]
        return matched("the stored steps with every falling step mirrored (the order made "
                       "true)", [decide_parts(moved)], "mirrored tables",
                       size=f"{repeats} repeats (the row's data)")
    rng = np.random.default_rng(0)

    def step():
        x, i = null_pairs(rng, 1, repeats, shape="lognormal",
                          design="balanced" if cycle else "random")
        return OrderingPart(x[0, 1], i[0, 1], x[0, 0], i[0, 0], cycle=cycle,
                            margin=CAPACITY_MARGIN)

    verdicts = [decide_parts([step() for _ in range(steps)]) for _ in range(CONTROL_REPLICATES)]
    return matched("models of equal rho sharing the partitions (simulated, log-normal "
                   "source effects)", verdicts, "simulated tables", size=f"{repeats} repeats")


def _chain_claim(dataset: str, models: dict, score: str, name: str, paper_figure: str,
                 samples_of, percent: bool) -> list:
    """Return the row "``name`` rises with capacity" over the :data:`CAPACITY` models with
    ``score`` (none under 2), every adjacent step paired by repeat (:func:`_steps`)."""
    order = [m for m in CAPACITY if (models.get(m) or {}).get(score)]
    if len(order) < 2:
        return []
    cycle = _cycle(models, order)
    steps = _steps(order, [samples_of(models[m][score]) for m in order], cycle)
    parts = [p for _, _, p, _ in steps]
    verdict = decide_parts(parts)
    n = max((n for *_, n in steps), default=0)
    why = ("; ".join(_step_text(a, b, p, n_, percent, len(parts)) for a, b, p, n_ in steps)
           + f" (paired by repeat by robench.stats.paired; holds: every step shown rising at "
             f"one-sided {SIDE:g}, an intersection-union test; does not hold: a step shown "
             f"falling at {SIDE:g} / {len(parts)} (Bonferroni); equivalent: every step within "
             f"±{CAPACITY_MARGIN:g})")
    return [_row(PAPER, f"{name} rises with capacity (" + " < ".join(order) + ")",
                 paper_figure, dataset,
                 " < ".join(f"{m} {fmt(models[m][score], percent)}" for m in order), verdict,
                 why, {f"{a}<{b}": p(SIDE) for a, b, p, _ in steps},
                 _capacity_control(max(n, 2), len(parts), cycle, verdict, parts),
                 parts_need(parts))]


def rho_claims(rows: list) -> list:
    """Return the source-aware claims per data set: AccI > AccX, E[AccI] ~ E[Acc], capacity,
    each with its control (docs/claims.md has the table of controls)."""
    claims = []
    for dataset, models in sorted(_table(rows).items()):
        claims.extend(_cost_claims(dataset, models))
        claims.extend(_exclusive_claims(dataset, models))
        claims.extend(_equivalence_claims(dataset, models))
        claims.extend(_chain_claim(
            dataset, models, "rho", "rho", "SVM < MLP < CNN-1 < CNN-2 < CNN-3 on MNIST (Table 1)",
            lambda row: rho_samples(_details(row)) or {}, percent=False))
    return claims


def _cost_claims(dataset: str, models: dict) -> list:
    """Return the row "source-inclusive accuracy exceeds source-exclusive" (eq. 1-2)."""
    samples = {m: rho_samples(_details(sc["rho"])) for m, sc in sorted(models.items())
               if sc.get("rho")}
    samples = {m: s for m, s in samples.items() if s}
    if not samples:
        return []
    cycle = _cycle(models, sorted(samples))
    parts = {m: _cost_part(s, cycle) for m, s in samples.items()}
    texts = {m: f"{m}: {100 * p.stats()['d']:+.1f} points over "
                f"{int(p.stats()['n'])} repeats: {p(SIDE)}" for m, p in parts.items()}
    n_hold = sum(p(SIDE) == HOLDS for p in parts.values())
    n = max(len(s) for s in samples.values())
    return [_row(PAPER, "E[AccI] > E[AccX]: unseen sources cost accuracy",
                 "holds for every model and data set (Figures 5-8)", dataset,
                 f"AccI - AccX shown above 0 for {n_hold} of {len(parts)} models",
                 decide_parts(list(parts.values())),
                 "; ".join(texts.values()) + " (paired by repeat, robench.stats.paired; every "
                 "model at one-sided 0.025: intersection-union)", texts,
                 _cost_control(n, cycle), parts_need(list(parts.values())))]


def _equivalence_claims(dataset: str, models: dict) -> list:
    """Return the row "E[AccI] ~ E[Acc]": a random split behaves like the inclusive one."""
    pairs = {m: (sc.get("acc_inclusive"), sc.get("acc_random")) for m, sc in models.items()
             if sc.get("acc_inclusive") or sc.get("acc_random")}
    if not pairs:
        return []
    eq = {m: _equivalent(*p) for m, p in pairs.items()}
    verdict = decide_parts([_equivalence_part(*p) for p in pairs.values()], alpha=0.05)
    n_hold = sum(v == HOLDS for v, _, _ in eq.values())
    example = next((f"{m}: {w}" for m, (v, w, _) in sorted(eq.items()) if v != HOLDS),
                   next(iter(sorted(eq.items())))[1][1])
    return [_row(
        PAPER, "E[AccI] ~ E[Acc]: a random split measures the inclusive accuracy "
               f"(equal within ±{100 * EQUIVALENCE_MARGIN:g} point)",
        "E[AccI] approximately equal to E[Acc] if the data set is large enough (section 4)",
        dataset, f"equivalent within ±{100 * EQUIVALENCE_MARGIN:g} point for {n_hold} of "
                 f"{len(eq)} models", verdict,
        "two one-sided tests (90% Welch interval of E[AccI] - E[Acc] inside the margin for "
        "every model: intersection-union; outside it for some model at 0.05 / models: "
        "Bonferroni; the partitions are drawn independently); " + example,
        {m: w for m, (_, w, _) in eq.items()}, _shifted_equivalence_control(models, verdict),
        _max_need([r for v, _, r in eq.values() if v == UNDECIDED]))]


def _shifted_equivalence_control(models: dict, verdict: str) -> Control:
    """Return the equivalence's control: E[Acc] moved by twice the margin, or for a "does not
    hold" recentred on E[AccI] (docs/claims.md)."""
    parts = []
    for sc in models.values():
        rnd, inc = sc.get("acc_random"), sc.get("acc_inclusive")
        per, per_i = _per_repeat(rnd), _per_repeat(inc)
        if per and per_i:
            shift = (sum(per_i) / len(per_i) - sum(per) / len(per) if verdict == FAILS
                     else -2 * EQUIVALENCE_MARGIN)
            parts.append(_equivalence_part(inc, {**rnd, "details": {
                **rnd["details"], "per_repeat": [v + shift for v in per]}}))
    verdicts = [p(0.05) for p in parts]
    v = decide_parts(parts, alpha=0.05) if parts else None
    what = ("E[Acc] recentred on E[AccI]" if verdict == FAILS
            else f"E[Acc] moved by {200 * EQUIVALENCE_MARGIN:g} points")
    return Control(what, v, f"{sum(x == HOLDS for x in verdicts)} of {len(verdicts)} models "
                            "equivalent" if verdicts else "no per-repeat accuracies",
                   size="the row's repeats (its stored values moved: one deterministic draw)")


def _details(row: Optional[dict]) -> dict:
    d = (row or {}).get("details")
    return d if isinstance(d, dict) else {}


def _per_repeat(row: Optional[dict]):
    return _details(row).get("per_repeat")


def _cycle(models: dict, order: list):
    """Return the balanced design's cycle shared by the models' rho scores (None if any
    lacks it: independent repeats)."""
    cycles = {(_details(models[m].get("rho")).get("held_out") or {}).get("cycle") for m in order}
    cycle = cycles.pop() if len(cycles) == 1 else None
    return cycle if isinstance(cycle, int) and cycle >= 2 else None


def _by_repeat(row: Optional[dict]) -> dict:
    """Return {repeat: value} of an accuracy row (empty without repeat indices)."""
    d = _details(row)
    vals, reps = d.get("per_repeat") or [], d.get("repeats") or []
    if len(vals) != len(reps):
        return {}
    return {r: v for r, v in zip(reps, vals) if r is not None and v is not None}


def _exclusive_claims(dataset: str, models: dict) -> list:
    """Return section 5.1's claims on AccX: it spreads more than AccI, and it rises with
    capacity (:func:`_chain_claim`)."""
    pairs = {m: (_per_repeat(sc.get("acc_exclusive")), _per_repeat(sc.get("acc_inclusive")))
             for m, sc in sorted(models.items())}
    res = {m: (_spread_part(x, i), sd_ratio_independent(x, i), len(x))
           for m, (x, i) in pairs.items() if x and i}
    out = []
    if res:
        texts = {m: f"{m}: {s['reason']}" if s["low"] is None else
                 f"{m}: {s['ratio']:.2f} [{s['low']:.2f}, {s['high']:.2f}]: {p(SIDE)}"
                 for m, (p, s, _) in res.items()}
        needs = [None if s["low"] is None else repeats_needed(
            k, (math.log(s["high"]) - math.log(s["low"])) / 2, math.log(s["ratio"]))
            for p, s, k in res.values() if s["low"] is None or p(SIDE) == UNDECIDED]
        n_hold = sum(p(SIDE) == HOLDS for p, _, _ in res.values())
        out.append(_row(
            PAPER, "AccX spreads far more than AccI: sd(AccX) / sd(AccI) > 1",
            "AccI narrowly dispersed, AccX significantly wider (section 5.1, Figure 3)",
            dataset, "; ".join(texts.values()), decide_parts([p for p, _, _ in res.values()]),
            f"{n_hold} of {len(res)} models have the ratio's interval above 1 (Miller's "
            "jackknife over repeats, 95%; every model: intersection-union; its level on "
            f"skewed repeats is {SPREAD_LEVEL:g}, not 0.05)", texts,
            _spread_control(max(k for *_, k in res.values())), _max_need(needs),
            level=SPREAD_LEVEL))
    return out + _chain_claim(
        dataset, models, "acc_exclusive", "E[AccX]",
        "SVM 80.3% < MLP 87.9% < CNN-1 94.1% < CNN-2 97.1% < CNN-3 98.0% on MNIST with "
        "k-means sources (Table 1; section 5.1)", _by_repeat, percent=True)


#: Familywise error rate of the adequacy claim's per-model calls (Bonferroni over the models).
ADEQUACY_ALPHA = 0.05


def adequacy_decisions(x_full, i_full, x_small, i_small, alpha: float = ADEQUACY_ALPHA) -> dict:
    """Return the paired decisions "rho at the full size > rho at the smallest", vectorised.

    Inputs have shape (..., M, R): per model and repeat index, the exclusive (x) and
    inclusive (i) accuracy at the full and the smallest size, NaN where missing. Each model's
    interval (:func:`robench.stats.sequential.paired_difference`, over the repeats complete at
    both sizes) is at ``1 - alpha / m`` for the m models with at least 2 such repeats
    (Bonferroni; docs/adequacy.md has the argument). Returns arrays over (..., M): ``d``,
    ``low``, ``high``, ``se``, ``n`` (shared repeats), ``level``, ``status`` (1 holds, -1 does
    not hold, 0 undecided), and ``tests`` (m, over (...)).
    """
    xf, if_, xs, is_ = (np.asarray(v, float) for v in (x_full, i_full, x_small, i_small))
    ok = np.isfinite(xf) & np.isfinite(if_) & np.isfinite(xs) & np.isfinite(is_)
    tests = (ok.sum(-1) >= 2).sum(-1)
    level = 1.0 - alpha / np.maximum(tests, 1)[..., None]
    pd = paired_difference(xf, if_, xs, is_, level)
    with np.errstate(invalid="ignore"):
        status = np.where(pd["low"] > 0, 1, np.where(pd["high"] < 0, -1, 0))
    return {**pd, "level": np.broadcast_to(level, status.shape), "status": status,
            "tests": tests}


def _adequacy_table(rows: list) -> dict:
    """Return {dataset: {model: {score: row}}} of the adequacy rows, one clusterer per model
    (a decision pairs one clusterer's accuracies): k-means where stored, else the first."""
    found: dict = {}
    for r in rows:
        if r.get("metric") != "adequacy" or "@" not in str(r.get("score", "")):
            continue
        found.setdefault(r["dataset"], {}).setdefault(r["model"], {}).setdefault(
            r.get("clusterer") or "", {})[r["score"]] = r
    return {d: {m: by["kmeans"] if "kmeans" in by else by[min(by)] for m, by in models.items()}
            for d, models in found.items()}


def _decide_paired(paired: dict) -> tuple:
    """Return (m, {model: (verdict, why, figure, repeats needed, evidence)}) of the models
    whose rows carry repeat indices: ``paired`` maps a model to (smallest size label,
    [x_full, i_full, x_small, i_small] as {repeat: accuracy})."""
    names = sorted(paired)
    common = [sorted(set.intersection(*(set(b) for b in paired[m][1]))) for m in names]
    arr = np.full((4, len(names), max([len(c) for c in common] + [1])), np.nan)
    for j, (m, reps) in enumerate(zip(names, common)):
        for k, values in enumerate(paired[m][1]):
            arr[k, j, :len(reps)] = [values[r] for r in reps]
    dec = adequacy_decisions(*arr)  # Bonferroni over the models: "does not hold"
    # "holds" needs every model: an intersection-union test, each model at 95% (one-sided
    # 2.5%) with no correction (alpha x tests makes adequacy_decisions' level 0.95)
    iut = adequacy_decisions(*arr, alpha=ADEQUACY_ALPHA * max(int(dec["tests"]), 1))
    out = {}
    for j, m in enumerate(names):
        d, lo, hi = (float(dec[key][j]) for key in ("d", "low", "high"))
        n, level = int(dec["n"][j]), float(dec["level"][j])
        label = f"rho(full) - rho(n={paired[m][0]})"
        ev = {"rule": "paired", **{k: v if math.isfinite(v) else None for k, v in (
            ("difference", d), ("low", lo), ("high", hi))}, "n": n, "level": level}
        if not math.isfinite(lo):
            why = (f"{n} shared repeat(s): a paired interval needs 2" if n < 2
                   else "no spread in the paired differences")
            value = f" {d:+.3f}" if math.isfinite(d) else ""
            out[m] = (UNDECIDED, f"{label}{value}, no interval ({why})",
                      f", paired difference{value} (no interval)", None, ev)
            continue
        text = f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] over {n} shared repeats"
        verdict = (FAILS if int(dec["status"][j]) == -1 else
                   HOLDS if int(iut["status"][j]) == 1 else UNDECIDED)
        need = (n_for_power(d, float(dec["se"][j]) * math.sqrt(n), n + 1,
                            (1 - level) / 2) if verdict == UNDECIDED else None)
        out[m] = (verdict, f"{label} {text}", f", paired difference {text}", need, ev)
    return int(dec["tests"]), out


def _adequacy_control(paired: dict):
    """Return the adequacy claim's control: the same paired decision with the two sizes'
    labels shuffled within each repeat (a training size that changes nothing)."""
    if not paired:
        return Control("sizes shuffled within repeats", None,
                       "no repeat indices stored (marginal rule): nothing to shuffle")
    rng = np.random.default_rng(0)
    verdicts = []
    for _ in range(CONTROL_REPLICATES):
        shuffled = {}
        for m, (small, (xf, if_, xs, is_)) in paired.items():
            xf2, if2, xs2, is2 = dict(xf), dict(if_), dict(xs), dict(is_)
            for r in set(xf) & set(if_) & set(xs) & set(is_):
                if rng.random() < 0.5:
                    xf2[r], xs2[r], if2[r], is2[r] = xs[r], xf[r], is_[r], if_[r]
            shuffled[m] = (small, [xf2, if2, xs2, is2])
        _, dec = _decide_paired(shuffled)
        verdicts.append(_combine([d[0] for d in dec.values()]))
    return matched("the two sizes shuffled within each repeat", verdicts, "shuffles",
                   size="the row's repeats")


def adequacy_claims(rows: list) -> list:
    """Return per data set: rho at the full training size exceeds rho at the smallest size
    (:func:`adequacy_decisions`; before version 3 by marginal intervals: docs/adequacy.md)."""
    claims = []
    for dataset, models in sorted(_adequacy_table(rows).items()):
        paired, res = {}, {}
        for model, scores in sorted(models.items()):
            sizes = sorted((s.split("@", 1)[1] for s in scores if s.startswith("rho@")),
                           key=lambda v: float("inf") if v == "full" else float(v))
            if len(sizes) < 2 or "full" not in sizes:
                continue
            small = sizes[0]
            full_row, small_row = scores["rho@full"], scores[f"rho@{small}"]
            figure = f"{model}: n={small} {fmt(small_row)} -> full {fmt(full_row)}"
            # [x_full, i_full, x_small, i_small] as {repeat: accuracy}; empty before version 3
            by = [_by_repeat(scores.get(f"acc_{kind}@{label}"))
                  for label in ("full", small) for kind in ("exclusive", "inclusive")]
            if all(by):
                paired[model], res[model] = (small, by), figure
                continue
            verdict, why = compare(full_row, small_row)
            res[model] = (verdict, "marginal intervals (no repeat indices stored: adequacy "
                                   f"scores before version 3; rescore them): {why}", figure,
                          repeats_to_separate(full_row, small_row) if verdict == UNDECIDED
                          else None, {"rule": "marginal", "why": why})
        if not res:
            continue
        tests, decided = _decide_paired(paired) if paired else (0, {})
        for m, (verdict, why, suffix, need, ev) in decided.items():
            res[m] = (verdict, why, res[m] + suffix, need, ev)
        verdict = _combine([r[0] for r in res.values()])
        rule = []
        if paired:
            rule.append(
                "paired by repeat (every size of a repeat is tested on its partitions): the "
                "difference of the two ratios of means, delta-method interval (skewness-"
                "corrected); holds: every model's 95% interval above 0 (intersection-union); "
                f"does not hold: a model's {100 * (1 - ADEQUACY_ALPHA / max(tests, 1)):.4g}% "
                f"interval below 0 (Bonferroni over {tests} model(s))")
        if len(paired) < len(res):
            rule.append(f"{len(res) - len(paired)} model(s) by the overlap of marginal "
                        "intervals (stored without repeat indices)")
        claims.append(_row(
            PAPER, "rho rises with the training size (dataset adequacy)",
            "CNN-1 on MNIST: 0.85 at 100 samples to 0.96 at ~56K (Table 2-3, Figure 8)",
            dataset, "; ".join(r[2] for _, r in sorted(res.items())), verdict,
            f"{sum(r[0] == HOLDS for r in res.values())} of {len(res)} models have rho at the "
            "full size decidedly above the smallest size's (" + "; ".join(rule) + ")"
            + "".join(f"; {m}: {r[1]}" for m, r in sorted(res.items()) if r[0] != HOLDS),
            {m: r[4] for m, r in res.items()}, _adequacy_control(paired),
            _max_need([r[3] for r in res.values() if r[0] == UNDECIDED])))
    return claims


#: The corrected batch estimator counts as unbiased when its mean error is equivalent to 0
#: within this margin (0.01 = 1 accuracy point; two one-sided tests).
UNBIASED_WITHIN = 0.01
LOST = "Lost test set (blog post, corrected)"
_PLANTED = "binomial batches with the test set planted (the post's assumption)"


def _interval_row(estimate, low, high) -> dict:
    return {"value": estimate, "ci_low": low, "ci_high": high}


def _tost_zero(errors: list, what: str) -> tuple:
    """Return (verdict, why, row, repeats): "the mean error is within ±UNBIASED_WITHIN" (TOST)."""
    res = equivalence(errors, [0.0] * len(errors), UNBIASED_WITHIN, paired=True)
    row = _interval_row(res["estimate"], res["low"], res["high"])
    if res["low"] is None:
        return UNDECIDED, f"no interval: {res['reason']}", row, None
    verdict, why, need = _tost(
        res, f"{what}: 90% [{100 * res['low']:+.2f}, {100 * res['high']:+.2f}] points",
        f"±{100 * UNBIASED_WITHIN:g} point", " (two one-sided tests)")
    return verdict, why, row, need


def _error_rule(key: str):
    """Return the rule "E[key - a] is within ±UNBIASED_WITHIN" of a control's trials."""
    return lambda trials: _tost_zero([t[key] - t["true_accuracy"] for t in trials], "e")[0]


def _blog(trials: list) -> tuple:
    """Return (verdict, error row) of "the printed formula is biased": a t interval of its
    mean error excluding 0."""
    iv = mean_interval([t["blog_alpha_in"] - t["true_accuracy"] for t in trials
                        if t.get("blog_alpha_in") is not None])
    return (UNDECIDED if iv.low is None else HOLDS if (iv.high < 0 or iv.low > 0) else FAILS,
            _interval_row(iv.estimate, iv.low, iv.high))


def lost_test_claims(rows: list) -> list:
    """Return per data set the lost-test claims of the post, decided on the stored trials'
    simulated batches (docs/lost-test-set.md gives the rules; docs/claims.md the controls)."""
    per: dict = {}
    for r in rows:
        if r.get("metric") == "lost-test" and r.get("score") == "true_accuracy":
            per.setdefault(r["dataset"], []).extend(
                t for t in ((r.get("details") or {}).get("trials") or [])
                if t.get("alpha_in") is not None)
    claims = []
    for dataset, trials in sorted((d, t) for d, t in per.items() if t):
        n = len(trials)
        verdict, why, ok, need = _tost_zero([t["alpha_in"] - t["true_accuracy"]
                                             for t in trials], "mean error")
        claims.append(_row(
            LOST, "the corrected estimator k·(a_hat - p(1 - 1/k)) is unbiased for the test "
                  f"accuracy (within ±{100 * UNBIASED_WITHIN:g} point)",
            "the post derives E[a_hat] = a/k + p(1 - 1/k)", dataset,
            f"mean error {_points(ok)} (90%) over {n} trials (simulated batches)", verdict, why,
            {"error": ok}, _lost_control(_error_rule("alpha_in"), _PLANTED, True, trials=n),
            need))
        verdict, blog = _blog(trials)
        lo, hi = blog["ci_low"], blog["ci_high"]
        why = ("no interval (too few trials or no spread)" if lo is None else
               f"[{100 * lo:+.1f}, {100 * hi:+.1f}] points " + (
                   "excludes 0: its expectation is a/k², not a" if verdict == HOLDS
                   else "contains 0"))
        claims.append(_row(
            LOST, "the post's printed formula (1/k)·(a_hat - p(1 - 1/k)) is biased",
            "printed as the estimator of a", dataset,
            f"mean error {_points(blog)} over {n} trials", verdict, why, {"error": blog},
            _lost_control(lambda t: _blog(t)[0], _PLANTED, True, trials=n)))
        claims.extend(_realistic_claims(dataset, trials))
    return claims


def lost_null(seed: int, trials: int = 40, k: int = 10, gap: float = 0.02, batch: int = 100,
              sims: int = 200, planted: bool = True) -> list:
    """Return simulated lost-test trials where the post's model is exactly true (controls): a ~
    U(0.8, 0.95), p = a + gap, ``sims`` sets of k binomial batches, the test set ``planted``."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.8, 0.95, trials)
    p = np.minimum(a + gap, 1.0)
    # a set's random batches together: one binomial of their summed size (the same law)
    drawn = k - 1 if planted else k
    hits = rng.binomial(drawn * batch, p[:, None], (trials, sims))
    a_hat = (hits / batch + (a[:, None] if planted else 0.0)) / k
    alpha = k * (a_hat - p[:, None] * (1 - 1 / k))
    below = (a_hat < a[:, None]).mean(1)
    return [{"true_accuracy": float(a[t]), "whole_data_accuracy": float(p[t]), "k": k,
             "n_sims": sims, "alpha_in": float(alpha[t].mean()),
             "alpha_out": float(alpha[t].mean()),
             "blog_alpha_in": float((alpha[t] / k ** 2).mean()),
             "a_hat_in": float(a_hat[t].mean()), "a_hat_in_below_a": float(below[t])}
            for t in range(trials)]


def _lost_control(rule, what: str, algebra: bool, trials: int = 40, **kw):
    """Return the control of ``rule`` (trials -> verdict) on simulations of the row's trials."""
    verdicts = [rule(lost_null(seed, trials=trials, **kw)) for seed in range(CONTROL_REPLICATES)]
    return matched(what, verdicts, "simulations", algebra=algebra, size=f"{trials} trials")


#: One-sided level of each side of the "E[a_hat] >= a" rule's interval: 99%, since 95% made
#: 4.0% wrong calls on log-normal gaps at 15 trials (docs/claims.md).
UPPER_BOUND_SIDE = 0.005


def upper_bound_rule(gaps, side: float = UPPER_BOUND_SIDE) -> tuple:
    """Return (verdict, interval) of "E[a_hat] >= a" from per-trial gaps a_hat - a: the mean
    gap's skewness-corrected t interval at ``1 - 2 side`` above 0 holds, below 0 does not
    (docs/claims.md says why not the post's counterexample rule)."""
    gaps = [float(g) for g in gaps if g is not None]
    iv = difference_interval(gaps, [0.0] * len(gaps), 1 - 2 * side, paired=True)
    return _side(iv, 0), iv


def _upper_bound_control(gaps: list, verdict: str):
    """Return the control of "E[a_hat] >= a": the stored gaps with their mean mirrored about
    0, resampled with replacement (docs/claims.md)."""
    g = np.asarray(gaps, float)
    moved = g - 2 * g.mean()
    rng = np.random.default_rng(0)
    verdicts = [upper_bound_rule(rng.choice(moved, len(moved)))[0]
                for _ in range(CONTROL_REPLICATES)]
    what = ("below 0 (E[a_hat] < a: the claim false)" if verdict != FAILS
            else "above 0 (E[a_hat] > a: the claim true)")
    return matched(f"the stored gaps with their mean mirrored {what}", verdicts, "resamples",
                   size=f"{len(g)} trials")


def _realistic_claims(dataset: str, trials: list) -> list:
    """Return the realistic case (alpha estimates p, not a) and "a_hat >= a" rows."""
    out = []
    real = [t for t in trials if t.get("alpha_out") is not None
            and t.get("whole_data_accuracy") is not None]
    if real:
        verdict, why, err, need = _tost_zero([t["alpha_out"] - t["true_accuracy"] for t in real],
                                             "alpha - a")
        err_p = _tost_zero([t["alpha_out"] - t["whole_data_accuracy"] for t in real],
                           "alpha - p")[2]
        out.append(_row(
            LOST, "the corrected estimator recovers the test accuracy in the realistic case "
                  "(the test set is not among the k random batches)",
            "claimed unbiased for a, assuming k is large enough for the real test set to be "
            "among the batches", dataset,
            f"alpha - a {_points(err)}; alpha - p {_points(err_p)} (90%, {len(real)} trials): "
            "it estimates p, the whole data set's accuracy", verdict,
            why + "; without the test set among the batches E[a_hat] = p, so E[alpha] = p",
            {"error_vs_a": err, "error_vs_p": err_p},
            # a "holds" is checked where p lies 2 margins above a (the claim false), else p = a
            _lost_control(_error_rule("alpha_out"), "binomial batches, test set not among "
                          "them, whole-data accuracy " + (
                              f"p = a + {200 * UNBIASED_WITHIN:g} points (the claim false)"
                              if verdict == HOLDS
                              else "p = a (no generalisation gap: the claim true)"), False,
                          trials=len(real), planted=False,
                          gap=2 * UNBIASED_WITHIN if verdict == HOLDS else 0.0), need))
    sims = [t for t in trials if t.get("a_hat_in") is not None]
    return out + ([_upper_bound_claim(dataset, sims)] if sims else [])


def _upper_bound_claim(dataset: str, sims: list) -> Claim:
    """Return the row "E[a_hat] >= a", decided by :func:`upper_bound_rule`."""
    k = sims[0].get("k")
    below = [t.get("a_hat_in_below_a") for t in sims]
    n_sims = sum(int(t.get("n_sims") or 0) for t in sims)
    gaps = [t["a_hat_in"] - t["true_accuracy"] for t in sims]
    verdict, iv = upper_bound_rule(gaps)
    figure = (f"mean a_hat - a {_points(_interval_row(iv['estimate'], iv['low'], iv['high']))}"
              f" over {len(sims)} trials")
    if all(b is not None for b in below):
        n_below = sum(round(b * int(t.get("n_sims") or 0)) for b, t in zip(below, sims))
        figure += f"; a_hat < a in {n_below} of {n_sims} simulated sets (batch noise)"
    else:
        n_below = sum(g < 0 for g in gaps)
    why = (f"the mean gap's skewness-corrected {100 * (1 - 2 * UPPER_BOUND_SIDE):g}% "
           "interval (each wrong call at most 2.5%, pinned on skewed gaps) "
           + {HOLDS: "lies above 0", FAILS: "lies below 0"}.get(verdict, "contains 0")
           + "; a statement about E[a_hat] (E[a_hat] - a = (1 - 1/k)(p - a)): single sets "
             "with a_hat < a come from batch sampling noise alone and refute nothing")
    need = None if iv["low"] is None else repeats_needed(
        len(gaps), (iv["high"] - iv["low"]) / 2, iv["estimate"], side=UPPER_BOUND_SIDE)
    return _row(
        LOST, "E[a_hat] >= a: the batch estimate is an upper bound on the test accuracy "
              "(in expectation, over the trials)",
        "'As Delta a >= 0, we have a_hat >= a, so the estimator yields an upper bound on the "
        "true accuracy' (the post)", dataset, figure + (f" (k = {k})" if k else ""), verdict,
        why, {"below": n_below, "mean_gap": iv["estimate"], "low": iv["low"],
              "high": iv["high"]}, _upper_bound_control(gaps, verdict), need)


def _points(row: dict) -> str:
    """Return "+0.12 points [-0.30, +0.54]" of an error row in accuracy points."""
    if row.get("value") is None:
        return "-"
    out = f"{100 * row['value']:+.2f} points"
    if row.get("ci_low") is not None:
        out += f" [{100 * row['ci_low']:+.2f}, {100 * row['ci_high']:+.2f}]"
    return out
