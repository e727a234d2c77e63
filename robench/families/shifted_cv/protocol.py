"""Shifted K-fold cross-validation (Sun et al., VAE-VGMM; Algorithms 1 and 2) vs random K-fold.

Per repeat, each class's K sub-domains (the run's clusterer's sources) merge into K folds
(:func:`merge_folds`), against a seeded stratified K-fold; one ``wasserstein`` trial per
(dataset, clusterer), model ``""``, holds the folds' distances. docs/shifted-cv.md explains.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from robench.metric_kit import failure
from robench.stats.seeds import derived_seed
from robench.specs import Knob, ModelContext
from robench.learn.inputs import model_inputs
from robench.run.trials import Combo, accuracy_per_class, keyed_spec, make_spec
from robench.data.sources import find_sources, sources_key
from robench.data.splitters import validation_split
from robench.data.boundary import check_model_input, predict_checked
from robench.run.config import TRAIN_KNOBS, check_value

NAME = "shifted-cv"
VERSION = "1"
DESCRIPTION = ("K sub-domains per class merged into K folds (Algorithms 1-2) vs "
               "stratified random K-fold; VAE latent Wasserstein distances between folds.")
KINDS = ("shifted", "random")
WASSERSTEIN = "wasserstein"
#: Random-stream codes of this protocol's partitions (apart from the splitters' 1-3).
KIND_CODES = {"shifted": 11, "random": 12, WASSERSTEIN: 13}
#: POT's network simplex: first and last iteration budgets tried (raised tenfold in between).
NUM_ITERMAX = 1_000_000
MAX_NUM_ITERMAX = 100_000_000


SECTION = "shifted_cv"

#: The protocol's knobs (``--set shifted_cv.KEY=VALUE``): quick is a smoke-test scale,
#: standard 5 folds x 2 repeats, paper the paper code's settings.
KNOBS = (
    Knob("folds", "int", "K: sub-domains per class, merged into K folds", default=5,
         profiles={"quick": 3, "standard": 5}, minimum=2, maximum=1_000),
    Knob("repeats", "int", "repeats of the K-fold CV (capped by --repeats)", default=1,
         profiles={"standard": 2}, minimum=1, maximum=10_000),
    Knob("val_fraction", "float", "validation share carved from each training part",
         default=0.2, minimum=1e-6, maximum=1 - 1e-6),
    Knob("train", "dict", "training budget of the fold models, over the run's `train` "
         "section (same keys)", default={},
         profiles={"quick": {"max_epochs": 2, "patience": 2, "mc_samples": 4},
                   "standard": {"max_epochs": 12, "patience": 3, "mc_samples": 4},
                   "paper": {"max_epochs": 100, "patience": 100, "batch_size": 32,
                             "mc_samples": 10}}),
    Knob("vae_epochs", "int", "epochs of the common-latent VAE of the Wasserstein distances",
         default=20, profiles={"quick": 1}, minimum=1),
    Knob("vae_max_train", "int", "rows the VAE trains on; null: all", default=None,
         profiles={"quick": 2000}, minimum=1, nullable=True),
    Knob("latent_dim", "int", "latent dimensions of that VAE", default=62, minimum=1),
    Knob("max_points", "int", "points per fold in a Wasserstein distance", default=2000,
         profiles={"quick": 1000}, minimum=2),
)


def check_knobs(knobs: dict) -> None:
    """Raise ValueError if the nested ``train`` budget has an unknown key or a bad value."""
    train = {k.name: k for k in TRAIN_KNOBS}
    for name, value in (knobs.get("train") or {}).items():
        if name not in train:
            raise ValueError(f"train: unknown key '{name}'; known: {', '.join(sorted(train))}")
        check_value("shifted_cv.train", train[name], value)


def sources_per_class(cfg) -> int:
    """Return how many sub-domains ``prepare`` finds in each class: the knob ``folds``."""
    return settings(cfg)["folds"]


def settings(cfg) -> dict:
    """Return the shifted-cv settings of a run configuration (resolved knobs)."""
    knobs = cfg.knobs[SECTION]
    return {"folds": int(knobs["folds"]),
            "repeats": max(1, min(int(knobs["repeats"]), int(cfg.repeats))),
            "val_fraction": float(knobs["val_fraction"]),
            "train": {**cfg.train, **(knobs["train"] or {})},
            **{k: int(knobs[k]) for k in ("vae_epochs", "latent_dim", "max_points")},
            "vae_max_train": None if knobs["vae_max_train"] is None else int(
                knobs["vae_max_train"])}


def fold_plan(combo: Combo, cfg, registry) -> dict:
    """Return how many folds a (data set, clusterer) gets: ``folds``, ``requested``, ``fewest``
    (sub-domains of the poorest class, ``fewest_class``), which both K-folds use when < K."""
    requested = settings(cfg)["folds"]
    dataset = registry.load_dataset(combo.dataset.name)
    counts = combo.clusterer.expected_clusters(dataset, requested)
    c = min(range(len(counts)), key=lambda i: counts[i])
    names = dataset.class_names or [str(i) for i in range(len(counts))]
    return {"requested": requested, "folds": min(requested, counts[c]), "fewest": counts[c],
            "fewest_class": names[c]}


def preconditions(combo: Combo, cfg, registry):
    """Return why shifted-cv cannot run on the combination (a class with < 2 sub-domains)."""
    fp = fold_plan(combo, cfg, registry)
    if fp["fewest"] < 2:
        return (f"shifted-cv on data set '{combo.dataset.name}': class '{fp['fewest_class']}' "
                f"has {fp['fewest']} sub-domain(s) from clusterer '{combo.clusterer.name}'; "
                "shifted K-fold needs at least 2 per class (one to test, one to train)")
    return None


def fallback_note(folds: int, requested: int) -> str:
    """Say why a run used fewer folds than asked for (stored in the score's details)."""
    return (f"{folds} folds instead of the {requested} asked for: the clusterer gives a class "
            f"only {folds} sub-domains, and Algorithm 1 makes one fold per sub-domain, so the "
            f"shifted and the random K-fold both use K = {folds}")


def sources_k(params: dict) -> int:
    """Return the k the clusterer was asked for: the folds requested (before any fallback)."""
    return int(params.get("folds_requested") or params["folds"])


def plan(combo: Combo, cfg, registry) -> list:
    """Return K x repeats shifted and random fold trials, plus the fold-distance trial.

    Only a shifted trial records ``folds_requested`` and the clusterer: random K-fold depends
    on K alone, so its trials are shared by every clusterer and run that asked for K.
    """
    if combo.clusterer is None:
        raise ValueError("the shifted-cv protocol needs a clusterer (metric uses_clusterer)")
    s, fp = settings(cfg), fold_plan(combo, cfg, registry)
    requested = {"folds_requested": fp["requested"]} if fp["folds"] < fp["requested"] else {}
    specs = [make_spec(NAME, VERSION, combo, cfg, registry, kind=kind, repeat=r, params={
        "folds": fp["folds"], "fold": f, "n_repeats": s["repeats"],
        "val_fraction": s["val_fraction"], "train": s["train"],
        **(requested if kind == "shifted" else {})}, with_clusterer=kind == "shifted")
        for kind in KINDS for r in range(s["repeats"]) for f in range(fp["folds"])]
    params = {"folds": fp["folds"], "n_repeats": s["repeats"], "vae_epochs": s["vae_epochs"],
              "vae_max_train": s["vae_max_train"], "latent_dim": s["latent_dim"],
              "max_points": s["max_points"], **requested}
    return specs + [keyed_spec(
        NAME, VERSION, dataset=combo.dataset.name, model="", clusterer=combo.clusterer.name,
        kind=WASSERSTEIN, repeat=0, seed=cfg.seed, params=params,
        versions={**registry.dataset_versions(combo.dataset.name),
                  "clusterer": registry.component_version("clusterers", combo.clusterer.name)})]


def prepare(combo: Combo, cfg, registry, dataset) -> dict:
    """Find (or load from cache) the K sub-domains per class; return a clustering row."""
    s = settings(cfg)
    fp = fold_plan(combo, cfg, registry)
    version = registry.component_version("clusterers", combo.clusterer.name)
    src = find_sources(dataset, combo.clusterer, version, fp["requested"], cfg.seed)
    folds = merge_folds(dataset.y, src.groups, fp["folds"], repeat=0, n_repeats=s["repeats"],
                        seed=cfg.seed)
    details = {"k_per_class": src.k_per_class.tolist(),
               "fold_sizes": np.bincount(folds, minlength=fp["folds"]).tolist(),
               "clusterer_info": src.info, "cache_hit": src.cache_hit, "protocol": NAME}
    if fp["folds"] < fp["requested"]:
        details.update(folds=fp["folds"], fold_fallback=fallback_note(fp["folds"], fp["requested"]))
    return {"key": sources_key(dataset.fingerprint(), combo.clusterer.name, version,
                               fp["requested"], cfg.seed),
            "dataset": combo.dataset.name, "clusterer": combo.clusterer.name,
            "k": fp["requested"], "seed": int(cfg.seed), "fingerprint": dataset.fingerprint(),
            "silhouette": src.silhouette, "details": details, "seconds": src.seconds}


def merge_folds(y, groups, n_folds: int, *, repeat: int, n_repeats: int, seed: int) -> np.ndarray:
    """Return the fold (0..K-1) of every sample: Algorithm 2's merge of per-class sub-domains
    (``groups``), each class's shuffled per repeat when ``n_repeats`` > 1 (docs/shifted-cv.md)."""
    y, groups = np.asarray(y), np.asarray(groups)
    folds = np.full(y.shape[0], -1, dtype=np.int64)
    for c in np.unique(y):
        in_c = y == c
        subs = np.unique(groups[in_c])
        if subs.size < n_folds:
            raise ValueError(f"class {c} has {subs.size} sub-domain(s) but shifted-cv needs one "
                             f"per fold ({n_folds}); use fewer folds or a clusterer that returns "
                             "k per class")
        if n_repeats > 1:
            rng = np.random.default_rng([int(seed), int(repeat), KIND_CODES["shifted"], int(c)])
            subs = rng.permutation(subs)
        for j, s in enumerate(subs):
            folds[in_c & (groups == s)] = j % n_folds
    return folds


def random_folds(y, n_folds: int, *, repeat: int, seed: int) -> np.ndarray:
    """Return the fold of every sample under stratified, shuffled K-fold (seeded per repeat)."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    folds = np.full(y.shape[0], -1, dtype=np.int64)
    cv = StratifiedKFold(n_splits=n_folds, shuffle=True,
                         random_state=derived_seed(seed, repeat, KIND_CODES["random"]))
    for f, (_, test) in enumerate(cv.split(np.zeros((y.shape[0], 1)), y)):
        folds[test] = f
    return folds


def fold_partition(folds, y, fold: int, val_fraction: float, rng: np.random.Generator) -> tuple:
    """Return (train, val, test) indices: ``fold`` is test, the rest splits into train and val."""
    folds = np.asarray(folds)
    train, val = validation_split(np.flatnonzero(folds != fold), y, val_fraction, rng)
    return train, val, np.flatnonzero(folds == fold)


def sample_folds(spec: dict, dataset, registry) -> np.ndarray:
    """Return the folds of a trial spec's kind and repeat (pure function of the spec)."""
    p = spec["params"]
    if spec["kind"] == "random":
        return random_folds(dataset.y, p["folds"], repeat=spec["repeat"], seed=spec["seed"])
    clus = registry.get("clusterers", spec["clusterer"])
    src = find_sources(dataset, clus, spec["versions"]["clusterer"], sources_k(p), spec["seed"])
    return merge_folds(dataset.y, src.groups, p["folds"], repeat=spec["repeat"],
                       n_repeats=p["n_repeats"], seed=spec["seed"])


def partition(spec: dict, dataset, registry) -> tuple:
    """Return (train, val, test) indices of a fold trial spec (pure function of the spec)."""
    p = spec["params"]
    folds = sample_folds(spec, dataset, registry)
    rng = np.random.default_rng([int(spec["seed"]), int(spec["repeat"]),
                                 KIND_CODES[spec["kind"]], int(p["fold"]), 1])
    return fold_partition(folds, dataset.y, p["fold"], p["val_fraction"], rng)


def _test_curve(X_test, y_test):
    """Return an epoch callback that records test accuracy (observes; selects nothing)."""
    return lambda clf, epoch: {
        "test_accuracy": float(np.mean(np.asarray(clf.predict(X_test)) == y_test))}


def run(spec: dict, env) -> dict:
    """Run one trial: a fold (train, early-stop on validation, score on the test fold) or the
    fold-distance computation."""
    if spec["kind"] == WASSERSTEIN:
        return run_wasserstein(spec, env)
    dataset = env.dataset(spec["dataset"])
    train, val, test = partition(spec, dataset, env.registry)
    y = dataset.y
    model_spec = env.registry.get("models", spec["model"])
    seed = derived_seed(spec["seed"], spec["repeat"], KIND_CODES[spec["kind"]],
                        spec["params"]["fold"])
    ctx = ModelContext(dataset.n_features, dataset.n_classes, dataset.image_shape, seed,
                       dict(spec["params"]["train"]))
    t0 = time.perf_counter()
    model = model_spec.build(ctx)
    # the splits as the model takes them (robench.learn.inputs.model_inputs): no float32 copy of
    # the data set, and no copy of a split for a model that reads batches
    fit_X, val_X, X = model_inputs(model, dataset, train, val)
    check_model_input(X, model_spec.name, f"rows of data set '{dataset.name}'")
    X_test = dataset.rows(test)
    if hasattr(model, "epoch_callback"):
        model.epoch_callback = _test_curve(X_test, y[test])
    model.fit(fit_X, y[train], val_X, y[val])
    del fit_X, val_X
    pred = predict_checked(model, X_test, dataset.n_classes, model_spec.name, "test rows")
    history = list(getattr(model, "history_", []) or [])
    last = history[-1] if history else {}
    return {"accuracy": float(np.mean(pred == y[test])),
            "per_class": accuracy_per_class(y[test], pred, dataset.n_classes),
            "train_accuracy": _maybe_float(getattr(model, "train_accuracy_", None)),
            "val_accuracy": _maybe_float(getattr(model, "val_accuracy_", None)),
            "last_val_accuracy": _maybe_float(last.get("val_accuracy")),
            "last_test_accuracy": _maybe_float(last.get("test_accuracy")),
            "n_train": len(train), "n_val": len(val), "n_test": len(test),
            "epochs": int(getattr(model, "n_epochs_", 0) or 0),
            "best_epoch": int(getattr(model, "best_epoch_", 0) or 0),
            "history": history, "seconds": time.perf_counter() - t0}


def _maybe_float(v):
    return None if v is None else float(v)


def run_wasserstein(spec: dict, env) -> dict:
    """Compute the K x K fold distances of the shifted and the random folds, every repeat."""
    from robench.families.shifted_cv.vae import architecture, cached_latent_means

    t0 = time.perf_counter()
    dataset = env.dataset(spec["dataset"])
    p = spec["params"]
    arrays, hit = cached_latent_means(dataset.X, image_shape=dataset.image_shape,
                                      latent_dim=p["latent_dim"], epochs=p["vae_epochs"],
                                      seed=spec["seed"], max_train=p.get("vae_max_train"))
    latent = arrays["means"]
    clus = env.registry.get("clusterers", spec["clusterer"])
    src = find_sources(dataset, clus, spec["versions"]["clusterer"], sources_k(p), spec["seed"])
    repeats = []
    for r in range(p["n_repeats"]):
        shifted = merge_folds(dataset.y, src.groups, p["folds"], repeat=r,
                              n_repeats=p["n_repeats"], seed=spec["seed"])
        rand = random_folds(dataset.y, p["folds"], repeat=r, seed=spec["seed"])
        entry = {"repeat": r}
        for name, folds in (("shifted", shifted), ("random", rand)):
            rng = np.random.default_rng([int(spec["seed"]), r, KIND_CODES[WASSERSTEIN],
                                         KIND_CODES[name]])
            entry[name] = fold_distances(latent, folds, p["folds"], max_points=p["max_points"],
                                         rng=rng)
        entry["ratio"] = ratio_of_offdiagonal_means(entry["shifted"]["matrix"],
                                                    entry["random"]["matrix"])
        repeats.append(entry)
    ratios = [e["ratio"] for e in repeats if e["ratio"] is not None]
    fallback = ({"fold_fallback": fallback_note(p["folds"], p["folds_requested"])}
                if p.get("folds_requested") else {})
    vae = {"architecture": architecture(dataset.n_features, dataset.image_shape),
           "latent_dim": p["latent_dim"], "vae_epochs": p["vae_epochs"],
           "vae_train_rows": int(arrays["n_train"]), "final_loss": float(arrays["loss"][-1]),
           "vae_seconds": float(arrays["seconds"]), "cache_hit": bool(hit)}
    return {"details": {**fallback, "repeats": repeats,
                        "ratio": float(np.mean(ratios)) if ratios else None, "latent": vae,
                        "ground_cost": "euclidean", "max_points": p["max_points"]},
            "seconds": time.perf_counter() - t0}


def wasserstein1(a, b, *, num_itermax: int = NUM_ITERMAX,
                 max_num_itermax: int = MAX_NUM_ITERMAX) -> tuple:
    """Return (exact W1 between the uniform empirical measures of point clouds a and b, info),
    the value None where POT never converged within ``max_num_itermax`` iterations."""
    import ot  # ~5 s to import: only here

    a, b = (np.ascontiguousarray(v, dtype=np.float64) for v in (a, b))
    M = ot.dist(a, b, metric="euclidean")
    wa, wb = ot.unif(a.shape[0]), ot.unif(b.shape[0])
    it = int(num_itermax)
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read from the log instead
            cost, log = ot.emd2(wa, wb, M, numItermax=it, log=True)
        converged = log.get("result_code") == 1 and not log.get("warning")
        if converged:
            return float(cost), {"converged": True, "num_itermax": it}
        if it * 10 > max_num_itermax:
            return None, {"converged": False, "num_itermax": it, "warning": log.get("warning"),
                          "result_code": log.get("result_code")}
        it *= 10


def fold_distances(latent, folds, n_folds: int, *, max_points: int,
                   rng: np.random.Generator) -> dict:
    """Return the K x K matrix of W1 distances between folds (None where POT did not converge;
    a fold of more than ``max_points`` subsampled once, the same points for every pair)."""
    latent, folds = np.asarray(latent), np.asarray(folds)
    clouds, sizes = [], []
    for f in range(n_folds):
        idx = np.flatnonzero(folds == f)
        sizes.append(int(idx.size))
        if idx.size > max_points:
            idx = np.sort(rng.choice(idx, size=max_points, replace=False))
        clouds.append(latent[idx])
    matrix = [[0.0 if i == j else None for j in range(n_folds)] for i in range(n_folds)]
    not_converged, max_itermax = [], 0
    for i in range(n_folds):
        for j in range(i + 1, n_folds):
            value, info = wasserstein1(clouds[i], clouds[j])
            matrix[i][j] = matrix[j][i] = value
            max_itermax = max(max_itermax, info["num_itermax"])
            if value is None:
                not_converged.append([i, j])
    return {"matrix": matrix, "fold_sizes": sizes,
            "points_used": [int(c.shape[0]) for c in clouds],
            "not_converged": not_converged, "num_itermax": max_itermax,
            "mean_offdiagonal": mean_offdiagonal(matrix)}


def mean_offdiagonal(matrix) -> float | None:
    """Return the mean of the off-diagonal entries that are not None (None if there are none)."""
    vals = [v for i, row in enumerate(matrix) for j, v in enumerate(row)
            if i != j and v is not None]
    return float(np.mean(vals)) if vals else None


def ratio_of_offdiagonal_means(shifted, random) -> float | None:
    """Return mean off-diagonal distance of the shifted folds / that of the random folds."""
    a, b = mean_offdiagonal(shifted), mean_offdiagonal(random)
    return None if a is None or b is None or b <= 0 else a / b


def summarize(trials: list, clusterer: str) -> dict:
    """Return per kind the fold accuracies (selected epoch and last epoch) and mean curves."""
    out = {}
    for kind in KINDS:
        rows = sorted((t for t in trials if failure(t) is None and t.get("kind") == kind
                       and (kind == "random" or t.get("clusterer") == clusterer)),
                      key=lambda t: (t["repeat"], (t.get("params") or {}).get("fold", 0)))
        out[kind] = {"test": [float(t["accuracy"]) for t in rows],
                     "val": [t["val_accuracy"] for t in rows],
                     "train": [t["train_accuracy"] for t in rows],
                     "last_test": [t.get("last_test_accuracy") for t in rows],
                     "last_val": [t.get("last_val_accuracy") for t in rows],
                     "folds": [[t["repeat"], (t.get("params") or {}).get("fold")] for t in rows],
                     "curves": mean_curves([t.get("history") or [] for t in rows])}
    return out


def mean_curves(histories: list) -> dict:
    """Return per epoch the mean train, validation and test accuracy over the folds that ran it."""
    n = max((len(h) for h in histories), default=0)
    curves = {"epoch": list(range(1, n + 1)), "train": [], "val": [], "test": []}
    for e in range(n):
        for name, key in (("train", "train_accuracy"), ("val", "val_accuracy"),
                          ("test", "test_accuracy")):
            vals = [h[e][key] for h in histories if len(h) > e and h[e].get(key) is not None]
            curves[name].append(float(np.mean(vals)) if vals else None)
    return curves


def mean_std(values) -> tuple:
    """Return (mean, sample standard deviation) of the non-None values; None where undefined."""
    vals = np.array([v for v in values if v is not None], dtype=float)
    if vals.size == 0:
        return None, None
    return float(vals.mean()), (float(vals.std(ddof=1)) if vals.size > 1 else None)
