"""The ``purity-ratio`` metric (Ho et al.): indicators per model and their validation across a zoo."""

from __future__ import annotations

from typing import Optional

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

DEFINITION = (
    "Feature-space clusterability as a robustness indicator (Ho et al., AAAI 2022). Per repeat r "
    "(R = --repeats) a reference model is trained on the stratified random split of the "
    "repeat's seed (the run's seed for r = 0, a derived one otherwise; validation carved from "
    "the training part; early stopping on validation only); Model_ACC is its accuracy on the "
    "clean test split. Every model's repeat r shares the split and seeds, so models are "
    "compared by paired differences over shared repeats. Its penultimate features of the test split are clustered by k-means (K = number "
    "of classes, all test samples) and by a minimum-cost multicut (GAEC, bioimage-cpp) on the "
    "complete graph (the paper's; knob graph) of at most multicut_cap stratified test samples, "
    "with edge costs logit(p_join(d)) + bias, d the squared feature distance in units of the "
    "point set's median kNN-edge distance (knob scale; eq. 4) and p_join a logistic regression "
    "fitted on pairs of training features (same class = join); the bias is calibrated on "
    "training features (knob bias_mode): the one whose partition of a test-sized training "
    "subsample has an effective number of clusters closest to the number of classes (the "
    "paper estimates the boundary empirically; bias 0 fragmented real features into clusters "
    "of ~3 points, purity ~1 for every model); n_clusters_multicut is stored with the scores. "
    "C_ACC: cluster accuracy with Hungarian matching (unmatched clusters count as errors); "
    "C_purity: purity (eq. 5). p_acc_X = C_ACC^X / Model_ACC, p_purity_X = C_purity^X / "
    "Model_ACC (eq. 8); the headline purity-ratio is the combined p_purity^(kmeans*multicut) = "
    "C_purity^kmeans * C_purity^multicut / Model_ACC (eq. 10); p_acc_combined likewise. delta: "
    "class overlap (mu_intra + sigma_intra) - (mu_inter + sigma_inter) of squared feature "
    "distances (eq. 9, lower = better separated). Ground truth on image data sets: robustness = "
    "ACC*_{s,c} / ACC_clean for the 19 corruptions (15 ImageNet-C + 4 extra, imagecorruptions-"
    "imaug, images upscaled to 32 px) at 5 severities (eq. 6), corruption_robustness = ACC*_all / "
    "ACC_clean (eq. 7), ACC_clean measured on the same stratified subsample; relative robust "
    "accuracy under FGSM, PGD (L-inf, no random start) and DeepFool (ART; robust at eps if its "
    "per-pixel L2 perturbation exceeds eps) per eps. Validation (model 'zoo'): across the data "
    "set's zoo of models (profile knob clusterability.zoo), r|<indicator>|<target> = signed Pearson "
    "correlation, r2|<indicator>|<target> = its square (unsigned: a reversed relation has a high "
    "R^2) and tau|<indicator>|<target> = Kendall tau-b, for targets corruption (overall), "
    "corruption@s1..s5 and <attack>@<eps>; r and tau of delta are computed on -delta (lower "
    "delta should mean more robust). The headline 'validation' is r of purity-ratio vs "
    "corruption robustness (version 2; version 1 reported R^2), with the baselines Delta and "
    "Model_ACC beside it; 'validation_holds' is 1 when r > 0 and tau > 0, 0 otherwise, None "
    "when undecidable (fewer than 3 models, no spread). Models without a feature space get value None with the reason; tabular data sets "
    "get no corruption or attack scores (not applicable). Every score of a model is the mean "
    "over its repeats of the per-repeat value (purity-ratio: of the per-repeat eq. 10), with "
    "Student's t 95% interval over the repeats (purity-ratio: Hall's skew-corrected 95% "
    "interval, the skewness allowed 2 standard errors; none with fewer than 2 repeats, reason "
    "in details.interval); details.per_repeat of the purity-ratio score holds every indicator "
    "and robustness target of every repeat; the validation correlates the models' means. "
    "Ranks: every pair of models tested on its per-repeat differences (robench.stats.paired, "
    "Holm over all pairs), shown as rank intervals; a model whose Model_ACC interval is not "
    "above chance plus a margin is not ranked."
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
    for t in trials:
        if t.get("protocol") != "clusterability":
            continue
        row = dict(t)
        row["extra"] = as_dict(row.get("extra"))
        out.setdefault(row["model"], {})[int(row.get("repeat") or 0)] = row
    return out


def model_summary(row: dict) -> dict:
    """Return the indicators and measured robustness of one trial row (pure)."""

    extra = row.get("extra") or {}
    ind = cl.indicators(extra)
    ind["purity-ratio"] = ind.pop("p_purity_combined")
    return {
        "indicators": ind,
        "corruption": cl.corruption_robustness(extra.get("corruptions") or {}),
        "corruption_na": (extra.get("corruptions") or {}).get("not_applicable"),
        "adversarial": cl.adversarial_robustness(extra.get("adversarial") or {}),
        "adversarial_na": (extra.get("adversarial") or {}).get("not_applicable"),
    }


def _mean(values):
    vals = [float(v) for v in values if v is not None and v == v]
    return sum(vals) / len(vals) if vals else None


def mean_summary(per_repeat: dict) -> dict:
    """Return one summary of a model's repeats ({repeat: :func:`model_summary`}): each
    indicator and robustness target the mean of its per-repeat values (the model's point in
    the zoo's validation)."""
    summaries = list(per_repeat.values())
    names = {k for s in summaries for k in s["indicators"]}
    ind = {k: _mean(s["indicators"].get(k) for s in summaries) for k in sorted(names)}
    corr: dict = {}
    rob = [s["corruption"].get("robustness") for s in summaries if s["corruption"]]
    if _mean(rob) is not None:
        sev = {k for s in summaries for k in (s["corruption"].get("per_severity") or {})}
        corr = {"robustness": _mean(rob),
                "acc_all": _mean(s["corruption"].get("acc_all") for s in summaries
                                 if s["corruption"]),
                "clean": _mean(s["corruption"].get("clean") for s in summaries
                               if s["corruption"]),
                "per_severity": {k: _mean((s["corruption"].get("per_severity") or {}).get(k)
                                          for s in summaries) for k in sorted(sev)},
                "n": sum(int(s["corruption"].get("n") or 0) for s in summaries
                         if s["corruption"])}
    adv: dict = {}
    for s in summaries:
        for attack, by_eps in (s["adversarial"] or {}).items():
            for eps in by_eps:
                adv.setdefault(attack, {})[eps] = None
    adv = {a: {e: _mean((s["adversarial"].get(a) or {}).get(e) for s in summaries)
               for e in by_eps} for a, by_eps in adv.items()}
    first = summaries[0] if summaries else {}
    return {"indicators": ind, "corruption": corr, "adversarial": adv,
            "corruption_na": first.get("corruption_na"),
            "adversarial_na": first.get("adversarial_na")}


def repeat_summaries(trials: list) -> dict:
    """Return {model: {repeat: :func:`model_summary`}} of the successful, applicable trials."""
    out: dict = {}
    for model, by_repeat in model_rows(trials).items():
        for r, row in sorted(by_repeat.items()):
            if row.get("status") != "ok" or row.get("not_applicable") \
                    or row["extra"].get("not_applicable"):
                continue
            out.setdefault(model, {})[r] = model_summary(row)
    return out


def summary_values(summary: dict) -> dict:
    """Return {indicator or target name: value} of one summary (:func:`model_summary`)."""
    out = {k: summary["indicators"].get(k) for k in INDICATORS}
    out.update(targets(summary))
    return out


def per_repeat_values(rows: list, dataset: Optional[str] = None) -> dict:
    """Return {dataset: {model: {repeat: {name: value}}}} from stored purity-ratio score rows.

    Every indicator of :data:`INDICATORS` and every robustness target (``corruption``,
    ``corruption@sN``, ``<attack>@<eps>``) of every repeat of every model, read from the
    headline score's ``details["per_repeat"]`` (metric version 4 on): models of a data set
    that share a repeat share its split and seeds, so values of one repeat pair across
    models. ``dataset`` restricts it to one data set. Scores without per-repeat values (older
    versions) are left out. This is what the claims and the validation read per repeat.
    """
    out: dict = {}
    for r in rows:
        if r.get("metric") != METRIC or r.get("score") != METRIC or r.get("model") == ZOO_MODEL:
            continue
        if dataset is not None and r.get("dataset") != dataset:
            continue
        details = r.get("details")
        per = details.get("per_repeat") if isinstance(details, dict) else None
        if not isinstance(per, dict) or not isinstance(per.get("repeats"), list):
            continue
        values = per.get("values") or {}
        model = out.setdefault(r["dataset"], {}).setdefault(r["model"], {})
        for j, rep in enumerate(per["repeats"]):
            if not isinstance(rep, int) or isinstance(rep, bool):
                continue  # a hostile or damaged row: no repeat to pair by
            model[rep] = {name: (vals[j] if isinstance(vals, list) and j < len(vals)
                                      else None) for name, vals in values.items()}
    return out


def targets(summary: dict) -> dict:
    """Return {target name: measured robustness} of one model summary."""
    out = {}
    corr = summary["corruption"]
    if corr.get("robustness") is not None:
        out["corruption"] = corr["robustness"]
        for s, v in (corr.get("per_severity") or {}).items():
            out[f"corruption@s{s}"] = v
    for attack, by_eps in (summary["adversarial"] or {}).items():
        for eps, v in by_eps.items():
            out[f"{attack}@{eps}"] = v
    return out


def validation(summaries: dict) -> list:
    """Return one dict per (indicator, target): R^2, slope, Kendall tau, n, the points (pure)."""
    import numpy as np


    per_model = {m: (s["indicators"], targets(s)) for m, s in summaries.items()}
    all_targets = sorted({t for _, tg in per_model.values() for t in tg},
                         key=target_order)
    rows = []
    for ind, sign in INDICATORS.items():
        for target in all_targets:
            pts = [(m, i[ind], tg[target]) for m, (i, tg) in sorted(per_model.items())
                   if i.get(ind) is not None and tg.get(target) is not None]
            xs = [p[1] for p in pts]
            ys = [p[2] for p in pts]
            r2 = cl.r_squared(xs, ys) if pts else None
            slope = None
            if r2 is not None and r2 == r2 and len(pts) >= 3:
                slope = float(np.polyfit(xs, ys, 1)[0])
            r = cl.pearson_r([sign * x for x in xs], ys) if pts else None
            rows.append({
                "indicator": ind, "target": target, "n": len(pts),
                "r2": r2, "slope": slope,  # R^2 is blind to the sign: the slope and r say it
                "r": None if r is None or r != r else r,
                "tau": cl.kendall_tau([sign * x for x in xs], ys) if pts else None,
                "points": [list(p) for p in pts],
            })
    return rows


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
    """Return the data set's zoo as planned (``spec["zoo"]`` of the newest trial row);
    ``rows``: {model: {repeat: row}} (:func:`model_rows`)."""
    newest = sorted((r for by_repeat in rows.values() for r in by_repeat.values()),
                    key=lambda r: str(r.get("finished_at") or ""))
    for row in reversed(newest):
        spec = row.get("spec") or {}
        if isinstance(spec, dict) and spec.get("zoo") is not None:
            return set(spec["zoo"])
    return set()




def _interval(values, bounds=(0.0, float("inf")), *, skewed: bool = False) -> tuple:
    """Return (low, high, details) of Student's t interval of the mean of per-repeat values,
    or with ``skewed`` Hall's skew-corrected one (:func:`robench.stats.intervals.
    skewed_mean_interval`: covers 95% on skewed and merge shapes where Student's does not)."""

    iv = (skewed_mean_interval if skewed else mean_interval)(values, bounds=bounds)
    method = ("Hall's skew-corrected t over repeats (skewness allowed 2 se)" if skewed
              else "t over repeats")
    return iv.low, iv.high, {"method": method, "level": iv.level, "df": iv.df,
                             "n": iv.n[0], "reason": iv.reason}


def _chance(rows_by_repeat: dict) -> dict:
    """Return the chance level of a model's test splits: 1/classes, or the majority-class
    rate of the test splits where higher (:func:`robench.stats.ranks.chance_level`)."""

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
    """Turn a data set's reference trials (every repeat of every model, the zoo's too) into
    indicators per model, with their per-repeat values and intervals, and the validation.

    A model's ``purity-ratio`` is the mean over its repeats of the per-repeat p_purity
    combined (eq. 10), with Student's t interval over the repeats (``details.interval``);
    ``details.per_repeat`` holds every indicator and robustness target of every repeat
    (:func:`per_repeat_values` reads it), ``details.chance`` the chance level its Model_ACC is
    compared with before it is ranked. Sub-scores are means over the repeats with t intervals.
    The validation across the zoo uses each model's means over its repeats.
    """
    dataset = group["dataset"]
    rows = model_rows(trials)
    scores, summaries = [], {}
    for model, by_repeat in sorted(rows.items()):
        base = dict(dataset=dataset, model=model, clusterer="", metric=METRIC)
        first = by_repeat[min(by_repeat)]
        zoo = bool((first.get("params") or {}).get("zoo_member"))
        ok = {r: row for r, row in sorted(by_repeat.items()) if row.get("status") == "ok"}
        failed = sorted(r for r in by_repeat if r not in ok)
        if not ok:
            err = (first.get("error") or "").splitlines()[0] if first.get("error") else "failed"
            scores.append(Score(**base, score=METRIC, value=None,
                                details={"error": err, "zoo_member": zoo,
                                         "failed_repeats": failed}))
            continue
        reason = next((row.get("not_applicable") or row["extra"].get("not_applicable")
                       for row in ok.values()
                       if row.get("not_applicable") or row["extra"].get("not_applicable")),
                      None)
        if reason:
            scores.append(Score(**base, score=METRIC, value=None,
                                details={"not_applicable": reason, "zoo_member": zoo}))
            continue
        per = {r: model_summary(row) for r, row in ok.items()}
        summary = mean_summary(per)
        summaries[model] = summary
        ind = summary["indicators"]
        repeats = sorted(per)
        values: dict = {}
        for j, r in enumerate(repeats):
            for name, v in summary_values(per[r]).items():
                values.setdefault(name, [None] * len(repeats))[j] = v
        p_values = values.get(METRIC) or []
        low, high, interval = _interval(p_values, skewed=True)
        acc_low, acc_high, _ = _interval(values.get("model_acc") or [], bounds=(0.0, 1.0))
        last = ok[repeats[-1]]["extra"]
        mc = {k: v for k, v in (last.get("multicut") or {}).items() if k != "contingency"}
        n_test = ok[repeats[-1]]["extra"].get("n_test")
        scores.append(Score(**base, score=METRIC, value=ind["purity-ratio"], ci_low=low,
                            ci_high=high, n=len([v for v in p_values if v is not None]),
                            details={"indicators": ind, "zoo_member": zoo,
                                     "estimate": "mean over repeats of p_purity combined",
                                     "interval": interval,
                                     "per_repeat": {"repeats": repeats, "values": values,
                                                    "seeds": [ok[r]["extra"].get(
                                                        "reference_seed") for r in repeats]},
                                     "failed_repeats": failed,
                                     "chance": _chance(ok),
                                     "model_acc": {"value": ind.get("model_acc"),
                                                   "low": acc_low, "high": acc_high},
                                     "n_test": n_test, "multicut": mc,
                                     "overlap": last.get("overlap"),
                                     "feature_dim": last.get("feature_dim"),
                                     "timings": last.get("timings"),
                                     "corruption_robustness": summary["corruption"].get(
                                         "robustness")}))
        for name, higher in MODEL_SCORES:
            vals = [per[r]["indicators"].get(name) for r in repeats]
            lo, hi, _ = _interval(vals, bounds=(-float("inf"), float("inf")))
            scores.append(Score(**base, score=name, value=ind.get(name), ci_low=lo, ci_high=hi,
                                higher_is_better=higher, n=len([v for v in vals if v is not None]),
                                details={"per_repeat": vals, "repeats": repeats}))
        # the multicut's granularity, without which its purity cannot be read (~1 for fragments)
        scores.append(Score(**base, score="n_clusters_multicut",
                            value=ind.get("n_clusters_multicut"), n=mc.get("n"),
                            details={"n_classes": len((last.get("kmeans") or {}).get(
                                         "contingency") or []) or None,
                                     "per_repeat": [per[r]["indicators"].get(
                                         "n_clusters_multicut") for r in repeats],
                                     **{k: mc.get(k) for k in ("n_singletons", "bias",
                                                                "bias_mode", "graph", "scale",
                                                                "calibration")}}))
        corr = summary["corruption"]
        if corr:
            rob = values.get("corruption") or []
            lo, hi, _ = _interval(rob)
            scores.append(Score(**base, score="corruption_robustness", value=corr["robustness"],
                                ci_low=lo, ci_high=hi, n=corr.get("n"),
                                details={**corr, "per_repeat": rob, "repeats": repeats}))
            scores.append(Score(**base, score="acc_corrupted_all", value=corr["acc_all"],
                                n=corr.get("n"), details={"clean": corr["clean"]}))
            for sev, v in (corr.get("per_severity") or {}).items():
                scores.append(Score(**base, score=f"corruption_robustness@s{sev}", value=v,
                                    n=corr.get("n")))
        else:
            scores.append(Score(**base, score="corruption_robustness", value=None,
                                details={"not_applicable": summary["corruption_na"]}))
        adv = summary["adversarial"]
        if adv:
            for attack, by_eps in adv.items():
                for eps, v in by_eps.items():
                    scores.append(Score(**base, score=f"{attack}@{eps}", value=v,
                                        n=(last.get("adversarial") or {}).get("n")))
        else:
            scores.append(Score(**base, score="adversarial_robustness", value=None,
                                details={"not_applicable": summary["adversarial_na"]}))

    base = dict(dataset=dataset, model=ZOO_MODEL, clusterer="", metric=METRIC)
    zoo = zoo_of(rows)
    table = validation({m: v for m, v in summaries.items() if m in zoo})
    usable = [r for r in table if r["n"] >= 3]
    if not usable:
        reason = ("not applicable: no corruption or attack ground truth (a tabular data set, "
                  "or none measured)"
                  if summaries and not any(targets(s) for s in summaries.values())
                  else "fewer than 3 models with indicators and measured robustness")
        scores.append(Score(**base, score="validation", value=None, n=len(summaries),
                            details={"not_applicable": reason}))
        return scores
    for r in usable:
        common = {"indicator": r["indicator"], "target": r["target"], "points": r["points"],
                  "slope": r["slope"]}
        scores.append(Score(**base, score=f"r2|{r['indicator']}|{r['target']}", value=r["r2"],
                            n=r["n"], details={**common, "tau": r["tau"], "r": r["r"]}))
        scores.append(Score(**base, score=f"r|{r['indicator']}|{r['target']}", value=r["r"],
                            n=r["n"], details={**common, "tau": r["tau"], "r2": r["r2"]}))
        scores.append(Score(**base, score=f"tau|{r['indicator']}|{r['target']}", value=r["tau"],
                            n=r["n"], details={**common, "r2": r["r2"], "r": r["r"]}))
    head = next((r for r in usable if r["indicator"] == METRIC and r["target"] == "corruption"),
                None)
    verdict = validation_verdict(usable)
    scores.append(Score(**base, score="validation", value=None if head is None else head["r"],
                        n=None if head is None else head["n"],
                        details={"headline": "signed Pearson r of purity-ratio vs corruption "
                                             "robustness across the zoo",
                                 "r2": None if head is None else head["r2"],
                                 "tau": None if head is None else head["tau"],
                                 "slope": None if head is None else head["slope"],
                                 "holds": verdict["holds"], "reason": verdict["reason"],
                                 "baselines": verdict["baselines"],
                                 "models": sorted(summaries),
                                 "table": [{k: v for k, v in r.items() if k != "points"}
                                           for r in usable]}))
    scores.append(Score(**base, score="validation_holds",
                        value=None if verdict["holds"] is None else float(verdict["holds"]),
                        n=None if head is None else head["n"], details=verdict))
    return scores


#: Baselines shown beside purity-ratio in every validation (the paper's Delta, and accuracy).
BASELINES = ("delta", "model_acc")


#: Two-sided 95% normal quantile of Fisher's z interval.
Z95 = 1.959963984540054


def r_interval(r, n, level: float = 0.95) -> tuple:
    """Return Fisher's interval (low, high) of a Pearson r over n models, or (None, None).

    ``tanh(atanh(r) ± z / sqrt(n - 3))``: needs n > 3 and |r| < 1.
    """
    import math

    from scipy import stats

    if r is None or n is None or n <= 3 or not -1 < r < 1:
        return None, None
    z = Z95 if level == 0.95 else float(stats.norm.ppf(0.5 + level / 2))
    c, se = math.atanh(r), 1 / math.sqrt(n - 3)
    return math.tanh(c - z * se), math.tanh(c + z * se)


def validation_verdict(table: list, target: str = "corruption") -> dict:
    """Return whether purity-ratio predicts ``target`` robustness across the zoo, and why.

    Decided by Fisher's 95% interval of the Pearson r over the zoo's models, as the claims
    table decides it (:mod:`robench.families.purity_ratio.claims`): holds (True) when the
    interval lies above 0 and Kendall's tau is positive (the paper's sign in both measures);
    does not hold (False) when it lies below 0 (a reversed relation); undecided (None) when it
    contains 0, without an interval (4 models or fewer, |r| = 1), or without the purity-ratio
    row or a defined r and tau. A positive r alone is not evidence: over 8 models r = +0.33
    has the interval [-0.49, +0.84]. R^2 cannot decide it either: a reversed relation
    (r = -0.9) has R^2 0.81. ``baselines`` holds r, tau, R^2 of Delta (oriented: -Delta) and
    Model_ACC on the same target, and ``beats_baselines`` whether purity-ratio's r exceeds
    every baseline's (point estimates; the claims table tests it for dependent correlations).
    """
    rows = {r["indicator"]: r for r in table if r["target"] == target}
    head = rows.get(METRIC)
    baselines = {b: {k: rows[b].get(k) for k in ("r", "tau", "r2", "n")}
                 for b in BASELINES if b in rows}
    out = {"target": target, "holds": None, "baselines": baselines, "beats_baselines": None,
           "r": None, "tau": None, "n": None, "r_low": None, "r_high": None}
    if head is None:
        out["reason"] = f"no purity-ratio vs {target} row (fewer than 3 models measured)"
        return out
    r, tau = head.get("r"), head.get("tau")
    r = None if r is None or r != r else r
    tau = None if tau is None or tau != tau else tau
    out.update(r=r, tau=tau, n=head["n"])
    if r is None or tau is None:
        out["reason"] = "r or tau undefined (no spread in the indicator or the robustness)"
        return out
    low, high = r_interval(r, head["n"])
    out.update(r_low=low, r_high=high)
    others = [b["r"] for b in baselines.values() if b.get("r") is not None]
    out["beats_baselines"] = bool(others) and all(r > o for o in others)
    if low is None:
        word = f"no interval for r at {head['n']} models: undecided"
    elif low > 0 and tau > 0:
        out["holds"], word = True, "r's interval lies above 0 and tau > 0"
    elif high < 0:
        out["holds"], word = False, "r's interval lies below 0: reversed"
    else:
        word = ("r's interval contains 0: undecided, more models would decide it"
                if low <= 0 <= high else "tau is not positive: undecided")
    interval = "" if low is None else f" [{low:+.2f}, {high:+.2f}]"
    out["reason"] = (f"purity-ratio vs {target} robustness over {head['n']} models: r = "
                     f"{r:+.2f}{interval} (Fisher, 95%), tau = {tau:+.2f}: {word}"
                     + "".join(f"; {b}: r = {v['r']:+.2f}" for b, v in baselines.items()
                               if v.get("r") is not None))
    return out
