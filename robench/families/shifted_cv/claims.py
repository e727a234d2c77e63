"""The shifted-CV paper's claims, decided on stored shifted-cv scores (robench.stats.claims)."""

from __future__ import annotations

import math

import numpy as np

from robench.families.shifted_cv.metric import METRIC
from robench.stats.claims import FAILS, HOLDS, UNDECIDED, Claim, compare, fmt
from robench.stats.claims import combine as _combine
from robench.stats.intervals import LEVEL, mean_interval, ratio_interval

PAPER = "Variational resampling under distribution shift (Sun et al.)"


def sd_ratio_interval(a: list, b: list, level: float = LEVEL) -> tuple:
    """Return (ratio, low, high): sd(a) / sd(b) with the F-distribution interval.

    The classical interval for a ratio of two normal standard deviations from independent
    samples: ``r / sqrt(F_{1-alpha/2}(n_a-1, n_b-1))`` to ``r / sqrt(F_{alpha/2}(...))``.
    (None, None, None) with fewer than two values on a side or a zero spread.
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


def _mean_row(values: list) -> dict:
    iv = mean_interval(values, bounds=(0.0, 1.0))
    return {"value": iv.estimate, "ci_low": iv.low, "ci_high": iv.high}


def _offdiagonal(matrix) -> list:
    return [v for i, row in enumerate(matrix or []) for j, v in enumerate(row)
            if i < j and v is not None]


def shifted_cv_claims(rows: list) -> list:
    """Return per (data set, clusterer): the accuracy drop, the spread ratio, the W1 ratio."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["dataset"], r.get("clusterer") or ""), {}).setdefault(
            r["model"], {})[r["score"]] = r
    claims = []
    for (dataset, clus), models in sorted(groups.items()):
        where = f"{dataset} ({clus} sub-domains)" if clus else dataset
        drops, spreads, accs = {}, {}, {}
        for model, sc in sorted(models.items()):
            head = sc.get(METRIC)
            if not model or not head:
                continue
            per = (head.get("details") or {}).get("per_fold") or {}
            sh, ra = per.get("shifted") or {}, per.get("random") or {}
            accs[model] = (_mean_row(ra.get("test") or []), _mean_row(sh.get("test") or []))
            drops[model] = compare(*accs[model])
            r, lo, hi = sd_ratio_interval(sh.get("test") or [], sh.get("val") or [])
            if r is None:
                spreads[model] = (UNDECIDED, "too few folds or no spread", r, lo, hi)
            elif lo > 1:
                spreads[model] = (HOLDS, f"{r:.1f} [{lo:.1f}, {hi:.1f}] lies above 1", r, lo,
                                  hi)
            elif hi < 1:
                spreads[model] = (FAILS, f"{r:.2f} [{lo:.2f}, {hi:.2f}] lies below 1", r, lo,
                                  hi)
            else:
                spreads[model] = (UNDECIDED, f"{r:.2f} [{lo:.2f}, {hi:.2f}] contains 1", r, lo,
                                  hi)
        if drops:
            n_hold = sum(v == HOLDS for v, _ in drops.values())
            figure = "; ".join(f"{m}: random {fmt(accs[m][0], True)} vs shifted "
                               f"{fmt(accs[m][1], True)}" for m in sorted(drops))
            claims.append(Claim(
                PAPER, "shifted folds are classified worse than random folds (accuracy drop)",
                "about 26 points lower on Fashion-MNIST (Table I, last epoch)", where, figure,
                _combine([v for v, _ in drops.values()]),
                f"{n_hold} of {len(drops)} models have the random folds' interval above the "
                "shifted folds'" + "".join(f"; {m}: {w}" for m, (v, w) in sorted(drops.items())
                                           if v != HOLDS),
                {m: w for m, (_, w) in drops.items()}))
        if spreads:
            n_hold = sum(s[0] == HOLDS for s in spreads.values())
            claims.append(Claim(
                PAPER, "test accuracy spreads more under shift: sd(shifted test) / sd(validation)"
                       " > 1",
                "about 14 times larger (Table I)", where,
                "; ".join(f"{m}: {s[1].split(' lies')[0].split(' contains')[0]}"
                          for m, s in sorted(spreads.items())),
                _combine([s[0] for s in spreads.values()]),
                f"{n_hold} of {len(spreads)} models decided above 1 (F interval of a ratio of "
                "standard deviations; folds treated as independent)",
                {m: s[1] for m, s in spreads.items()}))
        w = (models.get("") or {}).get("wasserstein_ratio")
        if w and w.get("value") is not None:
            reps = (w.get("details") or {}).get("repeats") or []
            sh = [v for e in reps for v in _offdiagonal((e.get("shifted") or {}).get("matrix"))]
            ra = [v for e in reps for v in _offdiagonal((e.get("random") or {}).get("matrix"))]
            iv = ratio_interval(sh, ra)
            if iv.low is None:
                verdict, why = UNDECIDED, f"no interval: {iv.reason}"
            elif iv.low > 1:
                verdict, why = HOLDS, f"Fieller [{iv.low:.2f}, {iv.high:.2f}] lies above 1"
            elif iv.high < 1:
                verdict, why = FAILS, f"Fieller [{iv.low:.2f}, {iv.high:.2f}] lies below 1"
            else:
                verdict, why = UNDECIDED, f"Fieller [{iv.low:.2f}, {iv.high:.2f}] contains 1"
            figure = f"{w['value']:.2f}" + ("" if iv.low is None else
                                            f" [{iv.low:.2f}, {iv.high:.2f}]")
            claims.append(Claim(
                PAPER, "shifted folds are farther apart than random ones (Wasserstein ratio > 1)",
                "VGMM fold distances larger than random ones (Tables III-IV)", where,
                f"ratio of mean pairwise W1 {figure} over {len(sh)} fold pairs", verdict,
                why + " (pairwise distances treated as independent)",
                {"ratio": w["value"], "low": iv.low, "high": iv.high}))
    return claims
