"""Coverage testing (Mani et al., 2019): the ``coverage`` protocol.

One trial = one reference model of a (dataset, model, repeat) and everything computed from it:
calibration, EP, CP, BC, PBC, covariate shift, every (mix, size) generated set and, on image
data sets at repeat 0, a decoder for the strips. docs/coverage.md has the steps.
"""

from __future__ import annotations

import time

import numpy as np

from robench.data.boundary import check_model_input, predict_checked
from robench.learn.reference_model import fit_reference, not_applicable_row, trial_row
from robench.stats.seeds import derived_seed
from robench.specs import Knob
from robench.run.trials import Combo, make_spec
from robench.families.coverage import science as cov
from robench.learn.features import feature_support
from robench.learn.multicut import stratified_subsample

NAME = "coverage"
# 2: noise shaped by the class spread (was isotropic); 3: boundary seeds by the paper's rule
# (Algorithm 1: true-class probability <= wc_l) by default, the band as an option; 4: confidence
# calibrated by temperature scaling on the validation split before regions, generation and
# scoring (knob confidence; the paper's raw softmax is confidence=raw)
VERSION = "4"
KIND = "reference"
DESCRIPTION = ("R reference models per (data set, model): test-set coverage (EP, CP, BC, "
               "PBC), covariate shift, and coverage-guided generated test sets.")
#: Scheduled after these protocols' trials in a run: it reuses their cached reference models.
AFTER = ("clusterability",)

SECTION = "coverage"

#: The protocol's knobs (``--set coverage.KEY=VALUE``). Why these defaults: docs/coverage.md.
KNOBS = (
    Knob("repeats", "int", "reference models (seeds) per combination; the score is their mean "
         "with a t interval", default=3, profiles={"standard": 5, "paper": 5},
         minimum=1, maximum=10_000),
    Knob("radius", "float", "r: centroid region = normalized distance <= r (unit: class RMS "
         "radius)", default=1.0, minimum=1e-9),
    Knob("confidence", "str", "confidence the regions are defined by: 'calibrated' (softmax "
         "after temperature scaling fitted by NLL on the validation split) or 'raw' (the "
         "paper's softmax as the model gives it)", default="calibrated",
         choices=("calibrated", "raw")),
    Knob("boundary_rule", "str", "boundary seeds: 'paper' (Algorithm 1: weakly misclassified, "
         "true-class probability <= wc_l) or 'band' (top probability in [theta1, theta2]); "
         "both are reported", default="paper", choices=("paper", "band")),
    Knob("wc_l", "float", "the paper rule's bound on the true-class probability (the paper "
         "gives none, only wc_l < theta2)", default=0.5, minimum=0.0, maximum=1.0),
    Knob("theta1", "float", "boundary band: top softmax probability >= theta1", default=0.4,
         minimum=0.0, maximum=1.0),
    Knob("theta2", "float", "boundary band: top softmax probability <= theta2", default=0.6,
         minimum=0.0, maximum=1.0),
    Knob("mixes", "list", "centroid:boundary percent of each generated set",
         default=[list(m) for m in cov.MIXES], items="list"),
    Knob("sizes", "list", "sizes of the generated sets", default=list(cov.SIZES), items="int",
         minimum=1),
    Knob("step", "float", "generation noise: expected norm step * R_i", default=0.1,
         minimum=0.0),
    Knob("max_tries", "int", "redraws (noise halved each time) before a seed is kept "
         "unperturbed", default=12, minimum=1),
    Knob("shift_dims", "int", "covariate shift: leading principal components of training "
         "features", default=2, minimum=1),
    Knob("shift_components", "int", "GMM components per class (the paper's 10)", default=10,
         minimum=1),
    Knob("shift_covariance", "str", "GMM covariance type", default="diag",
         choices=("full", "tied", "diag", "spherical")),
    Knob("shift_mc", "int", "Monte Carlo samples per distribution", default=2000,
         profiles={"paper": 5000}, minimum=10),
    Knob("decoder_epochs", "int", "epochs of the decoder that draws generated points; 0: no "
         "images", default=6, profiles={"paper": 20}, minimum=0),
    Knob("decoder_width", "int", "channels of the decoder", default=16, minimum=1),
    Knob("decoder_train_cap", "int", "training rows (stratified) the decoder learns from; "
         "null: all", default=2000, profiles={"paper": None}, minimum=1, nullable=True),
    Knob("decoder_legible", "float", "legible if the model's accuracy on decoded test images "
         ">= this x clean", default=0.8, minimum=0.0, maximum=1.0),
)


def validate(knobs: dict) -> None:
    """Raise ValueError naming the problem if the knobs cannot define the measures."""
    if not knobs["radius"] > 0:
        raise ValueError(f"coverage.radius must be > 0, got {knobs['radius']}")
    if not 0 <= knobs["theta1"] <= knobs["theta2"] <= 1:
        raise ValueError("coverage needs 0 <= theta1 <= theta2 <= 1, got "
                         f"theta1={knobs['theta1']}, theta2={knobs['theta2']}")
    for mix in knobs["mixes"]:
        if (not isinstance(mix, list) or len(mix) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in mix)
                or min(mix) < 0 or sum(mix) != 100):
            raise ValueError(f"coverage.mixes: every mix is [centroid %, boundary %], two "
                             f"integers summing to 100, got {mix}")
    if not isinstance(knobs["repeats"], int) or knobs["repeats"] < 1:
        raise ValueError(f"coverage.repeats must be an integer >= 1, got {knobs['repeats']!r}")
    if not knobs["sizes"] or min(knobs["sizes"]) < 1:
        raise ValueError(f"coverage.sizes must be positive, got {knobs['sizes']}")


#: Knobs that shape the plan, not a trial: kept out of the trial parameters (and keys).
PLAN_KNOBS = ("repeats",)


def repeat_seed(seed: int, repeat: int) -> int:
    """Return a repeat's reference-model seed: the run's for repeat 0, else a derived one."""
    return int(seed) if int(repeat) == 0 else derived_seed(int(seed), int(repeat), 0xC0FE)


def plan(combo: Combo, cfg, registry) -> list:
    """Return the combination's coverage trials, one per repeat (reference model)."""
    knobs = dict(cfg.knobs[SECTION])
    validate(knobs)
    return [make_spec(NAME, VERSION, combo, cfg, registry, kind=KIND, repeat=r,
                      params={"test_size": cfg.test_size, "val_fraction": cfg.val_fraction,
                              "train": cfg.train, "analysis": {
                                  k.name: knobs[k.name] for k in KNOBS
                                  if k.name not in PLAN_KNOBS}}, with_clusterer=False)
            for r in range(int(knobs["repeats"]))]


def _finite_list(a) -> list:
    return [None if v is None or not np.isfinite(v) else float(v) for v in np.asarray(a, float)]


def run(spec: dict, env) -> dict:
    """Run one coverage trial (see the module docstring)."""
    t0 = time.perf_counter()
    timings = {}
    dataset = env.dataset(spec["dataset"])
    knobs = spec["params"]["analysis"]
    repeat = int(spec.get("repeat") or 0)
    seed = repeat_seed(spec["seed"], repeat)
    nc, y = dataset.n_classes, dataset.y
    ref = fit_reference({**spec, "seed": seed}, env, dataset, applicable=feature_support)
    fit, val, test, clf, base = ref["fit"], ref["val"], ref["test"], ref["clf"], ref["base"]
    if ref["not_applicable"]:
        return not_applicable_row(base, ref["not_applicable"], t0)
    space, reason = cov.feature_space(clf)
    if space is None:
        return not_applicable_row(base, reason, t0)
    timings["train"] = time.perf_counter() - t0

    t = time.perf_counter()
    confidence = knobs.get("confidence", "raw")  # trials before protocol 4 used the raw softmax
    # calibrated on the validation split carved from the training part: never the test split
    calibration = (cov.fit_temperature(space.logits(space.encode(dataset.rows(val))), y[val])
                   if confidence == "calibrated" else cov.Calibration())
    space = cov.calibrated_space(space, calibration)
    timings["calibration"] = time.perf_counter() - t
    t = time.perf_counter()
    Z_fit, Z_test = space.encode(dataset.rows(fit)), space.encode(dataset.rows(test))
    y_fit, y_test = y[fit], y[test]
    P_fit, P_test = space.proba(Z_fit), space.proba(Z_test)
    timings["features"] = time.perf_counter() - t
    model_acc = float((P_test.argmax(1) == y_test).mean())

    r, th1, th2 = float(knobs["radius"]), float(knobs["theta1"]), float(knobs["theta2"])
    centroids, radius = cov.class_centroids(Z_fit, y_fit, nc)
    d_test = cov.normalized_distance(Z_test, y_test, centroids, radius)
    d_fit = cov.normalized_distance(Z_fit, y_fit, centroids, radius)
    pbc = cov.pairwise_boundary(P_test, y_test, nc, th1, th2)
    rule, wc_l = knobs.get("boundary_rule", "band"), float(knobs.get("wc_l", cov.PAPER_WC_L))
    quality = {
        "ep": _finite_list(cov.equivalence_partitioning(y_test, nc)),
        "cp": _finite_list(cov.centroid_positioning(d_test, y_test, nc, r)),
        "bc": _finite_list(cov.boundary_conditioning(P_test, y_test, nc, th1, th2)),
        "bc_paper": _finite_list(cov.paper_boundary_conditioning(P_test, y_test, nc, wc_l)),
        "pbc": [_finite_list(row) for row in pbc], "pbc_summary": cov.summarize_pbc(pbc),
        "cp_train": _finite_list(cov.centroid_positioning(d_fit, y_fit, nc, r)),
        "bc_train": _finite_list(cov.boundary_conditioning(P_fit, y_fit, nc, th1, th2)),
        "distance_quantiles_test": _finite_list(
            np.nanquantile(d_test, [0.1, 0.25, 0.5, 0.75, 0.9])),
        "n_test_per_class": np.bincount(y_test, minlength=nc).tolist()}

    t = time.perf_counter()
    shift = cov.covariate_shift(Z_fit, y_fit, Z_test, y_test, nc, dims=int(knobs["shift_dims"]),
                                n_components=int(knobs["shift_components"]),
                                covariance_type=knobs["shift_covariance"],
                                n_mc=int(knobs["shift_mc"]), seed=seed)
    timings["covariate_shift"] = time.perf_counter() - t

    t = time.perf_counter()
    clip = 0.0 if float(Z_fit.min()) >= 0.0 else None
    regions = cov.Regions(centroids, radius, r, th1, th2, space.proba, clip_min=clip,
                          spread=cov.class_spread(Z_fit, y_fit, nc), boundary_rule=rule,
                          wc_l=wc_l)
    generated, examples = {}, {}
    for mix in knobs["mixes"]:
        name = cov.mix_name(mix)
        for size in knobs["sizes"]:
            gseed = derived_seed(seed, 0xC0, int(mix[0]), int(size))
            try:
                g = cov.generate(Z_test, y_test, regions, mix, int(size), seed=gseed,
                                 step=float(knobs["step"]), max_tries=int(knobs["max_tries"]))
            except cov.NoSeeds as exc:
                generated[f"{name}@{size}"] = {"accuracy": None, "error": str(exc)}
                continue
            right = space.proba(g["Z"]).argmax(1) == g["y"]
            c, b = g["origin"] == "c", g["origin"] == "b"
            stay = np.where(c, regions.in_centroid(g["Z"], g["y"]),
                            regions.in_boundary(g["Z"], g["y"]))
            generated[f"{name}@{size}"] = {
                "accuracy": float(right.mean()), "n": int(len(g["y"])),
                "n_centroid": int(c.sum()), "n_boundary": int(b.sum()),
                "acc_centroid": _mean_or_none(right[c]), "acc_boundary": _mean_or_none(right[b]),
                "in_region": float(stay.mean()), "unperturbed": g["unperturbed"],
                "mean_tries": g["mean_tries"],
                "ep": _finite_list(cov.equivalence_partitioning(g["y"], nc))}
            if size == max(knobs["sizes"]):
                examples[name] = g
    timings["generation"] = time.perf_counter() - t

    extra = {
        "model_acc": model_acc, "layer": space.layer, "layer_description": space.description,
        "feature_dim": int(Z_test.shape[1]), "n_test": int(len(test)), "n_fit": int(len(fit)),
        "model_cache_hit": bool(ref["hit"]),
        "reference_seed": int(seed),  # split and training seed of this repeat's model
        "clip_min": clip,
        "knobs": {"radius": r, "theta1": th1, "theta2": th2, "step": float(knobs["step"]),
                  "max_tries": int(knobs["max_tries"]), "boundary_rule": rule, "wc_l": wc_l,
                  "confidence": confidence},
        "calibration": calibration.as_dict(),
        "quality": quality,
        "covariate_shift": shift,
        "seeds": {"centroid": int(regions.in_centroid(Z_test, y_test).sum()),
                  "boundary": int(regions.in_boundary(Z_test, y_test).sum()),
                  # both rules, whichever generates: how many test points each calls boundary
                  "boundary_paper": int(cov.paper_boundary(P_test, y_test, wc_l).sum()),
                  "boundary_band": int(cov.in_band(P_test, th1, th2).sum()),
                  "n_test": int(len(test)), "rule": rule},
        "generated": generated,
    }
    why = (f"data set '{dataset.name}' is not an image data set" if dataset.image_shape is None
           else "decoded examples are drawn for repeat 0 only" if repeat > 0
           else "decoder_epochs is 0" if int(knobs["decoder_epochs"]) <= 0 else None)
    if why:
        extra["decoder"] = {"not_applicable": why}
    else:
        t = time.perf_counter()
        extra["decoder"] = _decoder_grid(space, clf, dataset, fit, test, Z_fit, Z_test,
                                         examples, knobs, seed)
        timings["decoder"] = time.perf_counter() - t
    extra["timings"] = timings
    return trial_row(base, clf, model_acc, extra, t0)


def _mean_or_none(a):
    return float(a.mean()) if len(a) else None


def _decoder_grid(space, clf, dataset, fit, test, Z_fit, Z_test, examples, knobs, seed) -> dict:
    """Train the decoder, check it is legible, render one strip per mix (one column per class)."""
    shape = tuple(dataset.image_shape)
    sub = stratified_subsample(dataset.y[fit], knobs["decoder_train_cap"], seed)
    dec = cov.train_decoder(Z_fit[sub], dataset.rows(fit[sub]).reshape((len(sub),) + shape),
                            seed=derived_seed(seed, 0xDEC), epochs=int(knobs["decoder_epochs"]),
                            width=int(knobs["decoder_width"]))
    y_test = dataset.y[test]
    recon = cov.decode(dec, Z_test)
    X_test = dataset.rows(test)
    originals = X_test.reshape(recon.shape)
    name = type(clf).__name__

    def accuracy(X, what):
        return float((predict_checked(clf, X, dataset.n_classes, name, what) == y_test).mean())

    clean = accuracy(X_test, "test rows")
    recognised = accuracy(check_model_input(recon.reshape(len(recon), -1), name,
                                            "images decoded from test features"), "decoded images")
    legible = bool(clean > 0 and recognised >= float(knobs["decoder_legible"]) * clean)
    classes = range(min(dataset.n_classes, 10))

    def strip(images, y):  # the first image of each class, a grey cell where none
        first = [np.flatnonzero(y == c)[:1] for c in classes]
        return cov.png_strip([images[f[0]] if f.size else None for f in first])

    rows = [{"label": "test images", "png": strip(originals, y_test)},
            {"label": "decoded from their features", "png": strip(recon, y_test)}]
    rows += [{"label": f"generated, mix {mix}", "png": strip(cov.decode(dec, g["Z"]), g["y"])}
             for mix, g in examples.items()]
    return {"recognised": recognised, "clean": clean, "legible": legible,
            "mse": float(((recon - originals) ** 2).mean()),
            "rule": f"legible if the model classifies >= {knobs['decoder_legible']} x its clean "
                    "accuracy of decoded test images correctly",
            "columns": [str(c) for c in classes], "rows": rows}
