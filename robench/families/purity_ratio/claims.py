"""The clusterability paper's claims, decided on stored purity-ratio scores (robench.stats.claims).

Every claim here rests on correlations across the data set's zoo of models (8 in the quick
and standard profiles): a single correlation gets Fisher's z interval; "indicator A predicts
robustness better than indicator B" compares two correlations that share the robustness
variable over the same models, so it gets a test for dependent correlations
(:func:`robench.stats.jackknife.dependent_correlations`: the Fisher-z difference jackknifed
over models), never two independent intervals. What decides an undecided row is more models
(the unit of these intervals), not more repeats.
"""

from __future__ import annotations

import math
from typing import Optional

from robench.families.purity_ratio.metric import r_interval
from robench.stats.claims import FAILS, HOLDS, MORE_MODELS, UNDECIDED, Claim
from robench.stats.claims import combine as _combine

PAPER = "Feature-space clusterability (Ho et al.)"
#: The target the headline claims are decided on: corruption robustness over all severities.
TARGET = "corruption"
#: The paper's figures for the adversarial correlations (R^2 of eq. 10's indicator, section
#: 4.5, Figure 7), by robench's attack names.
ADVERSARIAL = {"deepfool": ("DeepFool", "R^2 = 0.66"), "fgsm": ("FGSM", "R^2 = 0.44"),
               "pgd": ("PGD", "R^2 = 0.44")}


def models_to_decide(r, level: float = 0.95) -> Optional[int]:
    """Return the models at which Fisher's interval of this r would exclude 0, or None."""
    from scipy import stats

    if r is None or not 0 < abs(r) < 1:
        return None
    z = float(stats.norm.ppf(0.5 + level / 2))
    return math.floor(3 + (z / math.atanh(abs(r))) ** 2) + 1


def _r_text(r, n) -> str:
    lo, hi = r_interval(r, n)
    return f"r = {r:+.2f}" + ("" if lo is None else f" [{lo:+.2f}, {hi:+.2f}]")


def _points(rows: list, dataset: str, indicator: str, target: str) -> dict:
    """Return {model: (indicator oriented as validated, robustness)} of a validation row."""
    from robench.families.purity_ratio.metric import INDICATORS

    sign = INDICATORS.get(indicator, 1)
    for r in rows:
        if (r.get("dataset") == dataset and r.get("model") == "zoo"
                and r.get("score") == f"r|{indicator}|{target}"):
            return {p[0]: (sign * float(p[1]), float(p[2]))
                    for p in ((r.get("details") or {}).get("points") or [])
                    if p[1] is not None and p[2] is not None}
    return {}


def _better(rows: list, dataset: str, a: str, b: str, target: str = TARGET) -> tuple:
    """Return (verdict, text, evidence, would_decide) of "a predicts target better than b"."""
    from robench.stats.equivalence import repeats_to_decide
    from robench.stats.jackknife import dependent_correlations

    pa, pb = _points(rows, dataset, a, target), _points(rows, dataset, b, target)
    common = sorted(set(pa) & set(pb))
    if len(common) < 4:
        return (UNDECIDED, f"{a} vs {b}: {len(common)} models with both (needs 4)", {},
                MORE_MODELS)
    res = dependent_correlations([pa[m][1] for m in common], [pa[m][0] for m in common],
                                 [pb[m][0] for m in common])
    text = (f"{a} r = {res['r1']:+.2f} vs {b} r = {res['r2']:+.2f} (r between them "
            f"{res['r12']:+.2f}, {res['n']} models)")
    ev = {k: res.get(k) for k in ("r1", "r2", "r12", "n", "estimate", "low", "high")}
    if res["low"] is None:
        return UNDECIDED, f"{text}: {res['reason']}", ev, MORE_MODELS
    iv = f"Fisher-z difference {res['estimate']:+.2f} [{res['low']:+.2f}, {res['high']:+.2f}]"
    if res["low"] > 0:
        return HOLDS, f"{text}; {iv} lies above 0", ev, ""
    if res["high"] < 0:
        return FAILS, f"{text}; {iv} lies below 0", ev, ""
    need = repeats_to_decide(res["estimate"], res["sd"], res["n"], 0.95)
    return (UNDECIDED, f"{text}; {iv} contains 0", ev,
            MORE_MODELS + (f" (about {need} at this difference and spread)" if need else ""))


def purity_claims(rows: list) -> list:
    """Return per data set the clusterability claims: the relation, its baselines, eq. 10,
    and the adversarial correlations.

    The relation holds when r's Fisher interval lies above 0 and Kendall's tau is positive;
    it does not hold when the interval lies below 0 (reversed); undecided when it contains 0
    or is missing. "Beats" claims: :func:`_better` (dependent correlations, jackknife over
    models), the paper's baseline (Delta) and robench's added one (model accuracy) in
    separate rows.
    """
    claims = []
    for r in sorted(rows, key=lambda r: r["dataset"]):
        if r.get("model") != "zoo" or r.get("score") != "validation_holds":
            continue
        dataset = r["dataset"]
        d = r.get("details") or {}
        r_, tau, n = d.get("r"), d.get("tau"), d.get("n")
        lo, hi = r_interval(r_, n)
        figure = ("-" if r_ is None else _r_text(r_, n)
                  + (f", tau = {tau:+.2f}" if tau is not None else "") + f" over {n} models")
        decide = ""
        if r_ is None or tau is None:
            verdict, why = UNDECIDED, d.get("reason") or "no validation"
            decide = MORE_MODELS
        elif lo is None:
            verdict, why = UNDECIDED, f"no interval for r at {n} models (Fisher's needs 4)"
            decide = MORE_MODELS
        elif lo > 0 and (tau or 0) > 0:
            verdict, why = HOLDS, f"r's interval [{lo:+.2f}, {hi:+.2f}] lies above 0, tau > 0"
        elif hi < 0:
            verdict, why = FAILS, f"r's interval [{lo:+.2f}, {hi:+.2f}] lies below 0: reversed"
        else:
            verdict, why = UNDECIDED, (f"r's interval [{lo:+.2f}, {hi:+.2f}] contains 0 at "
                                       f"{n} models")
            need = models_to_decide(r_)
            decide = MORE_MODELS + (f" (about {need} at this r)" if need else "")
        claims.append(Claim(
            PAPER, "purity-ratio (eq. 10) rises with corruption robustness across models",
            "R^2 = 0.87 (eq. 10, Table 4 and Figure 1), tau = 0.73 (Table 5) on ImageNet-C",
            dataset, figure, verdict, why,
            {k: d.get(k) for k in ("r", "tau", "n", "baselines")}, would_decide=decide))
        for baseline, text, paper in (
                ("delta", "the class-overlap baseline Delta (the paper's)",
                 "R^2 = 0.87 vs Delta's 0.27 (Tables 3-4)"),
                ("model_acc", "model accuracy (a baseline robench adds)",
                 "- (not in the paper: robench's added baseline)")):
            verdict, why, ev, decide = _better(rows, dataset, "purity-ratio", baseline)
            claims.append(Claim(
                PAPER, f"purity-ratio predicts corruption robustness better than {text}",
                paper, dataset, why.split(";")[0], verdict,
                why + " (dependent correlations: Fisher-z difference jackknifed over models)",
                ev, would_decide=decide))
        parts = [(c,) + _better(rows, dataset, "purity-ratio", f"p_purity_{c}")
                 for c in ("kmeans", "multicut")]
        verdict = _combine([v for _, v, _, _, _ in parts])
        claims.append(Claim(
            PAPER, "eq. 10 (k-means x multicut purity) predicts corruption robustness better "
                   "than either clusterer's purity alone",
            "R^2 = 0.87 vs k-means 0.83 and multicut 0.71 (Table 4, all severities)", dataset,
            "; ".join(w.split(";")[0] for _, _, w, _, _ in parts), verdict,
            "; ".join(w for _, _, w, _, _ in parts) + " (dependent correlations, jackknife "
            "over models)", {c: ev for c, _, _, ev, _ in parts},
            would_decide="" if verdict != UNDECIDED else next(
                (dd for _, v, _, _, dd in parts if v == UNDECIDED and dd), MORE_MODELS)))
        claims.extend(_adversarial_claims(rows, dataset))
    return claims


def _adversarial_claims(rows: list, dataset: str) -> list:
    """Return per attack: purity-ratio correlates positively with adversarial robustness.

    The paper reports the correlation over a range of perturbation sizes (strong for
    moderate eps, weak at the extremes). robench decides it on every eps it measured, with
    Fisher's interval at 1 - 0.05 / (number of eps) (Bonferroni: picking the best eps
    after the fact is paid for): holds when some eps's interval lies above 0, does not
    hold when every eps's lies below 0, undecided otherwise.
    """
    by_attack: dict = {}
    for r in rows:
        score = str(r.get("score") or "")
        if (r.get("dataset") != dataset or r.get("model") != "zoo"
                or not score.startswith("r|purity-ratio|")):
            continue
        target = score.split("|", 2)[2]
        attack, _, eps = target.partition("@")
        if attack in ADVERSARIAL and eps and r.get("value") is not None:
            by_attack.setdefault(attack, []).append((float(eps), r["value"], r.get("n")))
    out = []
    for attack, entries in sorted(by_attack.items()):
        entries.sort()
        level = 1 - 0.05 / len(entries)
        ivs = [(eps, r, n) + r_interval(r, n, level) for eps, r, n in entries]
        above = [e for e in ivs if e[3] is not None and e[3] > 0]
        below = [e for e in ivs if e[4] is not None and e[4] < 0]
        if above:
            verdict, why = HOLDS, (f"at eps {', '.join(f'{e[0]:g}' for e in above)} r's "
                                   "interval lies above 0")
        elif len(below) == len(ivs):
            verdict, why = FAILS, "r's interval lies below 0 at every eps"
        else:
            verdict, why = UNDECIDED, "no eps has r's interval above 0"
        best = max(ivs, key=lambda e: e[1])
        need = models_to_decide(best[1], level) if verdict == UNDECIDED and best[1] > 0 else None
        name, figure = ADVERSARIAL[attack]
        out.append(Claim(
            PAPER, f"purity-ratio (eq. 10) correlates with robustness to {name}",
            f"{figure} for moderate eps (section 4.5, Figure 7)", dataset,
            "; ".join(f"eps {eps:g}: r = {r:+.2f}" + ("" if lo is None else
                                                     f" [{lo:+.2f}, {hi:+.2f}]")
                      for eps, r, n, lo, hi in ivs) + f" over {entries[0][2]} models",
            verdict, why + f" (Fisher's interval at {100 * level:.4g}%: Bonferroni over "
                           f"{len(ivs)} eps)",
            {f"{eps:g}": {"r": r, "n": n, "low": lo, "high": hi} for eps, r, n, lo, hi in ivs},
            would_decide="" if verdict != UNDECIDED else MORE_MODELS + (
                f" (about {need} at the best eps's r)" if need else "")))
    return out
