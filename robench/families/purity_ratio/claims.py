"""The clusterability paper's claims, decided on stored purity-ratio scores (robench.stats.claims).

Correlations across the data set's zoo of models, so more models (not repeats) decide an
undecided row; docs/claims.md ("The rule per row") gives the tests and their controls.
"""

from __future__ import annotations

import math
from typing import Optional
import numpy as np

from robench.families.purity_ratio.metric import INDICATORS
from robench.stats.claims import (CONTROL_DRAWS, FAILS, HOLDS, MORE_MODELS, POWER, SIDE,
                                  UNDECIDED, Claim, Control, controlled, controlled_all,
                                  matched, n_for_power, would)
from robench.stats.claims import combine as _combine
from robench.stats.jackknife import dependent_correlations
from robench.stats.permutation import correlation_test

#: Shuffles of a control, over the row's own models (robench.stats.claims.controlled: a decided
#: row is evidence only when at least 80% of them give another verdict).
CONTROL_SHUFFLES = CONTROL_DRAWS
#: The confounder every correlation row is checked against: model accuracy alone, as the
#: indicator, by the same rule on the same models (accurate models are robust).
CONFOUNDER = "model_acc"

PAPER = "Feature-space clusterability (Ho et al.)"
#: The target the headline claims are decided on: corruption robustness over all severities.
TARGET = "corruption"
#: The paper's figures for the adversarial correlations (R^2 of eq. 10's indicator, section
#: 4.5, Figure 7), by robench's attack names.
ADVERSARIAL = {"deepfool": ("DeepFool", "R^2 = 0.66"), "fgsm": ("FGSM", "R^2 = 0.44"),
               "pgd": ("PGD", "R^2 = 0.44")}


def models_to_decide(r, level: float = 0.95) -> Optional[int]:
    """Return the models at which a one-sided test at ``(1 - level) / 2`` decides r > 0 with
    :data:`robench.stats.claims.POWER` (Fisher's z), or None."""
    from scipy import stats

    if r is None or not 0 < abs(r) < 1:
        return None
    z = float(stats.norm.ppf(0.5 + level / 2) + stats.norm.ppf(POWER))
    return math.floor(3 + (z / math.atanh(abs(r))) ** 2) + 1


def _points(rows: list, dataset: str, indicator: str, target: str) -> dict:
    """Return {model: (oriented indicator, robustness)} of a validation row, means over repeats."""
    row = next((r for r in rows if r.get("dataset") == dataset and r.get("model") == "zoo"
                and r.get("score") == f"r|{indicator}|{target}"), {})
    return _by_model((row.get("details") or {}).get("points") or [], INDICATORS.get(indicator, 1))


def _by_model(points: list, sign: float = 1.0) -> dict:
    """Return {model: (mean indicator, mean robustness)} over a row's points."""
    acc: dict = {}
    for p in points:
        if len(p) >= 3 and p[1] is not None and p[2] is not None:
            acc.setdefault(p[0], []).append((sign * float(p[1]), float(p[2])))
    return {m: (sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v))
            for m, v in acc.items()}


def _corr_verdict(x: list, y: list, level: float = SIDE) -> tuple:
    """Return (verdict, test) of "r > 0" by the exact permutation test at one-sided ``level``."""
    t = correlation_test(x, y)
    v = HOLDS if t["p_greater"] <= level else FAILS if t["p_less"] <= level else UNDECIDED
    return v, t


def _shuffled(what: str, columns: list, rule) -> Control:
    """Return the control ``rule(columns)`` with every column's robustness shuffled."""
    rng = np.random.default_rng(0)
    verdicts = [rule([(x, list(rng.permutation(y))) for x, y in columns])
                for _ in range(CONTROL_SHUFFLES)]
    return matched(what, verdicts, "shuffles", size=f"the row's {len(columns[0][0])} models")


def _accuracies(rows: list, dataset: str) -> dict:
    """Return {model: mean model accuracy} of the data set's zoo (the confounder)."""
    return {m: v[0] for m, v in _points(rows, dataset, CONFOUNDER, TARGET).items()}


def _partial(x: list, y: list, z: list) -> Optional[float]:
    """Return the partial correlation of x and y given z (linear), None if undefined."""
    x, y, z = (np.asarray(v, float) for v in (x, y, z))
    if len(x) < 4 or np.std(z) == 0:
        return None
    Z = np.column_stack([np.ones_like(z), z])
    rx = x - Z @ np.linalg.lstsq(Z, x, rcond=None)[0]
    ry = y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]
    d = float(np.sqrt((rx @ rx) * (ry @ ry)))
    return float(rx @ ry / d) if d > 0 else None


def _better(rows: list, dataset: str, a: str, b: str) -> tuple:
    """Return (verdict, text, evidence, would_decide, control) of "a predicts TARGET better
    than b"; the control has the two swapped at random per model (equally predictive)."""
    pa, pb = _points(rows, dataset, a, TARGET), _points(rows, dataset, b, TARGET)
    common = sorted(set(pa) & set(pb))
    what = f"{a} and {b} swapped at random per model (equally predictive)"
    if len(common) < 4:
        return (UNDECIDED, f"{a} vs {b}: {len(common)} models with both (needs 4)", {},
                MORE_MODELS + " (at least 4 with both indicators)",
                Control(what, None, f"{len(common)} models with both: nothing to swap"))
    y = [pa[m][1] for m in common]
    rng = np.random.default_rng(0)
    verdicts = []
    for _ in range(CONTROL_SHUFFLES):
        flip = rng.random(len(common)) < 0.5
        x1 = [pb[m][0] if f else pa[m][0] for m, f in zip(common, flip)]
        x2 = [pa[m][0] if f else pb[m][0] for m, f in zip(common, flip)]
        verdicts.append(_better_verdict(dependent_correlations(y, x1, x2)))
    control = matched(what, verdicts, "swaps", size=f"the row's {len(common)} models")
    res = dependent_correlations(y, [pa[m][0] for m in common], [pb[m][0] for m in common])
    text = (f"{a} r = {res['r1']:+.2f} vs {b} r = {res['r2']:+.2f} (r between them "
            f"{res['r12']:+.2f}, {res['n']} models)")
    ev = {k: res.get(k) for k in ("r1", "r2", "r12", "n", "estimate", "low", "high")}
    if res["low"] is None:
        return UNDECIDED, f"{text}: {res['reason']}", ev, would(None, "models"), control
    iv = f"Fisher-z difference {res['estimate']:+.2f} [{res['low']:+.2f}, {res['high']:+.2f}]"
    verdict = _better_verdict(res)
    if verdict != UNDECIDED:
        where = "above" if verdict == HOLDS else "below"
        return verdict, f"{text}; {iv} lies {where} 0", ev, "", control
    need = n_for_power(res["estimate"], res["sd"], res["n"] + 1)
    return UNDECIDED, f"{text}; {iv} contains 0", ev, would(need, "models"), control


def _better_verdict(res: dict) -> str:
    """Return the verdict of :func:`dependent_correlations`' interval of r1 - r2 against 0."""
    if res["low"] is None:
        return UNDECIDED
    return HOLDS if res["low"] > 0 else FAILS if res["high"] < 0 else UNDECIDED


def purity_claims(rows: list) -> list:
    """Return per data set the clusterability claims: the relation, its baselines (Delta, and
    model accuracy), eq. 10 against either clusterer, and the adversarial correlations."""
    claims = []
    for r in sorted(rows, key=lambda r: r["dataset"]):
        if r.get("model") != "zoo" or r.get("score") != "validation_holds":
            continue
        dataset = r["dataset"]
        d = r.get("details") or {}
        pts = _points(rows, dataset, "purity-ratio", TARGET)
        models = sorted(pts)
        x, y = [pts[m][0] for m in models], [pts[m][1] for m in models]
        tau = d.get("tau")
        decide = ""
        if len(models) < 3:
            r_, n = d.get("r"), d.get("n")
            verdict, why = UNDECIDED, (d.get("reason") or "no per-model points stored: "
                                       "nothing to permute")
            figure = "-" if r_ is None else f"r = {r_:+.2f} over {n} models"
            decide = would(None, "models")
            controls = [Control("the models' robustness shuffled", None, "no per-model points")]
        else:
            verdict, t = _corr_verdict(x, y)
            r_, n = t["r"], t["n"]
            figure = (f"r = {r_:+.2f}" + (f", tau = {tau:+.2f}" if tau is not None else "")
                      + f" over {n} models (per-model means over their repeats)")
            how = "exact" if t["exact"] else f"{t['n']} models, Monte Carlo"
            why = (f"permutation test ({how}): p(r >= observed) = {t['p_greater']:.4f}, "
                   f"p(r <= observed) = {t['p_less']:.4f}, one-sided level {SIDE:g}")
            if verdict == UNDECIDED:
                decide = would(models_to_decide(r_) if r_ > 0 else None, "models")
            acc = _accuracies(rows, dataset)
            known = all(m in acc for m in models)
            part = _partial(x, y, [acc[m] for m in models]) if known else None
            if part is not None:
                figure += f"; partial r given model accuracy {part:+.2f}"
            what = ("model accuracy alone as the indicator (the confounder: accurate models are "
                    "robust), the same exact permutation test")
            controls = [_shuffled("the models' robustness shuffled (indicator and robustness "
                                  "unrelated)", [(x, y)], lambda c: _corr_verdict(*c[0])[0]),
                        Control(what, _corr_verdict([acc[m] for m in models], y)[0],
                                "by the row's own rule", size=f"the row's {len(models)} models",
                                confounder=True) if known
                        else Control(what, None, "no model accuracy stored for every model")]
        claims.append(controlled_all(Claim(
            PAPER, "purity-ratio (eq. 10) rises with corruption robustness across models",
            "R^2 = 0.87 (eq. 10, Table 4 and Figure 1), tau = 0.73 (Table 5) on ImageNet-C",
            dataset, figure, verdict, why,
            {k: d.get(k) for k in ("r", "tau", "n", "baselines")}, would_decide=decide), controls))
        for baseline, text, paper in (
                ("delta", "the class-overlap baseline Delta (the paper's)",
                 "R^2 = 0.87 vs Delta's 0.27 (Tables 3-4)"),
                ("model_acc", "model accuracy (a baseline robench adds)",
                 "- (not in the paper: robench's added baseline)")):
            verdict, why, ev, decide, control = _better(rows, dataset, "purity-ratio", baseline)
            claims.append(controlled(Claim(
                PAPER, f"purity-ratio predicts corruption robustness better than {text}",
                paper, dataset, why.split(";")[0], verdict,
                why + " (dependent correlations: Fisher-z difference jackknifed over models)",
                ev, would_decide=decide), control))
        parts = {c: _better(rows, dataset, "purity-ratio", f"p_purity_{c}")
                 for c in ("kmeans", "multicut")}  # (verdict, why, evidence, decide, control)
        verdict = _combine([p[0] for p in parts.values()])
        claims.append(controlled(Claim(
            PAPER, "eq. 10 (k-means x multicut purity) predicts corruption robustness better "
                   "than either clusterer's purity alone",
            "R^2 = 0.87 vs k-means 0.83 and multicut 0.71 (Table 4, all severities)", dataset,
            "; ".join(p[1].split(";")[0] for p in parts.values()), verdict,
            "; ".join(p[1] for p in parts.values()) + " (dependent correlations, jackknife "
            "over models)", {c: p[2] for c, p in parts.items()},
            would_decide="" if verdict != UNDECIDED else next(
                (p[3] for p in parts.values() if p[0] == UNDECIDED and p[3]),
                would(None, "models"))), parts["kmeans"][4]))
        claims.extend(_adversarial_claim(rows, dataset, attack, sorted(entries, key=lambda e: e[0]))
                      for attack, entries in sorted(_adversarial_entries(rows, dataset).items()))
    return claims


def _adversarial_entries(rows: list, dataset: str) -> dict:
    """Return attack -> [(eps, per-model points)] of the zoo's purity-ratio rows."""
    by_attack: dict = {}
    for r in rows:
        score = str(r.get("score") or "")
        if (r.get("dataset") != dataset or r.get("model") != "zoo"
                or not score.startswith("r|purity-ratio|")):
            continue
        attack, _, eps = score.split("|", 2)[2].partition("@")
        if attack in ADVERSARIAL and eps and r.get("value") is not None:
            pts = _by_model((r.get("details") or {}).get("points") or [],
                            INDICATORS.get("purity-ratio", 1))
            by_attack.setdefault(attack, []).append((float(eps), pts))
    return by_attack


def _eps_rule(m: int):
    """Return the adversarial rows' rule over ``m`` eps columns of (x, y)."""
    def rule(columns):
        tests = [correlation_test(x, y) for x, y in columns]
        if any(t["p_greater"] <= SIDE / m for t in tests):
            return HOLDS
        if tests and all(t["p_less"] <= SIDE for t in tests):
            return FAILS
        return UNDECIDED
    return rule


def _adversarial_claim(rows: list, dataset: str, attack: str, entries: list) -> Claim:
    """Return "purity-ratio correlates positively with robustness to ``attack``" from its
    eps-sorted entries.

    Holds when some eps shows r > 0 at 0.025 / eps (Bonferroni), does not hold when every eps
    shows r < 0 at 0.025 (intersection-union), undecided otherwise (docs/claims.md).
    """
    m = len(entries)
    rule = _eps_rule(m)
    names = [sorted(pts) for _, pts in entries]
    columns = [([pts[k][0] for k in ms], [pts[k][1] for k in ms])
               for ms, (_, pts) in zip(names, entries)]
    tests = [correlation_test(x, y) for x, y in columns]
    ok = bool(columns) and all(len(x) >= 3 for x, _ in columns)
    verdict = rule(columns) if ok else UNDECIDED
    above = [e[0] for e, t in zip(entries, tests) if t["p_greater"] <= SIDE / m]
    why = {HOLDS: f"at eps {', '.join(f'{e:g}' for e in above)} r > 0 is shown",
           FAILS: "r < 0 is shown at every eps"}.get(verdict, "no eps shows r > 0")
    acc = _accuracies(rows, dataset)
    what = "the models' robustness shuffled at every eps"
    controls = ([_shuffled(what, columns, rule)] if ok
                else [Control(what, None, "no per-model points stored")])
    if ok and all(all(m_ in acc for m_ in ms) for ms in names):  # the confounder's control
        controls.append(Control(
            "model accuracy alone as the indicator at every eps (the confounder: accurate "
            "models are robust), the same exact permutation tests",
            rule([([acc[m_] for m_ in ms], y) for ms, (_, y) in zip(names, columns)]),
            "by the row's own rule", size=f"the row's {len(names[0])} models",
            confounder=True))
    partial = ([_partial(x, y, [acc[m_] for m_ in ms]) for ms, (x, y) in zip(names, columns)]
               if len(controls) > 1 else [None] * len(columns))
    best = max(tests, key=lambda t: t["r"] if math.isfinite(t["r"]) else -2)
    need = (models_to_decide(best["r"], 1 - 2 * SIDE / m)
            if verdict == UNDECIDED and math.isfinite(best["r"]) and best["r"] > 0 else None)
    name, figure = ADVERSARIAL[attack]
    n_models = max((t["n"] for t in tests), default=0)
    return controlled_all(Claim(
        PAPER, f"purity-ratio (eq. 10) correlates with robustness to {name}",
        f"{figure} for moderate eps (section 4.5, Figure 7)", dataset,
        "; ".join(f"eps {e[0]:g}: r = {t['r']:+.2f} (p = {t['p_greater']:.3f}"
                  + ("" if pr is None else f", partial r given accuracy {pr:+.2f}") + ")"
                  for e, t, pr in zip(entries, tests, partial))
        + f" over {n_models} models",
        verdict, why + f" (exact permutation tests at one-sided {SIDE:g} / {m} per eps: "
                       f"Bonferroni over {m} eps)",
        {f"{e[0]:g}": {k: t[k] for k in ("r", "n", "p_greater", "p_less")}
         for e, t in zip(entries, tests)},
        would_decide="" if verdict != UNDECIDED else would(need, "models")), controls)
