"""The ``coverage`` metric (Mani et al.): feature-space coverage and coverage-guided accuracy."""

from __future__ import annotations

from robench.metric_kit import by_repeat, failure, not_applicable
from robench.present.formatting import as_dict
from robench.specs import Score
from robench.families.coverage.protocol import NAME as PROTOCOL
from robench.families.coverage.protocol import SECTION
from robench.families.coverage.science import coverage_guided_accuracy
from robench.stats.intervals import mean_interval

METRIC = "coverage"
#: 5: confidence calibrated by temperature scaling on the validation split (knob confidence;
#: raw = the paper's softmax), per-repeat values of every summary score; 4: boundary seeds by
#: the paper rule by default, both rules reported; 3: mean over reference models with a t CI;
#: 2: class-spread noise.
VERSION = "5"
DESCRIPTION = ("Coverage-guided accuracy: accuracy on feature-space test sets generated "
               "from centroid and boundary points (5 mixes); EP/CP/BC/PBC, covariate shift.")
HIGHER_IS_BETTER = True
USES_CLUSTERER = False
NEEDS_FEATURES = True
DISPLAY_ORDER = 30
#: The plugin module that registered coverage before the families moved (score fingerprints).
MOVED_FROM = "robench.builtin.coverage"
REFERENCES = (("Senthil Mani, Anush Sankaran, Srikanth Tamilselvam and Akshay Sethi, "
               "Coverage Testing of Deep Learning Models using Dataset Characterization "
               "(2019)", "https://arxiv.org/abs/1911.07309"),)
#: Repeat r of every model shares its split and seed (racing: --until decided, --budget); the
#: knob that sets the repeats, which racing raises look by look.
REPEATS_KNOB = f"{SECTION}.repeats"
#: Practical-equivalence margin of coverage's pair verdicts, in accuracy (``ROBENCH_MARGIN=
#: "coverage=..."`` or ``--precision`` sets another; docs/intervals.md says why 2 points).
MARGIN = 0.02

DEFINITION = (
    "Coverage testing in a model's feature space (Mani et al., 2019). R reference models "
    "(coverage.repeats, default 3): repeat 0 is trained on the stratified random split of repeat 0 "
    "(the purity-ratio reference model; validation carved from the training part), repeat r > 0 by "
    "the same recipe with another seed (another split, initialisation and batch order). Everything "
    "below is computed per reference model; every score is the mean over the R models, and the "
    "headline has a 95% Student-t CI over them, clipped to [0, 1] (the spread over reference "
    "models: their splits, hence seeds, and their training). Coverage layer: the last "
    "convolutional block's output (after ReLU and pooling, flattened) where the model has one, "
    "else the penultimate layer; 'layer' in the details says which. Centroids c_i and RMS radii "
    "R_i = sqrt(mean ||z - c_i||^2) come from the training features of class i; normalized "
    "distance = ||z - c_i|| / R_i. Confidence (version 5): the head's softmax after temperature "
    "scaling, one temperature per reference model fitted by negative log-likelihood on the "
    "validation split carved from the training part (never the test split), so no region, "
    "generated point or score depends on the scale of the logits; knob confidence=raw keeps the "
    "paper's raw softmax. On the test split: EP_i = ns_i * nc / ns (eq. 3); CP_i = share of "
    "class-i test points with normalized distance <= r (eq. 4); BC_i = share with confidence (top "
    "softmax probability) in [theta1, theta2] (eq. 5); PBC_ij = share of class-i test points in "
    "that band whose most probable other class is j (sum_j PBC_ij = BC_i); bc_paper: the same "
    "share under the paper's rule (Algorithm 1: true-class probability <= wc_l, default 0.5). "
    "boundary_share_paper / boundary_share_band: the share of all test points that are boundary "
    "seeds under each rule. Defaults r = 1, [theta1, theta2] = [0.4, 0.6] (stored with the scores; "
    "docs/coverage.md). Scores: ep_min, ep_max, cp and bc (means over classes), pbc (mean over "
    "ordered pairs i != j), pbc_pairs_covered (share of class pairs with a boundary test point). "
    "covariate_shift: per class, 10-component diagonal GMMs on the training and on the test "
    "features projected on the training features' 2 leading principal components, Jensen-Shannon "
    "divergence by Monte Carlo (2,000 samples each) / ln 2 in [0, 1], mean over classes; "
    "covariate_shift_null is the same between two disjoint parts of the training rows (no shift, "
    "same sizes). Coverage-guided generation (Algorithm 1): a set of size N at mix c:b takes "
    "round(N c/100) points from centroid-region seeds and the rest from boundary seeds of the test "
    "split (version 4: by the paper's rule, weakly misclassified points, knob boundary_rule; the "
    "top-probability band [theta1, theta2] with boundary_rule=band), each share split evenly over "
    "the classes with seeds; each point = seed + Gaussian noise N(0, diag((0.1 s_i)^2)), s_i the "
    "per-coordinate std of class i's training features (expected norm 0.1 R_i), clipped at 0 for a "
    "ReLU layer, redrawn with halved noise until it is still in its seed's region (a seed is kept "
    "after 12 misses); its label is the seed's ground truth; the model's own head (the layers "
    "after the coverage layer) classifies it. acc@<c>-<b>@<N> for mixes 0-100, 30-70, 50-50, "
    "70-30, 100-0 and N = 100, 300, 700, 1000. coverage (the ranked score) = coverage-guided "
    "accuracy = mean over the five mixes of the accuracy at the largest N, averaged over the R "
    "reference models. Image data sets (repeat 0): a decoder (2 dense + 2 transposed-conv layers) "
    "from coverage features to images shows generated examples per mix; decoder_recognised = the "
    "model's accuracy on decoded test images."
)

#: Per-model sub-scores after the headline: (score, higher_is_better) in display order.
#: The paper's ideals: EP near 1, CP towards 0 (not all at the centroid), BC and PBC high.
SUMMARY_SCORES = (
    ("model_acc", True), ("ep_min", True), ("ep_max", False), ("cp", False), ("bc", True),
    ("bc_paper", True), ("boundary_share_paper", True), ("boundary_share_band", True),
    ("pbc", True), ("pbc_pairs_covered", True), ("covariate_shift", False),
    ("covariate_shift_null", False), ("decoder_recognised", True),
)


def _mean(values):
    vals = [v for v in values or [] if v is not None]
    return sum(vals) / len(vals) if vals else None


def mix_order(mixes) -> list:
    """Return mix names ordered by their centroid share (0-100 first)."""
    return sorted(mixes, key=lambda m: float(m.split("-")[0]))


def summarize(extra: dict) -> dict:
    """Return the summary scores, the accuracy table and the headline of one trial's extra."""
    q = extra.get("quality") or {}
    shift = extra.get("covariate_shift") or {}
    table: dict = {}
    for key, g in (extra.get("generated") or {}).items():
        mix, _, size = key.partition("@")
        table.setdefault(mix, {})[int(size)] = g.get("accuracy")
    sizes = sorted({s for row in table.values() for s in row})
    largest = sizes[-1] if sizes else None
    by_mix = {m: table[m].get(largest) for m in mix_order(table)}
    ep = [v for v in q.get("ep") or [] if v is not None]
    seeds = extra.get("seeds") or {}

    def share(key):
        n = seeds.get("n_test")
        return seeds[key] / n if n and seeds.get(key) is not None else None

    return {
        "headline": coverage_guided_accuracy(by_mix), "by_mix": by_mix, "largest": largest,
        "table": {m: table[m] for m in mix_order(table)}, "sizes": sizes,
        "summary": {
            "model_acc": extra.get("model_acc"),
            "ep_min": min(ep) if ep else None, "ep_max": max(ep) if ep else None,
            "cp": _mean(q.get("cp")), "bc": _mean(q.get("bc")),
            "bc_paper": _mean(q.get("bc_paper")),
            "boundary_share_paper": share("boundary_paper"),
            "boundary_share_band": share("boundary_band"),
            "pbc": (q.get("pbc_summary") or {}).get("mean"),
            "pbc_pairs_covered": (q.get("pbc_summary") or {}).get("pairs_covered"),
            "covariate_shift": _mean(shift.get("js")),
            "covariate_shift_null": _mean(shift.get("null")),
            "decoder_recognised": (extra.get("decoder") or {}).get("recognised")}}


def t_interval(values, level: float = 0.95):
    """Return (mean, low, high) of Student's t over repeats, clipped to [0, 1] (None, None
    for a single value)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None, None
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, None, None
    from scipy import stats

    sd = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
    half = float(stats.t.ppf(0.5 + level / 2, len(vals) - 1)) * sd / len(vals) ** 0.5
    return mean, max(0.0, mean - half), min(1.0, mean + half)  # accuracies lie in [0, 1]


def _mean_tables(tables: list) -> dict:
    """Return the cell-wise mean of (mix -> size -> accuracy) tables, skipping missing cells."""
    out: dict = {}
    for mix in mix_order({m for t in tables for m in t}):
        sizes = sorted({int(k) for t in tables for k in t.get(mix, {})})
        out[mix] = {size: _mean([t.get(mix, {}).get(size) for t in tables]) for size in sizes}
    return out


def aggregate(group: dict, trials: list) -> list:
    """Turn a (dataset, model)'s coverage trials into its scores: means over the repeats
    that ran (details such as layer, knobs and quality: repeat 0's)."""
    base = dict(dataset=group["dataset"], model=group["model"], clusterer="", metric=METRIC)
    rows = list(by_repeat(trials, protocol=PROTOCOL).values())
    if not rows:
        return []
    ok = [r for r in rows if failure(r) is None]
    failed = {int(r.get("repeat") or 0): failure(r) for r in rows if failure(r) is not None}
    if not ok:
        return [Score(**base, score=METRIC, value=None, details={"error": failed[min(failed)]})]
    extras = [as_dict(r.get("extra")) for r in ok]
    reason = not_applicable({**ok[0], "extra": extras[0]})
    if reason:
        return [Score(**base, score=METRIC, value=None, details={"not_applicable": reason})]
    summaries = [summarize(e) for e in extras]
    return ([_headline_score(base, ok, extras, summaries, failed)]
            + _summary_scores(base, extras, summaries) + _mix_scores(base, extras))


def _headline_score(base: dict, ok: list, extras: list, summaries: list, failed: dict) -> Score:
    """Return the headline: coverage-guided accuracy, the mean over the repeats with its t CI."""
    s0, extra = summaries[0], extras[0]
    headline, lo, hi = t_interval([s["headline"] for s in summaries])
    by_mix = {m: _mean([s["by_mix"].get(m) for s in summaries]) for m in s0["by_mix"]}
    details = {
        **{k: extra.get(k) for k in ("layer", "layer_description", "feature_dim", "knobs")},
        "by_mix": by_mix, "size": s0["largest"],
        "table": _mean_tables([s["table"] for s in summaries]),
        "repeats": len(ok), "per_repeat": [s["headline"] for s in summaries],
        "repeat_ids": [int(r.get("repeat") or 0) for r in ok],
        "reference_seeds": [e.get("reference_seed") for e in extras], "failed_repeats": failed,
        **{k: extra.get(k) for k in ("quality", "covariate_shift", "seeds", "timings",
                                     "calibration")},
        "temperatures": [(e.get("calibration") or {}).get("temperature") for e in extras],
        "decoder": dict(extra.get("decoder") or {})}
    if headline is None:
        details["not_computable"] = _not_computable(extras)
    return Score(**base, score=METRIC, value=headline, ci_low=lo, ci_high=hi, n=len(ok),
                 details=details)


def _not_computable(extras: list) -> str:
    """Return why no headline: the errors of the generated sets without an accuracy."""
    missing = {k: g.get("error") for e in extras for k, g in (e.get("generated") or {}).items()
               if g.get("accuracy") is None}
    return "; ".join(sorted(set(v for v in missing.values() if v))) or "no generated set"


def _summary_scores(base: dict, extras: list, summaries: list) -> list:
    """Return the sub-scores of :data:`SUMMARY_SCORES`, each the mean over the repeats."""
    scores = []
    for name, higher in SUMMARY_SCORES:
        decoder = name == "decoder_recognised"  # the decoder is drawn for repeat 0 only
        per = [s["summary"].get(name) for s in (summaries[:1] if decoder else summaries)]
        if not (decoder and per[0] is None):
            scores.append(Score(**base, score=name, value=_mean(per), higher_is_better=higher,
                                n=extras[0].get("n_test"), details={"per_repeat": per}))
    return scores


def _mix_scores(base: dict, extras: list) -> list:
    """Return acc@<mix>@<size> of every generated set of repeat 0, each the mean over repeats."""
    scores = []
    for key, g in (extras[0].get("generated") or {}).items():
        per = [(e.get("generated") or {}).get(key, {}).get("accuracy") for e in extras]
        scores.append(Score(**base, score=f"acc@{key}", value=_mean(per), n=g.get("n"),
                            details={**{k: v for k, v in g.items() if k != "accuracy"},
                                     "per_repeat": per}))
    return scores


def paired_values(trial: dict):
    """Return ("x", coverage-guided accuracy) of a finished coverage trial, else None."""
    if trial.get("protocol") != PROTOCOL or failure(trial) is not None:
        return None
    extra = as_dict(trial.get("extra"))
    if not extra or not_applicable({**trial, "extra": extra}):
        return None
    value = summarize(extra)["headline"]
    return None if value is None else ("x", float(value))


def interval_at(score, level: float):
    """Return the headline's Student-t interval over its repeats at ``level``, or None."""
    per = [v for v in ((score.details or {}).get("per_repeat") or []) if v is not None]
    if score.score != METRIC or len(per) < 2:
        return None
    return mean_interval(per, level, bounds=(0.0, 1.0))
