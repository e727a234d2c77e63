"""The shifted-CV paper's claims, decided on stored shifted-cv scores (robench.stats.claims).

Decided on the paper's own sub-domains (``vae-vgmm`` / ``vae-vgmm-paper``), paired by fold;
docs/shifted-cv.md gives the design.
"""

from __future__ import annotations

import functools
import math

from robench.families.shifted_cv.metric import METRIC
from robench.stats.claims import (CONTROL_DRAWS, FAILS, HOLDS, SIDE, UNDECIDED, Claim,
                                  Control, controlled, decide_parts, matched, repeats_needed,
                                  tost_need, would)
from robench.stats.intervals import LEVEL
from robench.stats.controls import shifted_null
from robench.stats.equivalence import EQUIVALENT, NOT_EQUIVALENT, difference_interval, equivalence
from robench.stats.jackknife import distance_ratio, sd_ratio_paired

PAPER = "Variational resampling under distribution shift (Sun et al.)"
#: The paper's sub-domain finders; rows on any other clusterer are secondary.
PAPER_CLUSTERERS = ("vae-vgmm", "vae-vgmm-paper")
#: "Almost identical" (random CV's validation vs test accuracy): within 1 accuracy point.
RANDOM_GAP_MARGIN = 0.01
#: "About the same" vulnerability (a Bayesian CNN's drop vs its plain counterpart's):
#: within 5 accuracy points, a fifth of the paper's 26-point drop.
BAYESIAN_MARGIN = 0.05


def _last(per: dict, kind: str) -> tuple:
    """Return (validation, test) accuracies of ``kind``'s folds at the last epoch."""
    k = per.get(kind) or {}
    val, test = k.get("last_val"), k.get("last_test")
    if not val or not test or all(v is None for v in val):
        return k.get("val") or [], k.get("test") or []  # stores without last-epoch figures
    return val, test


def _pts(v) -> str:
    return f"{100 * v:+.1f}"


def _side(iv: dict, bound: float) -> str:
    """Return holds (``iv``'s interval above ``bound``), does not hold (below) or undecided."""
    return (UNDECIDED if iv["low"] is None else HOLDS if iv["low"] > bound
            else FAILS if iv["high"] < bound else UNDECIDED)


def _log_need(n: int, low: float, high: float, ratio: float):
    """Return the planning figure of a ratio's interval, on the log scale it is symmetric in."""
    return repeats_needed(n, (math.log(high) - math.log(low)) / 2, math.log(ratio))


def _tost_verdict(status: str) -> str:
    return {EQUIVALENT: HOLDS, NOT_EQUIVALENT: FAILS}.get(status, UNDECIDED)


def _row(claim: str, paper_figure: str, where: str, figure: str, verdict: str, why: str,
         evidence: dict, control, need=None, why_none: str = "", **kw) -> Claim:
    """Return a claim row judged against its control; ``need`` (folds) plans an undecided one."""
    return controlled(Claim(PAPER, claim, paper_figure, where, figure, verdict, why, evidence,
                            would_decide="" if verdict != UNDECIDED else would(
                                need, "folds", why=why_none), **kw), control)


#: Null data sets per control, each with as many folds as the row or more (docs/claims.md).
CONTROL_REPLICATES = CONTROL_DRAWS
#: Sub-domains (folds) per repeat of a null data set.
NULL_K = 5


def _null(shuffled: bool, folds: int = 2 * NULL_K, distances: bool = False) -> list:
    """Return the control's null shifted-CV results with at least ``folds`` folds
    (``shuffled``: the oracle's control; ``distances``: with the W1 matrices)."""
    return _nulls(shuffled, max(1, -(-int(folds) // NULL_K)), distances)


@functools.cache
def _nulls(shuffled: bool, repeats: int, distances: bool) -> list:
    return [shifted_null(seed, k=NULL_K, repeats=repeats, shuffled=shuffled,
                         distances=distances) for seed in range(CONTROL_REPLICATES)]


def _null_what(clus: str) -> str:
    return ("true sources shuffled (ids that carry nothing), nearest-mean model"
            if clus == "oracle" else f"{clus} stand-in: k-means sub-domains of i.i.d. Gaussian "
            "classes (no sub-domains), nearest-mean model")


def _drop_part(val, test):
    return lambda level: _side(difference_interval(val, test, 1 - 2 * level, paired=True), 0)


#: The shift-spread rule's measured level (both wrong calls, skewed folds at a true ratio of
#: 1: tests/stats/test_claims_power.py; docs/claims.md), counted instead of the nominal 0.05.
SPREAD_LEVEL = 0.12


def _spread_part(val, test):
    return lambda level: _side(sd_ratio_paired(test, val, 1 - 2 * level), 1)


def _gap_part(val, test):
    return lambda level: _tost_verdict(equivalence(val, test, RANDOM_GAP_MARGIN, paired=True,
                                                   alpha=2 * level)["status"])


def _control(clus: str, kind: str, make_part, folds: int = 2 * NULL_K) -> Control:
    """Return the control of a per-model fold claim: ``make_part(val, test)`` on the null
    data sets' folds of ``kind`` (shifted or random), as many folds as the row's or more."""
    nulls = _null(clus == "oracle", folds)
    verdicts = [decide_parts([make_part(w[kind]["val"], w[kind]["test"])]) for w in nulls]
    return matched(_null_what(clus), verdicts, "null data sets",
                   size=f"{len(nulls[0][kind]['val'])} folds")


def shifted_cv_claims(rows: list) -> list:
    """Return per (data set, clusterer): the drop, the spread ratio, the fold distances and
    the Bayesian CNNs' vulnerability, the paper's sub-domains first; random CV's gap once
    per data set (the random folds do not depend on the clusterer)."""
    claims, random_done, groups = [], set(), {}
    for r in rows:
        groups.setdefault((r["dataset"], r.get("clusterer") or ""), {}).setdefault(
            r["model"], {})[r["score"]] = r
    for (dataset, clus), models in sorted(groups.items(),
                                          key=lambda g: (g[0][1] not in PAPER_CLUSTERERS, g[0])):
        where = (f"{dataset} ({clus} sub-domains)" if clus in PAPER_CLUSTERERS else
                 f"{dataset} ({clus} sub-domains; secondary: not the paper's VAE+VGMM)")
        per_model = {model: sc[METRIC].get("details") or {}
                     for model, sc in sorted(models.items()) if model and sc.get(METRIC)}
        fold = _fold_claims(where, per_model, clus,
                            dataset if dataset not in random_done else None)
        if any("random CV" in c.claim for c in fold):
            random_done.add(dataset)
        claims.extend(fold)
        w = (models.get("") or {}).get("wasserstein_ratio")
        if w and w.get("value") is not None:
            claims.append(_distance_claim(where, w, clus))
        claims.extend(_bayesian_claims(where, per_model))
    return claims


def _fold_claims(where: str, per_model: dict, clus: str = "kmeans",
                 random_dataset=None) -> list:
    drops, spreads, gaps, random_folds, folds = {}, {}, {}, {}, 2
    for model, d in per_model.items():
        per = d.get("per_fold") or {}
        val, test = _last(per, "shifted")
        folds = max(folds, len(val))
        iv = difference_interval(val, test, LEVEL, paired=True)
        need = (None if iv["low"] is None else
                repeats_needed(iv["n"], (iv["high"] - iv["low"]) / 2, iv["estimate"]))
        drops[model] = (_drop_part(val, test), f"{model}: " + (
            "no interval" if iv["low"] is None else f"{_pts(iv['estimate'])} points "
            f"[{_pts(iv['low'])}, {_pts(iv['high'])}] over {iv['n']} folds"), need)
        s = sd_ratio_paired(test, val)
        ok = s["low"] is not None
        spreads[model] = (_spread_part(val, test), f"{model}: " + (
            f"{s['ratio']:.1f} [{s['low']:.1f}, {s['high']:.1f}]" if ok else str(s.get("reason"))),
            _log_need(len(val), s["low"], s["high"], s["ratio"]) if ok else None)
        rval, rtest = _last(per, "random")
        if rval and rtest and random_dataset is not None:
            e = equivalence(rval, rtest, RANDOM_GAP_MARGIN, paired=True)
            text = (f"{model}: " + ("no interval" if e["low"] is None else
                                    f"{_pts(e['estimate'])} points, 90% [{_pts(e['low'])}, "
                                    f"{_pts(e['high'])}]"))
            gaps[model] = (_gap_part(rval, rtest), text, tost_need(e))
            random_folds[model] = (rval, rtest)
    rows = (
        (drops, "under shift the test folds are classified worse than validation (last-epoch "
                "validation - test accuracy > 0)",
         "about 26 points on Fashion-MNIST (Table I, last epoch)",
         "have the paired interval (validation - test by fold, 95% t) above 0", where,
         lambda v: _control(clus, "shifted", _drop_part, folds)),
        (spreads, "test accuracy spreads more under shift: sd(test) / sd(validation) > 1 "
                  "(last epoch)", "about 14 times larger (Table I)",
         "decided above 1 (paired by fold: jackknife of the log variance ratio, 95%; its "
         f"level on skewed folds is {SPREAD_LEVEL:g}, not 0.05)", where,
         lambda v: _control(clus, "shifted", _spread_part, folds)),
        (gaps, "under random CV test accuracy equals validation accuracy (gap within "
               f"±{100 * RANDOM_GAP_MARGIN:g} point)",
         "test accuracy almost identical to validation accuracy (Figures 3-5, CV rows)",
         "equivalent (two one-sided tests on the paired last-epoch gaps, margin "
         f"±{100 * RANDOM_GAP_MARGIN:g} point)",
         f"{random_dataset} (random folds: the same for every clusterer)",
         lambda v: (_gap_control(random_folds, v) if v in (HOLDS, FAILS)
                    else _control("kmeans", "random", _gap_part, folds))),
    )
    out = []
    for parts, claim, paper_figure, rule, place, control in rows:
        if not parts:
            continue
        verdict = decide_parts([p for p, _, _ in parts.values()])
        n_hold = sum(p(SIDE) == HOLDS for p, _, _ in parts.values())
        needs = [nd for p, _, nd in parts.values() if p(SIDE) == UNDECIDED]
        out.append(_row(
            claim, paper_figure, place, "; ".join(w for _, w, _ in parts.values()), verdict,
            f"{n_hold} of {len(parts)} models {rule} (folds treated as exchangeable units; "
            "every model at one-sided 0.025: intersection-union)",
            {m: w for m, (_, w, _) in parts.items()}, control(verdict),
            None if not needs or None in needs else max(needs),
            "" if needs else "no model is undecided at 0.025 but the parts disagree",
            level=SPREAD_LEVEL if parts is spreads else 0.05))
    return out


def _gap_control(folds: dict, verdict: str) -> Control:
    """Return random CV's gap row's control, per direction, from its stored folds: the test
    accuracies moved by twice the margin, or recentred on validation (docs/claims.md)."""
    parts = []
    for val, test in folds.values():
        pairs = [(v, t) for v, t in zip(val, test) if v is not None and t is not None]
        if not pairs:
            continue
        shift = (-2 * RANDOM_GAP_MARGIN if verdict == HOLDS
                 else sum(v - t for v, t in pairs) / len(pairs))
        parts.append(_gap_part([v for v, _ in pairs], [t + shift for _, t in pairs]))
    what = (f"the test accuracies moved by {200 * RANDOM_GAP_MARGIN:g} points (the claim false)"
            if verdict == HOLDS else "the test accuracies recentred on validation (the claim "
            "true)")
    n = max((len(v) for v, _ in folds.values()), default=0)
    return Control(what, decide_parts(parts) if parts else None,
                   "the same two one-sided tests" if parts else "no folds",
                   size=f"the row's {n} folds (its stored values moved: one deterministic draw)")


def _distance_claim(where: str, w: dict, clus: str = "kmeans") -> Claim:
    reps = (w.get("details") or {}).get("repeats") or []
    res = distance_ratio(*([m for e in reps if (m := (e.get(kind) or {}).get("matrix"))]
                           for kind in ("shifted", "random")))
    verdict, iv = _side(res, 1), res["low"] is not None
    shown = f"[{res['low']:.2f}, {res['high']:.2f}]" if iv else ""
    why = (f"{shown} " + {HOLDS: "lies above 1", FAILS: "lies below 1"}.get(verdict, "contains 1")
           if iv else f"no interval: {res['reason']}")
    ratio = res["ratio"] if res["ratio"] is not None else w["value"]
    folds, null_folds = res["folds"], max(res["folds"][0], 2)
    need = _log_need(max(1, len(reps)), res["low"], res["high"], ratio) if iv else None
    nulls = [distance_ratio(n["shifted"]["matrices"], n["random"]["matrices"])
             for n in _null(clus == "oracle", null_folds, distances=True)]
    ratios = sorted(r["ratio"] for r in nulls if r["ratio"] is not None)
    control = matched(_null_what(clus) + ", W1 in the data space",
                      [_side(r, 1) for r in nulls], "null data sets",
                      f"median ratio {ratios[len(ratios) // 2]:.2f}" if ratios else "",
                      size=f"{null_folds} folds")
    return _row(
        "shifted folds are farther apart than random ones (Wasserstein ratio > 1)",
        "VGMM fold distances ~0.21 vs random ~0.14 (Tables III-IV)", where,
        f"ratio of mean pairwise W1 {ratio:.2f}{f' {shown}' if iv else ''} over {folds[0]} "
        f"shifted and {folds[1]} random folds", verdict,
        why + " (jackknife over folds: the distances of a repeat share their folds)",
        {"ratio": ratio, "low": res["low"], "high": res["high"]}, control,
        None if need is None else need * max(1, folds[0] // max(1, len(reps))))


def _bayesian_claims(where: str, per_model: dict) -> list:
    """Return per architecture with both versions: the Bayesian CNN's drop ~ the plain one's."""
    out = []
    for model in sorted(m for m in per_model if f"bayesian-{m}" in per_model):
        twin, drops = f"bayesian-{model}", {}
        for m in (model, twin):
            folds = (per_model[m].get("folds") or {}).get("shifted") or []
            val, test = _last(per_model[m].get("per_fold") or {}, "shifted")
            drops[m] = {tuple(f): (v - t) for f, v, t in zip(folds, val, test)
                        if v is not None and t is not None}
        common = sorted(set(drops[model]) & set(drops[twin]))
        twin_drops = [drops[twin][f] for f in common]
        e = equivalence(twin_drops, [drops[model][f] for f in common], BAYESIAN_MARGIN,
                        paired=True)
        verdict = _tost_verdict(e["status"])
        figure = ("no interval" if e["low"] is None else
                  f"drop of {twin} - drop of {model}: {_pts(e['estimate'])} points, 90% "
                  f"[{_pts(e['low'])}, {_pts(e['high'])}] over {len(common)} shared folds")
        moved = [drops[model][f] + (e["estimate"] if verdict == FAILS else
                                    -2 * BAYESIAN_MARGIN) for f in common] \
            if e.get("estimate") is not None else []
        cv = _tost_verdict(equivalence(twin_drops, moved, BAYESIAN_MARGIN, paired=True)[
            "status"]) if moved else None
        control = Control(("the plain drops recentred on the Bayesian ones" if verdict == FAILS
                           else f"the plain drops moved by {200 * BAYESIAN_MARGIN:g} points"),
                          cv, "the same two one-sided tests" if moved else "no interval",
                          size=f"the row's {len(common)} folds (one deterministic draw)")
        out.append(_row(
            f"a Bayesian CNN is as vulnerable to shift as its plain version ({twin} vs "
            f"{model}, drops within ±{100 * BAYESIAN_MARGIN:g} points)",
            "vulnerability about the same (section V-C; Table I drops: AlexNet 24.4 vs 27.4, "
            "LeNet 26.0 vs 27.4, 3conv3fc 24.0 vs 26.8)", where, figure, verdict,
            "two one-sided tests on the per-fold difference of the last-epoch drops (the "
            f"models share the folds), margin ±{100 * BAYESIAN_MARGIN:g} points",
            {"difference": e.get("estimate"), "low": e.get("low"), "high": e.get("high")},
            control, tost_need(e)))
    return out
