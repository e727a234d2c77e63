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

import numpy as np

from robench.families.shifted_cv.metric import METRIC
from robench.stats.claims import FAILS, HOLDS, MORE_REPEATS, UNDECIDED, Claim
from robench.stats.claims import combine as _combine
from robench.stats.intervals import LEVEL

PAPER = "Variational resampling under distribution shift (Sun et al.)"
#: The paper's sub-domain finders; rows on any other clusterer are secondary.
PAPER_CLUSTERERS = ("vae-vgmm", "vae-vgmm-paper")
#: "Almost identical" (random CV's validation vs test accuracy): within 1 accuracy point.
RANDOM_GAP_MARGIN = 0.01
#: "About the same" vulnerability (a Bayesian CNN's drop vs its plain counterpart's):
#: within 5 accuracy points, a fifth of the paper's 26-point drop.
BAYESIAN_MARGIN = 0.05


def sd_ratio_interval(a: list, b: list, level: float = LEVEL) -> tuple:
    """Return (ratio, low, high): sd(a) / sd(b) with the F-distribution interval.

    The classical interval for a ratio of two normal standard deviations from independent
    samples: ``r / sqrt(F_{1-alpha/2}(n_a-1, n_b-1))`` to ``r / sqrt(F_{alpha/2}(...))``.
    (None, None, None) with fewer than two values on a side or a zero spread. Not used for
    paired values (a fold's validation and test accuracy): see
    :func:`robench.stats.jackknife.sd_ratio_paired`.
    """
    from scipy import stats

    a = [float(v) for v in a if v is not None]
    b = [float(v) for v in b if v is not None]
    if len(a) < 2 or len(b) < 2:
        return None, None, None
    sa, sb = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    if sb <= 0 or not math.isfinite(sa / sb):
        return None, None, None
    r = sa / sb
    alpha = 1 - level
    hi_f = stats.f.ppf(1 - alpha / 2, len(a) - 1, len(b) - 1)
    lo_f = stats.f.ppf(alpha / 2, len(a) - 1, len(b) - 1)
    return r, r / math.sqrt(hi_f), r / math.sqrt(lo_f)


def _last(per: dict, kind: str) -> tuple:
    """Return (validation, test) accuracies of ``kind``'s folds at the last epoch."""
    k = per.get(kind) or {}
    val, test = k.get("last_val"), k.get("last_test")
    if not val or not test or all(v is None for v in val):
        return k.get("val") or [], k.get("test") or []  # stores without last-epoch figures
    return val, test


def _pts(v) -> str:
    return f"{100 * v:+.1f}"


def _paired_gap(val: list, test: list) -> dict:
    from robench.stats.equivalence import difference_interval

    return difference_interval(val, test, LEVEL, paired=True)


def _gap_text(iv: dict) -> str:
    if iv["low"] is None:
        return "no interval"
    return (f"{_pts(iv['estimate'])} points [{_pts(iv['low'])}, {_pts(iv['high'])}] over "
            f"{iv['n']} folds")


def _more(verdict: str) -> str:
    return MORE_REPEATS + " (shifted-cv repeats: more folds)" if verdict == UNDECIDED else ""


def _group(rows: list) -> dict:
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r.get("clusterer") or ""), {}).setdefault(
            r["model"], {})[r["score"]] = r
    return groups


def shifted_cv_claims(rows: list) -> list:
    """Return per (data set, clusterer): the drop, the spread ratio, random CV's gap, the
    fold distances and the Bayesian CNNs' vulnerability; the paper's sub-domains first."""
    groups = _group(rows)
    claims = []
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
        claims.extend(_fold_claims(where, per_model))
        w = (models.get("") or {}).get("wasserstein_ratio")
        if w and w.get("value") is not None:
            claims.append(_distance_claim(where, w))
        claims.extend(_bayesian_claims(where, per_model))
    return claims


def _fold_claims(where: str, per_model: dict) -> list:
    from robench.stats.equivalence import EQUIVALENT, NOT_EQUIVALENT, equivalence
    from robench.stats.jackknife import sd_ratio_paired

    drops, spreads, gaps = {}, {}, {}
    for model, d in per_model.items():
        per = d.get("per_fold") or {}
        val, test = _last(per, "shifted")
        iv = _paired_gap(val, test)
        v = (UNDECIDED if iv["low"] is None else HOLDS if iv["low"] > 0
             else FAILS if iv["high"] < 0 else UNDECIDED)
        drops[model] = (v, f"{model}: {_gap_text(iv)}")
        s = sd_ratio_paired(test, val)
        if s["low"] is None:
            spreads[model] = (UNDECIDED, f"{model}: {s.get('reason')}")
        else:
            text = f"{model}: {s['ratio']:.1f} [{s['low']:.1f}, {s['high']:.1f}]"
            spreads[model] = ((HOLDS, text) if s["low"] > 1 else (FAILS, text) if s["high"] < 1
                              else (UNDECIDED, text + " contains 1"))
        rval, rtest = _last(per, "random")
        if rval and rtest:
            e = equivalence(rval, rtest, RANDOM_GAP_MARGIN, paired=True)
            text = (f"{model}: " + ("no interval" if e["low"] is None else
                                    f"{_pts(e['estimate'])} points, 90% [{_pts(e['low'])}, "
                                    f"{_pts(e['high'])}]"))
            gaps[model] = ({EQUIVALENT: HOLDS, NOT_EQUIVALENT: FAILS}.get(e["status"], UNDECIDED),
                           text)
    note = " (folds treated as exchangeable units)"
    rows = (
        (drops, "under shift the test folds are classified worse than validation (last-epoch "
                "validation - test accuracy > 0)",
         "about 26 points on Fashion-MNIST (Table I, last epoch)",
         "have the paired interval (validation - test by fold, 95% t) above 0"),
        (spreads, "test accuracy spreads more under shift: sd(test) / sd(validation) > 1 "
                  "(last epoch)", "about 14 times larger (Table I)",
         "decided above 1 (paired by fold: jackknife of the log variance ratio, 95%)"),
        (gaps, "under random CV test accuracy equals validation accuracy (gap within "
               f"±{100 * RANDOM_GAP_MARGIN:g} point)",
         "test accuracy almost identical to validation accuracy (Figures 3-5, CV rows)",
         "equivalent (two one-sided tests on the paired last-epoch gaps, margin "
         f"±{100 * RANDOM_GAP_MARGIN:g} point)"),
    )
    out = []
    for parts, claim, paper_figure, rule in rows:
        if not parts:
            continue
        verdict = _combine([v for v, _ in parts.values()])
        n_hold = sum(v == HOLDS for v, _ in parts.values())
        out.append(Claim(
            PAPER, claim, paper_figure, where, "; ".join(w for _, w in parts.values()), verdict,
            f"{n_hold} of {len(parts)} models {rule}" + note,
            {m: w for m, (_, w) in parts.items()}, would_decide=_more(verdict)))
    return out


def _distance_claim(where: str, w: dict) -> Claim:
    from robench.stats.jackknife import distance_ratio

    reps = (w.get("details") or {}).get("repeats") or []
    sh = [(e.get("shifted") or {}).get("matrix") for e in reps]
    ra = [(e.get("random") or {}).get("matrix") for e in reps]
    res = distance_ratio([m for m in sh if m], [m for m in ra if m])
    if res["low"] is None:
        verdict, why = UNDECIDED, f"no interval: {res['reason']}"
    elif res["low"] > 1:
        verdict, why = HOLDS, f"[{res['low']:.2f}, {res['high']:.2f}] lies above 1"
    elif res["high"] < 1:
        verdict, why = FAILS, f"[{res['low']:.2f}, {res['high']:.2f}] lies below 1"
    else:
        verdict, why = UNDECIDED, f"[{res['low']:.2f}, {res['high']:.2f}] contains 1"
    ratio = res["ratio"] if res["ratio"] is not None else w["value"]
    figure = f"{ratio:.2f}" + ("" if res["low"] is None else
                               f" [{res['low']:.2f}, {res['high']:.2f}]")
    folds = res["folds"]
    return Claim(
        PAPER, "shifted folds are farther apart than random ones (Wasserstein ratio > 1)",
        "VGMM fold distances ~0.21 vs random ~0.14 (Tables III-IV)", where,
        f"ratio of mean pairwise W1 {figure} over {folds[0]} shifted and {folds[1]} random "
        "folds", verdict,
        why + " (jackknife over folds: the distances of a repeat share their folds)",
        {"ratio": ratio, "low": res["low"], "high": res["high"]},
        would_decide=_more(verdict))


def _bayesian_claims(where: str, per_model: dict) -> list:
    """Return per architecture with both versions: the Bayesian CNN's drop ~ the plain one's."""
    from robench.stats.equivalence import EQUIVALENT, NOT_EQUIVALENT, equivalence

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
        out.append(Claim(
            PAPER, f"a Bayesian CNN is as vulnerable to shift as its plain version ({twin} vs "
                   f"{model}, drops within ±{100 * BAYESIAN_MARGIN:g} points)",
            "vulnerability about the same (section V-C; Table I drops: AlexNet 24.4 vs 27.4, "
            "LeNet 26.0 vs 27.4, 3conv3fc 24.0 vs 26.8)", where, figure, verdict,
            "two one-sided tests on the per-fold difference of the last-epoch drops (the "
            f"models share the folds), margin ±{100 * BAYESIAN_MARGIN:g} points",
            {"difference": e.get("estimate"), "low": e.get("low"), "high": e.get("high")},
            would_decide=_more(verdict)))
    return out
