"""The ``purity-ratio`` metric (Ho et al.): indicators per model and their validation over a zoo."""

from __future__ import annotations

from typing import Optional
import math
import numpy as np

from robench.metric_kit import failure, not_applicable
from robench.present.formatting import as_dict
from robench.specs import Score
from robench.families.purity_ratio import protocol as cl
from robench.stats.intervals import mean_interval, skewed_mean_interval
from robench.stats.ranks import chance_level

METRIC = "purity-ratio"
#: 3: the validation verdict by Fisher's interval of r (2: by its sign). 4: R repeats of every
#: reference model: the mean over repeats with Student's t interval, every repeat's values in
#: ``details.per_repeat``, ranks from paired tests over shared repeats (issue 42). 5: the
#: headline's interval is Hall's skew-corrected one (Student's covered 86-92% on skewed and
#: merge shapes; issue 49).
VERSION = "5"
DESCRIPTION = ("Feature-space clusterability p_purity (k-means, multicut, combined eq. 10) "
               "vs corruption / adversarial robustness, validated across a model zoo.")
HIGHER_IS_BETTER = True
USES_CLUSTERER = False
NEEDS_FEATURES = True
DISPLAY_ORDER = 20
#: The plugin module that registered purity-ratio before the families moved (fingerprints).
MOVED_FROM = "robench.builtin.clusterability"
REFERENCES = (("Kalun Ho, Franz-Josef Pfreundt, Janis Keuper and Margret Keuper, "
               "Estimating the Robustness of Classification Models by the Structure of "
               "the Learned Feature-Space (AAAI-22 workshop)",
               "https://arxiv.org/abs/2106.12303"),)

DEFINITION = (
    "Feature-space clusterability as a robustness indicator (Ho et al., AAAI 2022). Per repeat r "
    "(R = --repeats) a reference model is trained on the stratified random split of the repeat's "
    "seed (the run's seed for r = 0, a derived one otherwise; validation carved from the training "
    "part; early stopping on validation only); Model_ACC is its accuracy on the clean test split. "
    "Every model's repeat r shares the split and seeds, so models are compared by paired "
    "differences over shared repeats. Its penultimate features of the test split are clustered by "
    "k-means (K = number of classes, all test samples) and by a minimum-cost multicut (GAEC, "
    "bioimage-cpp) on the complete graph (the paper's; knob graph) of at most multicut_cap "
    "stratified test samples, with edge costs logit(p_join(d)) + bias, d the squared feature "
    "distance in units of the point set's median kNN-edge distance (knob scale; eq. 4) and p_join "
    "a logistic regression fitted on pairs of training features (same class = join); the bias is "
    "calibrated on training features (knob bias_mode): the one whose partition of a test-sized "
    "training subsample has an effective number of clusters closest to the number of classes (the "
    "paper estimates the boundary empirically; bias 0 fragmented real features into clusters of ~3 "
    "points, purity ~1 for every model); n_clusters_multicut is stored with the scores. C_ACC: "
    "cluster accuracy with Hungarian matching (unmatched clusters count as errors); C_purity: "
    "purity (eq. 5). p_acc_X = C_ACC^X / Model_ACC, p_purity_X = C_purity^X / Model_ACC (eq. 8); "
    "the headline purity-ratio is the combined p_purity^(kmeans*multicut) = C_purity^kmeans * "
    "C_purity^multicut / Model_ACC (eq. 10); p_acc_combined likewise. delta: class overlap "
    "(mu_intra + sigma_intra) - (mu_inter + sigma_inter) of squared feature distances (eq. 9, "
    "lower = better separated). Ground truth on image data sets: robustness = ACC*_{s,c} / "
    "ACC_clean for the 19 corruptions (15 ImageNet-C + 4 extra, imagecorruptions-imaug, images "
    "upscaled to 32 px) at 5 severities (eq. 6), corruption_robustness = ACC*_all / ACC_clean (eq. "
    "7), ACC_clean measured on the same stratified subsample; relative robust accuracy under FGSM, "
    "PGD (L-inf, no random start) and DeepFool (ART; robust at eps if its per-pixel L2 "
    "perturbation exceeds eps) per eps. Validation (model 'zoo'): across the data set's zoo of "
    "models (profile knob clusterability.zoo), r|<indicator>|<target> = signed Pearson "
    "correlation, r2|<indicator>|<target> = its square (unsigned: a reversed relation has a high "
    "R^2) and tau|<indicator>|<target> = Kendall tau-b, for targets corruption (overall), "
    "corruption@s1..s5 and <attack>@<eps>; r and tau of delta are computed on -delta (lower delta "
    "should mean more robust). The headline 'validation' is r of purity-ratio vs corruption "
    "robustness (version 2; version 1 reported R^2), with the baselines Delta and Model_ACC beside "
    "it; 'validation_holds' is 1 when r > 0 and tau > 0, 0 otherwise, None when undecidable (fewer "
    "than 3 models, no spread). Models without a feature space get value None with the reason; "
    "tabular data sets get no corruption or attack scores (not applicable). Every score of a model "
    "is the mean over its repeats of the per-repeat value (purity-ratio: of the per-repeat eq. "
    "10), with Student's t 95% interval over the repeats (purity-ratio: Hall's skew-corrected 95% "
    "interval, the skewness allowed 2 standard errors; none with fewer than 2 repeats, reason in "
    "details.interval); details.per_repeat of the purity-ratio score holds every indicator and "
    "robustness target of every repeat; the validation correlates the models' means. Ranks: every "
    "pair of models tested on its per-repeat differences (robench.stats.paired, Holm over all "
    "pairs), shown as rank intervals; a model whose Model_ACC interval is not above chance plus a "
    "margin is not ranked."
)

#: Indicators validated against measured robustness (name -> sign for tau orientation).
INDICATORS = {
    "p_acc_kmeans": 1, "p_purity_kmeans": 1, "p_acc_multicut": 1, "p_purity_multicut": 1,
    "p_acc_combined": 1, "purity-ratio": 1, "delta": -1, "model_acc": 1,
}
#: Sub-scores of every model, their indicator key and direction.
MODEL_SCORES = (
    ("model_acc", True), ("c_acc_kmeans", True), ("c_purity_kmeans", True),
    ("c_acc_multicut", True), ("c_purity_multicut", True), ("p_acc_kmeans", True),
    ("p_purity_kmeans", True), ("p_acc_multicut", True), ("p_purity_multicut", True),
    ("p_acc_combined", True), ("delta", False),
)
ZOO_MODEL = "zoo"


def model_rows(trials: list) -> dict:
    """Return {model: {repeat: row}} of a group's clusterability trials, ``extra`` decoded."""
    out: dict = {}
    for t in (t for t in trials if t.get("protocol") == "clusterability"):
        out.setdefault(t["model"], {})[int(t.get("repeat") or 0)] = {
            **t, "extra": as_dict(t.get("extra"))}
    return out


def model_summary(row: dict) -> dict:
    """Return the indicators and measured robustness of one trial row (pure)."""
    extra = row.get("extra") or {}
    ind = cl.indicators(extra)
    ind["purity-ratio"] = ind.pop("p_purity_combined")
    corr, adv = extra.get("corruptions") or {}, extra.get("adversarial") or {}
    return {"indicators": ind, "corruption": cl.corruption_robustness(corr),
            "corruption_na": corr.get("not_applicable"),
            "adversarial": cl.adversarial_robustness(adv),
            "adversarial_na": adv.get("not_applicable")}


def _mean(values):
    vals = [float(v) for v in values if v is not None and v == v]
    return sum(vals) / len(vals) if vals else None


def mean_summary(per_repeat: dict) -> dict:
    """Return the mean over a model's repeat summaries of every indicator and target."""
    summaries = list(per_repeat.values())
    names = {k for s in summaries for k in s["indicators"]}
    ind = {k: _mean(s["indicators"].get(k) for s in summaries) for k in sorted(names)}
    first = summaries[0] if summaries else {}
    return {"indicators": ind, "corruption": _mean_corruption(summaries),
            "adversarial": _mean_adversarial(summaries),
            "corruption_na": first.get("corruption_na"),
            "adversarial_na": first.get("adversarial_na")}


def _mean_corruption(summaries: list) -> dict:
    """Return the mean corruption robustness of repeat summaries ({} where none measured)."""
    measured = [s["corruption"] for s in summaries if s["corruption"]]
    robustness = _mean(c.get("robustness") for c in measured)
    if robustness is None:
        return {}
    sev = {k for s in summaries for k in (s["corruption"].get("per_severity") or {})}
    return {"robustness": robustness,
            **{k: _mean(c.get(k) for c in measured) for k in ("acc_all", "clean")},
            "per_severity": {k: _mean((s["corruption"].get("per_severity") or {}).get(k)
                                      for s in summaries) for k in sorted(sev)},
            "n": sum(int(c.get("n") or 0) for c in measured)}


def _mean_adversarial(summaries: list) -> dict:
    """Return {attack: {eps: mean relative robust accuracy}} of repeat summaries."""
    adv: dict = {}
    for s in summaries:
        for attack, by_eps in (s["adversarial"] or {}).items():
            adv.setdefault(attack, {}).update(dict.fromkeys(by_eps))
    return {a: {e: _mean((s["adversarial"].get(a) or {}).get(e) for s in summaries)
                for e in by_eps} for a, by_eps in adv.items()}


def targets(summary: dict) -> dict:
    """Return {target name: measured robustness} of one model summary."""
    corr = summary["corruption"]
    out = {} if corr.get("robustness") is None else {
        "corruption": corr["robustness"],
        **{f"corruption@s{s}": v for s, v in (corr.get("per_severity") or {}).items()}}
    return {**out, **{f"{attack}@{eps}": v for attack, by_eps in
                      (summary["adversarial"] or {}).items() for eps, v in by_eps.items()}}


def validation(summaries: dict) -> list:
    """Return one dict per (indicator, target): R^2, slope, Kendall tau, n, the points (pure)."""
    per_model = {m: (s["indicators"], targets(s)) for m, s in summaries.items()}
    all_targets = sorted({t for _, tg in per_model.values() for t in tg}, key=target_order)
    return [correlation_row(ind, sign, target, per_model)
            for ind, sign in INDICATORS.items() for target in all_targets]


def correlation_row(ind: str, sign: int, target: str, per_model: dict) -> dict:
    """Return R^2, slope, r, tau, n and the points of one indicator vs one target (pure)."""
    pts = [(m, i[ind], tg[target]) for m, (i, tg) in sorted(per_model.items())
           if i.get(ind) is not None and tg.get(target) is not None]
    xs, ys = [p[1] for p in pts], [p[2] for p in pts]
    signed = [sign * x for x in xs]
    r2 = cl.r_squared(xs, ys) if pts else None
    slope = float(np.polyfit(xs, ys, 1)[0]) if r2 == r2 and len(pts) >= 3 else None
    r = cl.pearson_r(signed, ys) if pts else None
    # R^2 is blind to the sign: the slope and r say it
    return {"indicator": ind, "target": target, "n": len(pts), "r2": r2, "slope": slope,
            "r": _defined(r), "tau": cl.kendall_tau(signed, ys) if pts else None,
            "points": [list(p) for p in pts]}


def target_order(t: str):
    if t == "corruption":
        return (0, "", 0.0)
    name, _, arg = t.partition("@")
    rank = {"corruption": 1, "fgsm": 2, "pgd": 3, "deepfool": 4}.get(name, 5)
    try:
        val = float(arg.lstrip("s"))
    except ValueError:
        val = 0.0
    return (rank, name, val)


def zoo_of(rows: dict) -> set:
    """Return the zoo as planned: ``spec["zoo"]`` of the newest row of {model: {repeat: row}}."""
    newest = sorted((r for by_repeat in rows.values() for r in by_repeat.values()),
                    key=lambda r: str(r.get("finished_at") or ""))
    for row in reversed(newest):
        spec = row.get("spec") or {}
        if isinstance(spec, dict) and spec.get("zoo") is not None:
            return set(spec["zoo"])
    return set()


def _interval(values, bounds=(0.0, float("inf")), *, skewed: bool = False) -> tuple:
    """Return (low, high, details) of Student's t interval over repeats, or Hall's if skewed."""
    iv = (skewed_mean_interval if skewed else mean_interval)(values, bounds=bounds)
    method = ("Hall's skew-corrected t over repeats (skewness allowed 2 se)" if skewed
              else "t over repeats")
    return iv.low, iv.high, {"method": method, "level": iv.level, "df": iv.df,
                             "n": iv.n[0], "reason": iv.reason}


def _chance(rows_by_repeat: dict) -> dict:
    """Return the chance level of a model's test splits (``robench.stats.ranks.chance_level``)."""
    n_classes, majority = None, []
    for row in rows_by_repeat.values():
        table = ((row.get("extra") or {}).get("kmeans") or {}).get("contingency")
        if table:
            counts = [sum(col) for col in zip(*table)]  # test samples per class
            n_classes = len(counts)
            if sum(counts):
                majority.append(max(counts) / sum(counts))
    level, basis = chance_level(n_classes, max(majority) if majority else None)
    return {"level": level, "basis": basis, "n_classes": n_classes}


def aggregate(group: dict, trials: list) -> list:
    """Turn a data set's reference trials (the zoo's too) into indicators per model, each the
    mean over its repeats, and the validation of the models' means across the zoo."""
    def base(model):
        return dict(dataset=group["dataset"], model=model, clusterer="", metric=METRIC)

    rows = model_rows(trials)
    scores, summaries = [], {}
    for model, by_repeat in sorted(rows.items()):
        mine, summaries[model] = model_scores(base(model), by_repeat)
        scores += mine
    summaries = {m: s for m, s in summaries.items() if s is not None}
    return scores + validation_scores(base(ZOO_MODEL), summaries, zoo_of(rows))


def model_scores(base: dict, by_repeat: dict) -> tuple:
    """Return (scores, summary) of one model's {repeat: row}; summary None if failed or n/a."""
    first = by_repeat[min(by_repeat)]
    zoo = bool((first.get("params") or {}).get("zoo_member"))
    ok = {r: row for r, row in sorted(by_repeat.items()) if failure(row) is None}
    failed = sorted(r for r in by_repeat if r not in ok)
    if not ok:
        return [Score(**base, score=METRIC, value=None,
                      details={"error": failure(first), "zoo_member": zoo,
                               "failed_repeats": failed})], None
    reason = next((why for why in map(not_applicable, ok.values()) if why), None)
    if reason:
        return [Score(**base, score=METRIC, value=None,
                      details={"not_applicable": reason, "zoo_member": zoo})], None
    per = {r: model_summary(row) for r, row in ok.items()}
    summary = mean_summary(per)
    repeats = sorted(per)
    values = repeat_table(per, repeats)
    last = ok[repeats[-1]]["extra"]
    scores = [headline_score(base, summary, values, ok, failed, zoo, last)]
    scores += indicator_scores(base, per, repeats, summary["indicators"])
    scores.append(multicut_score(base, per, repeats, last, summary["indicators"]))
    scores += corruption_scores(base, summary["corruption"], values, repeats,
                                summary["corruption_na"])
    scores += adversarial_scores(base, summary["adversarial"], last, summary["adversarial_na"])
    return scores, summary


def repeat_table(per: dict, repeats: list) -> dict:
    """Return {indicator or target: [value of each repeat]} of a model's repeat summaries."""
    values: dict = {}
    for j, r in enumerate(repeats):
        s = per[r]
        for name, v in {**{k: s["indicators"].get(k) for k in INDICATORS}, **targets(s)}.items():
            values.setdefault(name, [None] * len(repeats))[j] = v
    return values


def _multicut(extra: dict) -> dict:
    return {k: v for k, v in (extra.get("multicut") or {}).items() if k != "contingency"}


def headline_score(base: dict, summary: dict, values: dict, ok: dict, failed: list,
                   zoo: bool, last: dict) -> Score:
    """Return a model's ``purity-ratio``: the mean of its per-repeat eq. 10 with its interval."""
    ind = summary["indicators"]
    repeats = sorted(ok)
    p_values = values.get(METRIC) or []
    low, high, interval = _interval(p_values, skewed=True)
    acc_low, acc_high, _ = _interval(values.get("model_acc") or [], bounds=(0.0, 1.0))
    return Score(**base, score=METRIC, value=ind["purity-ratio"], ci_low=low, ci_high=high,
                 n=len([v for v in p_values if v is not None]),
                 details={"indicators": ind, "zoo_member": zoo,
                          "estimate": "mean over repeats of p_purity combined",
                          "interval": interval,
                          "per_repeat": {"repeats": repeats, "values": values,
                                         "seeds": [ok[r]["extra"].get("reference_seed")
                                                   for r in repeats]},
                          "failed_repeats": failed, "chance": _chance(ok),
                          "model_acc": {"value": ind.get("model_acc"),
                                        "low": acc_low, "high": acc_high},
                          "n_test": last.get("n_test"), "multicut": _multicut(last),
                          **{k: last.get(k) for k in ("overlap", "feature_dim", "timings")},
                          "corruption_robustness": summary["corruption"].get("robustness")})


def indicator_scores(base: dict, per: dict, repeats: list, ind: dict) -> list:
    """Return the sub-scores of :data:`MODEL_SCORES`: means over repeats with t intervals."""
    scores = []
    for name, higher in MODEL_SCORES:
        vals = [per[r]["indicators"].get(name) for r in repeats]
        lo, hi, _ = _interval(vals, bounds=(-float("inf"), float("inf")))
        scores.append(Score(**base, score=name, value=ind.get(name), ci_low=lo, ci_high=hi,
                            higher_is_better=higher, n=len([v for v in vals if v is not None]),
                            details={"per_repeat": vals, "repeats": repeats}))
    return scores


def multicut_score(base: dict, per: dict, repeats: list, last: dict, ind: dict) -> Score:
    """Return ``n_clusters_multicut``, without which the multicut's purity cannot be read."""
    mc = _multicut(last)
    return Score(**base, score="n_clusters_multicut", value=ind.get("n_clusters_multicut"),
                 n=mc.get("n"),
                 details={"n_classes": len((last.get("kmeans") or {}).get("contingency")
                                           or []) or None,
                          "per_repeat": [per[r]["indicators"].get("n_clusters_multicut")
                                         for r in repeats],
                          **{k: mc.get(k) for k in ("n_singletons", "bias", "bias_mode",
                                                     "graph", "scale", "calibration")}})


def corruption_scores(base: dict, corr: dict, values: dict, repeats: list,
                      reason: Optional[str]) -> list:
    """Return the corruption robustness (eq. 7), ACC*_all and the robustness per severity."""
    if not corr:
        return [Score(**base, score="corruption_robustness", value=None,
                      details={"not_applicable": reason})]
    rob = values.get("corruption") or []
    lo, hi, _ = _interval(rob)
    return [Score(**base, score="corruption_robustness", value=corr["robustness"],
                  ci_low=lo, ci_high=hi, n=corr.get("n"),
                  details={**corr, "per_repeat": rob, "repeats": repeats}),
            Score(**base, score="acc_corrupted_all", value=corr["acc_all"],
                  n=corr.get("n"), details={"clean": corr["clean"]})] + [
        Score(**base, score=f"corruption_robustness@s{sev}", value=v, n=corr.get("n"))
        for sev, v in (corr.get("per_severity") or {}).items()]


def adversarial_scores(base: dict, adv: dict, last: dict, reason: Optional[str]) -> list:
    """Return the relative robust accuracy of every attack and eps (or why none)."""
    if not adv:
        return [Score(**base, score="adversarial_robustness", value=None,
                      details={"not_applicable": reason})]
    n = (last.get("adversarial") or {}).get("n")
    return [Score(**base, score=f"{attack}@{eps}", value=v, n=n)
            for attack, by_eps in adv.items() for eps, v in by_eps.items()]


def validation_scores(base: dict, summaries: dict, zoo: set) -> list:
    """Return R^2, r and tau of every (indicator, target) over 3+ models, and the verdict."""
    table = validation({m: v for m, v in summaries.items() if m in zoo})
    usable = [r for r in table if r["n"] >= 3]
    if not usable:
        reason = ("not applicable: no corruption or attack ground truth (a tabular data set, "
                  "or none measured)"
                  if summaries and not any(targets(s) for s in summaries.values())
                  else "fewer than 3 models with indicators and measured robustness")
        return [Score(**base, score="validation", value=None, n=len(summaries),
                      details={"not_applicable": reason})]
    kinds = (("r2", ("tau", "r")), ("r", ("tau", "r2")), ("tau", ("r2", "r")))
    scores = [Score(**base, score=f"{kind}|{r['indicator']}|{r['target']}", value=r[kind],
                    n=r["n"], details={k: r[k] for k in ("indicator", "target", "points",
                                                         "slope") + others})
              for r in usable for kind, others in kinds]
    head = next((r for r in usable if r["indicator"] == METRIC and r["target"] == "corruption"),
                None) or {}
    verdict = validation_verdict(usable)
    scores.append(Score(**base, score="validation", value=head.get("r"), n=head.get("n"),
                        details={"headline": "signed Pearson r of purity-ratio vs corruption "
                                             "robustness across the zoo",
                                 **{k: head.get(k) for k in ("r2", "tau", "slope")},
                                 **{k: verdict[k] for k in ("holds", "reason", "baselines")},
                                 "models": sorted(summaries),
                                 "table": [{k: v for k, v in r.items() if k != "points"}
                                           for r in usable]}))
    scores.append(Score(**base, score="validation_holds",
                        value=None if verdict["holds"] is None else float(verdict["holds"]),
                        n=head.get("n"), details=verdict))
    return scores


#: Baselines shown beside purity-ratio in every validation (the paper's Delta, and accuracy).
BASELINES = ("delta", "model_acc")
#: Two-sided 95% normal quantile of Fisher's z interval.
Z95 = 1.959963984540054


def r_interval(r, n, level: float = 0.95) -> tuple:
    """Return Fisher's interval ``tanh(atanh(r) ± z / sqrt(n - 3))`` or (None, None)."""
    from scipy import stats

    if r is None or n is None or n <= 3 or not -1 < r < 1:
        return None, None
    z = Z95 if level == 0.95 else float(stats.norm.ppf(0.5 + level / 2))
    c, se = math.atanh(r), 1 / math.sqrt(n - 3)
    return math.tanh(c - z * se), math.tanh(c + z * se)


def validation_verdict(table: list, target: str = "corruption") -> dict:
    """Return whether purity-ratio predicts ``target`` robustness across the zoo, and why.

    Decided by Fisher's 95% interval of r and tau (docs/clusterability.md, validation_holds).
    """
    rows = {r["indicator"]: r for r in table if r["target"] == target}
    head = rows.get(METRIC)
    baselines = {b: {k: rows[b].get(k) for k in ("r", "tau", "r2", "n")}
                 for b in BASELINES if b in rows}
    out = {"target": target, "holds": None, "baselines": baselines, "beats_baselines": None,
           "r": None, "tau": None, "n": None, "r_low": None, "r_high": None}
    if head is None:
        return {**out, "reason": f"no purity-ratio vs {target} row (fewer than 3 models measured)"}
    r, tau = _defined(head.get("r")), _defined(head.get("tau"))
    out.update(r=r, tau=tau, n=head["n"])
    if r is None or tau is None:
        return {**out, "reason": "r or tau undefined (no spread in the indicator or the "
                                 "robustness)"}
    low, high = r_interval(r, head["n"])
    out.update(r_low=low, r_high=high)
    others = [b["r"] for b in baselines.values() if b.get("r") is not None]
    out["beats_baselines"] = bool(others) and all(r > o for o in others)
    out["holds"], word = _verdict(low, high, tau, head["n"])
    interval = "" if low is None else f" [{low:+.2f}, {high:+.2f}]"
    out["reason"] = (f"purity-ratio vs {target} robustness over {head['n']} models: r = "
                     f"{r:+.2f}{interval} (Fisher, 95%), tau = {tau:+.2f}: {word}"
                     + "".join(f"; {b}: r = {v['r']:+.2f}" for b, v in baselines.items()
                               if v.get("r") is not None))
    return out


def _defined(x):
    """Return x, or None for None or NaN."""
    return None if x is None or x != x else x


def _verdict(low, high, tau: float, n: int) -> tuple:
    """Return (holds, why) from Fisher's interval [low, high] of r and Kendall's tau."""
    if low is None:
        return None, f"no interval for r at {n} models: undecided"
    if low > 0 and tau > 0:
        return True, "r's interval lies above 0 and tau > 0"
    if high < 0:
        return False, "r's interval lies below 0: reversed"
    return None, ("r's interval contains 0: undecided, more models would decide it"
                  if low <= 0 <= high else "tau is not positive: undecided")
