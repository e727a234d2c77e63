"""The shifted-CV paper's claims, decided on stored shifted-cv scores (robench.stats.claims).

Decided on the paper's own sub-domains (the ``vae-vgmm`` / ``vae-vgmm-paper`` clusterers:
a VAE and a variational Gaussian mixture per class); rows on other clusterers' sub-domains
(k-means) are kept as secondary and say so. The paper compares "the empirical mean and
standard deviation values at the last epoch" of the validation and test accuracies of the
same folds (Table I), so the drop and the spread ratio are paired by fold; pairwise fold
distances share their folds, so their ratio is jackknifed by fold. The folds of a repeat are
treated as exchangeable units (their training sets overlap; the rows say so).
"""

from __future__ import annotations

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


def _paired_gap(val: list, test: list, level: float = LEVEL) -> dict:
    return difference_interval(val, test, level, paired=True)


def _gap_text(iv: dict) -> str:
    if iv["low"] is None:
        return "no interval"
    return (f"{_pts(iv['estimate'])} points [{_pts(iv['low'])}, {_pts(iv['high'])}] over "
            f"{iv['n']} folds")


def _group(rows: list) -> dict:
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r.get("clusterer") or ""), {}).setdefault(
            r["model"], {})[r["score"]] = r
    return groups


#: Null data sets per control, each with as many folds as the row (or more): a decided row
#: is evidence only when at least 80% of them give another verdict (robench.stats.claims).
CONTROL_REPLICATES = CONTROL_DRAWS
#: Sub-domains (folds) per repeat of a null data set.
NULL_K = 5
_NULLS: dict = {}


def _null(shuffled: bool, folds: int = 2 * NULL_K, distances: bool = False) -> list:
    """Return the control's null shifted-CV results (cached) with at least ``folds`` folds:
    k-means sub-domains of i.i.d. Gaussian classes, or (``shuffled``, the oracle's
    control) random source ids; ``distances``: with the W1 matrices."""

    repeats = max(1, -(-int(folds) // NULL_K))
    key = (shuffled, repeats, distances)
    if key not in _NULLS:
        _NULLS[key] = [shifted_null(seed, k=NULL_K, repeats=repeats, shuffled=shuffled,
                                    distances=distances)
                       for seed in range(CONTROL_REPLICATES)]
    return _NULLS[key]


def _null_what(clus: str) -> str:
    if clus == "oracle":
        return "true sources shuffled (ids that carry nothing), nearest-mean model"
    return (f"{clus} stand-in: k-means sub-domains of i.i.d. Gaussian classes (no "
            "sub-domains), nearest-mean model")


def _drop_part(val, test):
    def part(level):
        iv = _paired_gap(val, test, 1 - 2 * level)
        return (UNDECIDED if iv["low"] is None else HOLDS if iv["low"] > 0
                else FAILS if iv["high"] < 0 else UNDECIDED)
    return part


#: The level of the shift-spread rule (both wrong calls together), pinned by simulation at a
#: true ratio of 1 on normal, Gamma(2), log-normal and rare-hard-source folds at 10 folds
#: (tests/stats/test_claims_power.py): the paired jackknife of the log variance ratio at 95%
#: reaches 4-6% each way on the skewed shapes; the count uses this, not the nominal 0.05.
SPREAD_LEVEL = 0.12


def _spread_part(val, test):
    def part(level):
        s = sd_ratio_paired(test, val, 1 - 2 * level)
        if s["low"] is None:
            return UNDECIDED
        return HOLDS if s["low"] > 1 else FAILS if s["high"] < 1 else UNDECIDED
    return part


def _gap_part(val, test):
    def part(level):
        e = equivalence(val, test, RANDOM_GAP_MARGIN, paired=True, alpha=2 * level)
        return {EQUIVALENT: HOLDS, NOT_EQUIVALENT: FAILS}.get(e["status"], UNDECIDED)
    return part


def _control(clus: str, kind: str, make_part, folds: int = 2 * NULL_K) -> "object":
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
    groups = _group(rows)
    claims = []
    random_done = set()
    for (dataset, clus), models in sorted(groups.items(),
                                          key=lambda g: (g[0][1] not in PAPER_CLUSTERERS, g[0])):
        primary = clus in PAPER_CLUSTERERS
        where = (f"{dataset} ({clus} sub-domains)" if primary else
                 f"{dataset} ({clus} sub-domains; secondary: not the paper's VAE+VGMM)")
        per_model = {}
        for model, sc in sorted(models.items()):
            head = sc.get(METRIC)
            if model and head:
                per_model[model] = (head.get("details") or {})
        with_random = dataset not in random_done
        fold = _fold_claims(where, per_model, clus, dataset if with_random else None)
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
    drops, spreads, gaps, random_folds = {}, {}, {}, {}
    for model, d in per_model.items():
        per = d.get("per_fold") or {}
        val, test = _last(per, "shifted")
        iv = _paired_gap(val, test)
        need = (None if iv["low"] is None else
                repeats_needed(iv["n"], (iv["high"] - iv["low"]) / 2, iv["estimate"]))
        drops[model] = (_drop_part(val, test), f"{model}: {_gap_text(iv)}", need)
        s = sd_ratio_paired(test, val)
        if s["low"] is None:
            spreads[model] = (_spread_part(val, test), f"{model}: {s.get('reason')}", None)
        else:
            spreads[model] = (_spread_part(val, test),
                              f"{model}: {s['ratio']:.1f} [{s['low']:.1f}, {s['high']:.1f}]",
                              repeats_needed(len(val), (math.log(s["high"]) - math.log(
                                  s["low"])) / 2, math.log(s["ratio"])))
        rval, rtest = _last(per, "random")
        if rval and rtest and random_dataset is not None:
            e = equivalence(rval, rtest, RANDOM_GAP_MARGIN, paired=True)
            text = (f"{model}: " + ("no interval" if e["low"] is None else
                                    f"{_pts(e['estimate'])} points, 90% [{_pts(e['low'])}, "
                                    f"{_pts(e['high'])}]"))
            gaps[model] = (_gap_part(rval, rtest), text, tost_need(e))
            random_folds[model] = (rval, rtest)
    note = " (folds treated as exchangeable units; every model at one-sided 0.025: " \
           "intersection-union)"
    rows = (
        (drops, "under shift the test folds are classified worse than validation (last-epoch "
                "validation - test accuracy > 0)",
         "about 26 points on Fashion-MNIST (Table I, last epoch)",
         "have the paired interval (validation - test by fold, 95% t) above 0",
         "shifted", _drop_part, where),
        (spreads, "test accuracy spreads more under shift: sd(test) / sd(validation) > 1 "
                  "(last epoch)", "about 14 times larger (Table I)",
         "decided above 1 (paired by fold: jackknife of the log variance ratio, 95%; its "
         f"level on skewed folds is {SPREAD_LEVEL:g}, not 0.05)",
         "shifted", _spread_part, where),
        (gaps, "under random CV test accuracy equals validation accuracy (gap within "
               f"±{100 * RANDOM_GAP_MARGIN:g} point)",
         "test accuracy almost identical to validation accuracy (Figures 3-5, CV rows)",
         "equivalent (two one-sided tests on the paired last-epoch gaps, margin "
         f"±{100 * RANDOM_GAP_MARGIN:g} point)", "random", _gap_part,
         f"{random_dataset} (random folds: the same for every clusterer)"),
    )
    out = []
    folds = max([len(_last(d.get("per_fold") or {}, "shifted")[0]) for d in per_model.values()]
                + [2])
    for parts, claim, paper_figure, rule, kind, make, place in rows:
        if not parts:
            continue
        verdict = decide_parts([p for p, _, _ in parts.values()])
        n_hold = sum(p(SIDE) == HOLDS for p, _, _ in parts.values())
        needs = [nd for p, _, nd in parts.values() if p(SIDE) == UNDECIDED]
        c = Claim(
            PAPER, claim, paper_figure, place, "; ".join(w for _, w, _ in parts.values()),
            verdict, f"{n_hold} of {len(parts)} models {rule}" + note,
            {m: w for m, (_, w, _) in parts.items()},
            would_decide="" if verdict != UNDECIDED else would(
                None if not needs or None in needs else max(needs), "folds",
                why="" if needs else "no model is undecided at 0.025 but the parts disagree"),
            level=SPREAD_LEVEL if make is _spread_part else 0.05)
        control = (_gap_control(random_folds, verdict) if kind == "random" and verdict in
                   (HOLDS, FAILS) else
                   _control("kmeans" if kind == "random" else clus, kind, make, folds))
        out.append(controlled(c, control))
    return out


def _gap_control(folds: dict, verdict: str) -> Control:
    """Return random CV's gap row's control, per direction, from its stored folds: for a
    "holds" (equivalent) the test accuracies moved down by twice the margin (the claim
    false), for a "does not hold" recentred on validation (the claim true); one
    deterministic draw."""
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


def _ratio_verdict(res: dict) -> str:
    if res["low"] is None:
        return UNDECIDED
    return HOLDS if res["low"] > 1 else FAILS if res["high"] < 1 else UNDECIDED


def _distance_claim(where: str, w: dict, clus: str = "kmeans") -> Claim:
    reps = (w.get("details") or {}).get("repeats") or []
    sh = [(e.get("shifted") or {}).get("matrix") for e in reps]
    ra = [(e.get("random") or {}).get("matrix") for e in reps]
    res = distance_ratio([m for m in sh if m], [m for m in ra if m])
    verdict = _ratio_verdict(res)
    if res["low"] is None:
        why = f"no interval: {res['reason']}"
    elif verdict == HOLDS:
        why = f"[{res['low']:.2f}, {res['high']:.2f}] lies above 1"
    elif verdict == FAILS:
        why = f"[{res['low']:.2f}, {res['high']:.2f}] lies below 1"
    else:
        why = f"[{res['low']:.2f}, {res['high']:.2f}] contains 1"
    ratio = res["ratio"] if res["ratio"] is not None else w["value"]
    figure = f"{ratio:.2f}" + ("" if res["low"] is None else
                               f" [{res['low']:.2f}, {res['high']:.2f}]")
    folds = res["folds"]
    need = (None if res["low"] is None else repeats_needed(
        max(1, len(reps)), (math.log(res["high"]) - math.log(res["low"])) / 2, math.log(ratio)))
    nulls = [distance_ratio(n["shifted"]["matrices"], n["random"]["matrices"])
             for n in _null(clus == "oracle", max(folds[0], 2), distances=True)]
    ratios = sorted(r["ratio"] for r in nulls if r["ratio"] is not None)
    control = matched(_null_what(clus) + ", W1 in the data space",
                      [_ratio_verdict(r) for r in nulls], "null data sets",
                      f"median ratio {ratios[len(ratios) // 2]:.2f}" if ratios else "",
                      size=f"{max(folds[0], 2)} folds")
    return controlled(Claim(
        PAPER, "shifted folds are farther apart than random ones (Wasserstein ratio > 1)",
        "VGMM fold distances ~0.21 vs random ~0.14 (Tables III-IV)", where,
        f"ratio of mean pairwise W1 {figure} over {folds[0]} shifted and {folds[1]} random "
        "folds", verdict,
        why + " (jackknife over folds: the distances of a repeat share their folds)",
        {"ratio": ratio, "low": res["low"], "high": res["high"]},
        would_decide="" if verdict != UNDECIDED else would(
            None if need is None else need * max(1, folds[0] // max(1, len(reps))), "folds")),
        control)


def _bayesian_claims(where: str, per_model: dict) -> list:
    """Return per architecture with both versions: the Bayesian CNN's drop ~ the plain one's."""

    out = []
    for model in sorted(per_model):
        twin = f"bayesian-{model}"
        if twin not in per_model:
            continue
        drops = {}
        for m in (model, twin):
            per = per_model[m].get("per_fold") or {}
            folds = (per_model[m].get("folds") or {}).get("shifted") or []
            val, test = _last(per, "shifted")
            drops[m] = {tuple(f): (v - t) for f, v, t in zip(folds, val, test)
                        if v is not None and t is not None}
        common = sorted(set(drops[model]) & set(drops[twin]))
        e = equivalence([drops[twin][f] for f in common], [drops[model][f] for f in common],
                        BAYESIAN_MARGIN, paired=True)
        verdict = {EQUIVALENT: HOLDS, NOT_EQUIVALENT: FAILS}.get(e["status"], UNDECIDED)
        figure = ("no interval" if e["low"] is None else
                  f"drop of {twin} - drop of {model}: {_pts(e['estimate'])} points, 90% "
                  f"[{_pts(e['low'])}, {_pts(e['high'])}] over {len(common)} shared folds")
        moved = [drops[model][f] + (e["estimate"] if verdict == FAILS else
                                    -2 * BAYESIAN_MARGIN) for f in common] \
            if e.get("estimate") is not None else []
        cv = {EQUIVALENT: HOLDS, NOT_EQUIVALENT: FAILS}.get(
            equivalence([drops[twin][f] for f in common], moved, BAYESIAN_MARGIN,
                        paired=True)["status"], UNDECIDED) if moved else None
        control = Control(("the plain drops recentred on the Bayesian ones" if verdict == FAILS
                           else f"the plain drops moved by {200 * BAYESIAN_MARGIN:g} points"),
                          cv, "the same two one-sided tests" if moved else "no interval",
                          size=f"the row's {len(common)} folds (one deterministic draw)")
        out.append(controlled(Claim(
            PAPER, f"a Bayesian CNN is as vulnerable to shift as its plain version ({twin} vs "
                   f"{model}, drops within ±{100 * BAYESIAN_MARGIN:g} points)",
            "vulnerability about the same (section V-C; Table I drops: AlexNet 24.4 vs 27.4, "
            "LeNet 26.0 vs 27.4, 3conv3fc 24.0 vs 26.8)", where, figure, verdict,
            "two one-sided tests on the per-fold difference of the last-epoch drops (the "
            f"models share the folds), margin ±{100 * BAYESIAN_MARGIN:g} points",
            {"difference": e.get("estimate"), "low": e.get("low"), "high": e.get("high")},
            would_decide="" if verdict != UNDECIDED else would(tost_need(e), "folds")),
            control))
    return out
