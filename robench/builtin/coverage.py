"""Built-in metric ``coverage``: feature-space coverage and coverage-guided accuracy."""

from __future__ import annotations

from robench import hookimpl
from robench.builtin.clusterability import _decode, _f, scores_by_model  # shared helpers
from robench.specs import MetricSpec, Score

METRIC = "coverage"

COVERAGE_DEFINITION = (
    "Coverage testing in a model's feature space (Mani et al., 2019). A reference model is "
    "trained on the stratified random split of repeat 0 (the purity-ratio reference model; "
    "validation carved from the training part). Coverage layer: the last convolutional block's "
    "output (after ReLU and pooling, flattened) where the model has one, else the penultimate "
    "layer; 'layer' in the details says which. Centroids c_i and RMS radii R_i = sqrt(mean "
    "||z - c_i||^2) come from the training features of class i; normalized distance = "
    "||z - c_i|| / R_i. On the test split: EP_i = ns_i * nc / ns (eq. 3); CP_i = share of "
    "class-i test points with normalized distance <= r (eq. 4); BC_i = share with confidence "
    "(top softmax probability) in [theta1, theta2] (eq. 5); PBC_ij = share of class-i test "
    "points in that band whose most probable other class is j (sum_j PBC_ij = BC_i). Defaults "
    "r = 1, [theta1, theta2] = [0.4, 0.6] (stored with the scores; docs/coverage.md). Scores: "
    "ep_min, ep_max, cp and bc (means over classes), pbc (mean over ordered pairs i != j), "
    "pbc_pairs_covered (share of class pairs with a boundary test point). covariate_shift: per "
    "class, 10-component diagonal GMMs on the training and on the test features projected on "
    "the training features' 2 leading principal components, Jensen-Shannon divergence by Monte "
    "Carlo (2,000 samples each) / ln 2 in [0, 1], mean over classes; covariate_shift_null is "
    "the same between two disjoint parts of the training rows (no shift, same sizes). "
    "Coverage-guided generation (Algorithm 1): a set of size N at mix c:b takes round(N c/100) "
    "points from centroid-region seeds and the rest from boundary-band seeds of the test split, "
    "each share split evenly over the classes with seeds; each point = seed + Gaussian noise "
    "N(0, diag((0.1 s_i)^2)), s_i the per-coordinate std of class i's training features "
    "(expected norm 0.1 R_i), clipped at 0 for a ReLU layer, redrawn with halved noise until it is still in its seed's "
    "region (a seed is kept after 12 misses); its label is the seed's ground truth; the model's "
    "own head (the layers after the coverage layer) classifies it. acc@<c>-<b>@<N> for mixes "
    "0-100, 30-70, 50-50, 70-30, 100-0 and N = 100, 300, 700, 1000. coverage (the ranked "
    "score) = coverage-guided accuracy = mean over the five mixes of the accuracy at the "
    "largest N. Image data sets: a decoder (2 dense + 2 transposed-conv layers) from coverage "
    "features to images shows generated examples per mix; decoder_recognised = the model's "
    "accuracy on decoded test images."
)

#: Per-model sub-scores after the headline: (score, higher_is_better) in display order.
#: The paper's ideals: EP near 1, CP towards 0 (not all at the centroid), BC and PBC high.
SUMMARY_SCORES = (
    ("model_acc", True), ("ep_min", True), ("ep_max", False), ("cp", False), ("bc", True),
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
    gen = extra.get("generated") or {}
    table: dict = {}
    for key, g in gen.items():
        mix, _, size = key.partition("@")
        table.setdefault(mix, {})[int(size)] = g.get("accuracy")
    sizes = sorted({s for row in table.values() for s in row})
    largest = sizes[-1] if sizes else None
    by_mix = {m: table[m].get(largest) for m in mix_order(table)}
    from robench.coverage import coverage_guided_accuracy

    ep = [v for v in q.get("ep") or [] if v is not None]
    dec = extra.get("decoder") or {}
    return {
        "headline": coverage_guided_accuracy(by_mix),
        "by_mix": by_mix,
        "largest": largest,
        "table": {m: table[m] for m in mix_order(table)},
        "sizes": sizes,
        "summary": {
            "model_acc": extra.get("model_acc"),
            "ep_min": min(ep) if ep else None,
            "ep_max": max(ep) if ep else None,
            "cp": _mean(q.get("cp")),
            "bc": _mean(q.get("bc")),
            "pbc": (q.get("pbc_summary") or {}).get("mean"),
            "pbc_pairs_covered": (q.get("pbc_summary") or {}).get("pairs_covered"),
            "covariate_shift": _mean(shift.get("js")),
            "covariate_shift_null": _mean(shift.get("null")),
            "decoder_recognised": dec.get("recognised"),
        },
    }


def aggregate_coverage(group: dict, trials: list) -> list:
    """Turn a (dataset, model)'s coverage trial into its scores."""
    base = dict(dataset=group["dataset"], model=group["model"], clusterer="", metric=METRIC)
    rows = [t for t in trials if t.get("protocol") == "coverage"]
    if not rows:
        return []
    row = rows[-1]
    if row.get("status") != "ok":
        err = (row.get("error") or "").splitlines()[0] if row.get("error") else "failed"
        return [Score(**base, score=METRIC, value=None, details={"error": err})]
    extra = _decode(row.get("extra"))
    reason = row.get("not_applicable") or extra.get("not_applicable")
    if reason:
        return [Score(**base, score=METRIC, value=None, details={"not_applicable": reason})]
    s = summarize(extra)
    gen = extra.get("generated") or {}
    missing = {k: g.get("error") for k, g in gen.items() if g.get("accuracy") is None}
    q = extra.get("quality") or {}
    dec = extra.get("decoder") or {}
    details = {
        "layer": extra.get("layer"), "layer_description": extra.get("layer_description"),
        "feature_dim": extra.get("feature_dim"), "knobs": extra.get("knobs"),
        "by_mix": s["by_mix"], "size": s["largest"], "table": s["table"],
        "quality": q, "covariate_shift": extra.get("covariate_shift"),
        "seeds": extra.get("seeds"), "timings": extra.get("timings"),
        "decoder": {k: v for k, v in dec.items()},
    }
    if s["headline"] is None:
        details["not_computable"] = "; ".join(sorted(set(v for v in missing.values() if v))) or \
            "no generated set"
    scores = [Score(**base, score=METRIC, value=s["headline"], n=s["largest"], details=details)]
    for name, higher in SUMMARY_SCORES:
        value = s["summary"].get(name)
        if value is None and name == "decoder_recognised":
            continue
        scores.append(Score(**base, score=name, value=value, higher_is_better=higher,
                            n=extra.get("n_test")))
    for key, g in gen.items():
        scores.append(Score(**base, score=f"acc@{key}", value=g.get("accuracy"), n=g.get("n"),
                            details={k: v for k, v in g.items() if k != "accuracy"}))
    return scores


@hookimpl
def register_metrics(register):
    register(MetricSpec(
        name=METRIC,
        description="Coverage-guided accuracy: accuracy on feature-space test sets generated "
                    "from centroid and boundary points (5 mixes); EP/CP/BC/PBC, covariate shift.",
        needs_features=True,
        protocol="coverage",
        aggregate=aggregate_coverage,
        definition=COVERAGE_DEFINITION,
        higher_is_better=True,
        uses_clusterer=False,
        version="2",  # 2: generation noise shaped by the class spread
    ))


# --- text report (robench run / robench results) -----------------------------------------------


def _by_dataset(rows: list) -> dict:
    out: dict = {}
    for r in rows:
        if r.get("metric") == METRIC:
            out.setdefault(r["dataset"], {}).setdefault(r["model"], {})[r["score"]] = r
    return out


def _ranked(models: dict) -> list:
    return sorted(models.items(), key=lambda kv: (
        -((kv[1].get(METRIC) or {}).get("value") or -1), kv[0]))


def report_lines(rows: list) -> list:
    """Return the coverage tables (summary, then mixes x sizes) of score rows (dicts) as text."""
    lines = []
    for dataset, models in sorted(_by_dataset(rows).items()):
        lines.append(f"\n{dataset} - coverage (Mani et al.); ranked by coverage-guided accuracy "
                     "(mean over mixes at the largest size); accuracies in %")
        lines.append(f"  {'model':<18} {'layer':<11} {'cov-acc':>7} {'ACC':>6} {'EP min':>6} "
                     f"{'EP max':>6} {'CP':>6} {'BC':>6} {'PBC':>6} {'pairs':>6} {'shift':>6} "
                     f"{'null':>6}")
        tables = []
        for model, sc in _ranked(models):
            head = sc.get(METRIC) or {}
            det = _decode(head.get("details"))
            if head.get("value") is None and (det.get("not_applicable") or det.get("error")):
                why = det.get("not_applicable") or det.get("error")
                prefix = "not applicable: " if det.get("not_applicable") else ""
                lines.append(f"  {model:<18} {prefix}{why}")
                continue
            g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
            lines.append(
                f"  {model:<18} {str(det.get('layer') or '-'):<11} "
                f"{_f(head.get('value'), True, 7)} {_f(g('model_acc'), True, 6)} "
                f"{_f(g('ep_min'), width=6)} {_f(g('ep_max'), width=6)} {_f(g('cp'), width=6)} "
                f"{_f(g('bc'), width=6)} {_f(g('pbc'), width=6)} "
                f"{_f(g('pbc_pairs_covered'), width=6)} {_f(g('covariate_shift'), width=6)} "
                f"{_f(g('covariate_shift_null'), width=6)}")
            if det.get("not_computable"):
                lines.append(f"  {'':<18} coverage-guided accuracy not computable: "
                             f"{det['not_computable']}")
            tables.append((model, det.get("table") or {}))
        for model, table in tables:
            sizes = sorted({int(s) for row in table.values() for s in row})
            if not sizes:
                continue
            lines.append(f"  {model}: accuracy (%) per generated set, rows = size, columns = "
                         "centroid-boundary mix")
            mixes = mix_order(table)
            lines.append("    " + f"{'size':>6}" + "".join(f"{m:>9}" for m in mixes))
            for size in sizes:
                cells = [table[m].get(str(size), table[m].get(size)) for m in mixes]
                lines.append("    " + f"{size:>6}" + "".join(_f(c, True, 9) for c in cells))
    return lines


def leaderboard_tables(rows: list) -> dict:
    """Return the leaderboard context of one data set's coverage score rows (dicts)."""
    models = scores_by_model(rows, METRIC)
    if not models:
        return {}
    out = []
    for model, sc in models.items():
        head = sc.get(METRIC) or {}
        det = _decode(head.get("details"))
        g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
        by_mix = det.get("by_mix") or {}
        dec = det.get("decoder") or {}
        out.append({
            "model": model, "value": head.get("value"), "higher_is_better": True,
            "note": (f"not applicable: {det['not_applicable']}" if det.get("not_applicable")
                     else det.get("error") or det.get("not_computable")),
            "layer": det.get("layer"), "feature_dim": det.get("feature_dim"),
            "mixes": mix_order(by_mix), "by_mix": by_mix, "size": det.get("size"),
            "curve": _curve(by_mix),
            "table": det.get("table") or {},
            "knobs": det.get("knobs") or {},
            "decoder": dec if dec.get("rows") or dec.get("not_applicable") else None,
            **{k: g(k) for k, _ in SUMMARY_SCORES},
        })
    return {"models": out}


def _curve(by_mix: dict, width: int = 120, height: int = 36) -> dict:
    """Return SVG polyline points of accuracy (0-100% bottom-top) against the centroid share."""
    pts = []
    for m in mix_order(by_mix):
        v = by_mix[m]
        if v is None:
            continue
        x = float(m.split("-")[0]) / 100.0
        pts.append(f"{2 + x * (width - 4):.1f},{2 + (1 - v) * (height - 4):.1f}")
    return {"points": " ".join(pts), "width": width, "height": height}
