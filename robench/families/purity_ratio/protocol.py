"""Feature-space clusterability (Ho et al., AAAI 2022): the ``clusterability`` protocol.

One trial = one reference model of a (dataset, model, repeat): its clean Model_ACC, its test
features clustered (k-means, multicut), Delta, and on image data sets corruption and
adversarial robustness. docs/clusterability.md ("What one trial computes") has the steps.
"""

from __future__ import annotations

import time

import numpy as np

from robench.learn.reference_model import (fit_reference, not_applicable_row, reference_seed,
                                           trial_row)
from robench.specs import Knob
from robench.run.trials import Combo, keyed_spec
from robench.data.boundary import check_model_input, predict_checked
from robench.data import corruptions as corruption_sets  # tests replace corrupted_sets there
from robench.data.corruptions import index_hash
from robench.families.purity_ratio.attacks import robust_accuracies
from robench.families.purity_ratio.zoo import ZOO, ZOO_VERSION
from robench.learn.features import feature_support, features, features_key
from robench.learn.multicut import multicut_supervised, stratified_subsample

NAME = "clusterability"
#: 2: the multicut's boundary is calibrated on training features on the complete graph in the
#: kNN distance unit by default (bias 0 fragmented the features into clusters of ~3 points).
#: 3: R repeats of every reference model (``--repeats``), repeat r seeded by
#: :func:`robench.learn.reference_model.reference_seed`; repeat 0 computes what version 2 did.
VERSION = "3"
KIND = "reference"
DESCRIPTION = ("A reference model per (data set, model) and its zoo: penultimate "
               "features clustered (k-means, multicut), class overlap, corruption and "
               "adversarial robustness.")

SECTION = "clusterability"
_ZOO_QUICK = ["mlp", "cnn-1", "cnn-2", "cnn-3", "zoo-mlp-narrow", "zoo-cnn-narrow",
              "zoo-cnn-dropout", "zoo-cnn-noise"]
_ZOO_PAPER = ["mlp", "cnn-1", "cnn-2", "cnn-3", "zoo-mlp-narrow", "zoo-mlp-wide",
              "zoo-cnn-narrow", "zoo-cnn-wide", "zoo-cnn-dropout", "zoo-cnn-noise",
              "zoo-resnet", "zoo-vit"]

#: The protocol's knobs (``--set clusterability.KEY=VALUE``); the timm ResNet/ViT are in the
#: paper profile's zoo only (they cost the most).
KNOBS = (
    Knob("zoo", "list", "models validated together (registered models, model references "
         "such as timm:resnet18, or zoo members, see robench.families.purity_ratio.zoo)",
         default=[], items="str", profiles={"quick": _ZOO_QUICK, "paper": _ZOO_PAPER}),
    Knob("corruptions", "list", "registered corruptions to measure; null: every applicable one",
         default=None, items="str", nullable=True),
    Knob("corruption_cap", "int", "stratified test images corrupted per data set; null: all",
         default=150, profiles={"quick": 60, "paper": None}, minimum=1, nullable=True),
    Knob("attack_cap", "int", "stratified test images attacked per model", default=200,
         profiles={"quick": 60, "paper": 1000}, minimum=1),
    Knob("multicut_cap", "int", "test points the multicut clusters", default=500,
         profiles={"paper": 2000}, minimum=2),
    Knob("overlap_cap", "int", "test points of the class-overlap baseline Delta", default=500,
         profiles={"paper": 2000}, minimum=2),
    Knob("join_train_cap", "int", "training points the multicut's join model learns from",
         default=1000, profiles={"paper": 2000}, minimum=2),
    Knob("severities", "list", "corruption severities", default=[1, 2, 3, 4, 5], items="int",
         minimum=1, maximum=5),
    Knob("epsilons", "list", "L-inf attack budgets (images in [0, 1])",
         default=[0.01, 0.03, 0.1, 0.2], items="float", minimum=0.0, maximum=1.0,
         profiles={"paper": [0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.3]}),
    Knob("attacks", "list", "adversarial attacks", default=["fgsm", "pgd", "deepfool"],
         items="str", choices=("fgsm", "pgd", "deepfool")),
    Knob("pgd_steps", "int", "PGD iterations", default=10,
         profiles={"quick": 7, "paper": 40}, minimum=1),
    Knob("deepfool_iter", "int", "DeepFool iterations", default=30,
         profiles={"quick": 20, "paper": 50}, minimum=1),
    Knob("deepfool_grads", "int", "classes DeepFool linearises towards (ART nb_grads)",
         default=3, profiles={"paper": 10}, minimum=1),
    Knob("knn", "int", "neighbours of the multicut's kNN graph", default=10, minimum=1),
    Knob("bias_mode", "str", "multicut boundary: 'calibrated' (bias searched on training "
         "features so the effective number of clusters is closest to the classes; the paper "
         "estimates it empirically) or 'fixed' (the bias knob)", default="calibrated",
         choices=("calibrated", "fixed")),
    Knob("bias", "float", "bias added to the multicut's edge costs when bias_mode is 'fixed' "
         "(0: p_join = 0.5 boundary, which fragments real features)", default=0.0),
    Knob("graph", "str", "multicut graph: 'complete' (the paper's, every pair) or 'knn'",
         default="complete", choices=("complete", "knn")),
    Knob("scale", "str", "multicut distance unit: 'knn-median' (the median kNN-edge distance "
         "of the point set itself; needs several times knn points per class, else the "
         "median edge spans classes and everything merges) or 'none' (raw squared "
         "distances)", default="knn-median", choices=("knn-median", "none")),
    Knob("solver", "str", "multicut solver", default="gaec", choices=("gaec", "gaec+kl")),
    Knob("kmeans_n_init", "int", "k-means restarts on the features", default=4, minimum=1),
)
#: Knobs that choose what is measured together rather than what a trial computes.
PLAN_KNOBS = ("zoo", "corruptions")


def settings(cfg) -> dict:
    """Return the run's resolved ``clusterability`` knobs, the zoo without duplicates."""
    knobs = dict(cfg.knobs[SECTION])
    knobs["zoo"] = list(dict.fromkeys(knobs.get("zoo") or []))
    return knobs


def _member(registry, name: str):
    """Return ("registered", ModelSpec) or ("zoo", ZooMember) for a zoo name."""
    if name in registry.names("models") or ":" in name:  # a reference: timm:ARCH, ...
        return "registered", registry.get("models", name)
    if name in ZOO:
        return "zoo", ZOO[name]
    raise ValueError(f"unknown zoo member '{name}': neither a registered model, a model "
                     f"reference (timm:ARCH) nor one of {', '.join(sorted(ZOO))}")


def trial_spec(dataset_spec, model_name: str, cfg, registry, repeat: int = 0) -> dict:
    """Return the spec of one repeat's reference trial of a (dataset, model or zoo member).

    The spec's ``seed`` is the run's; ``run`` derives the repeat's (``reference_seed``).
    """
    knobs = settings(cfg)
    source, _ = _member(registry, model_name)
    corruptions = {}
    if dataset_spec.is_image:
        wanted = knobs.get("corruptions")
        chosen = ([registry.get("corruptions", n) for n in wanted] if wanted is not None
                  else registry.all("corruptions"))
        corruptions = {c.name: registry.component_version("corruptions", c.name)
                       for c in chosen if c.not_applicable(dataset_spec) is None}
    analysis = {**{k.name: knobs[k.name] for k in KNOBS if k.name not in PLAN_KNOBS},
                "corruptions": sorted(corruptions)}
    return keyed_spec(
        NAME, VERSION, dataset=dataset_spec.name, model=model_name, kind=KIND, repeat=repeat,
        seed=cfg.seed,
        params={"test_size": cfg.test_size, "val_fraction": cfg.val_fraction,
                "train": cfg.train, "zoo_member": source == "zoo", "analysis": analysis},
        versions={**registry.dataset_versions(dataset_spec.name),
                  "model": (registry.component_version("models", model_name)
                            if source == "registered" else f"zoo/{ZOO_VERSION}"),
                  "kmeans": registry.component_version("clusterers", "kmeans"),
                  "corruptions": corruptions})


def zoo_names(dataset_spec, cfg, registry) -> list:
    """Return the zoo members that apply to the data set (image data sets only)."""
    if not dataset_spec.is_image:
        return []
    members = {name: _member(registry, name) for name in settings(cfg)["zoo"]}
    return [name for name, (source, member) in members.items()
            if not (source == "registered" and member.not_applicable(dataset_spec))]


def plan(combo: Combo, cfg, registry) -> list:
    """Return the combination's reference trials, then its data set's zoo trials, R each.

    ``spec["zoo"]`` is added after the key (it changes no trial), for the aggregate.
    """
    zoo = zoo_names(combo.dataset, cfg, registry)
    names = [combo.model.name] + [n for n in zoo if n != combo.model.name]
    return [{**trial_spec(combo.dataset, name, cfg, registry, r), "zoo": list(zoo)}
            for name in names for r in range(int(cfg.repeats))]


def multicut_bias(knobs: dict):
    """Return the multicut's ``bias`` argument: "calibrated" or the fixed number."""
    return "calibrated" if knobs.get("bias_mode", "fixed") == "calibrated" else float(knobs["bias"])


def contingency(labels: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Return the (clusters x classes) count matrix of cluster labels against classes."""
    labels = np.asarray(labels, dtype=np.int64)
    _, labels = np.unique(labels, return_inverse=True)
    m = int(labels.max()) + 1 if labels.size else 0
    table = np.zeros((m, n_classes), dtype=np.int64)
    np.add.at(table, (labels.ravel(), np.asarray(y, dtype=np.int64)), 1)
    return table


def run(spec: dict, env) -> dict:
    """Run one reference trial (see the module docstring)."""
    t0 = time.perf_counter()
    timings = {}
    dataset = env.dataset(spec["dataset"])
    knobs = spec["params"]["analysis"]
    seed = reference_seed(spec["seed"], spec.get("repeat") or 0)
    y = dataset.y
    member = (ZOO[spec["model"]] if spec["params"].get("zoo_member")
              else env.registry.get("models", spec["model"]))
    ref = fit_reference({**spec, "seed": seed}, env, dataset, applicable=feature_support,
                        build=member.build)
    fit, test, clf, base = ref["fit"], ref["test"], ref["clf"], ref["base"]
    if ref["not_applicable"]:
        return not_applicable_row(base, ref["not_applicable"], t0)
    model_key, hit = ref["model_key"], ref["hit"]
    timings["train"] = time.perf_counter() - t0
    X_test = dataset.rows(test)  # float32 rows of the test split alone
    pred = predict_checked(clf, X_test, dataset.n_classes, spec["model"], "test rows")
    model_acc = float((pred == y[test]).mean())

    t = time.perf_counter()
    Z_test = features(clf, X_test, key=features_key(model_key, X_test))
    join_idx = fit[stratified_subsample(y[fit], knobs["join_train_cap"], seed)]
    X_join = dataset.rows(join_idx)
    Z_train = features(clf, X_join, key=features_key(model_key, X_join))
    timings["features"] = time.perf_counter() - t

    t = time.perf_counter()
    km = env.registry.get("clusterers", "kmeans")
    km_labels = km.fit_predict(Z_test, dataset.n_classes, seed=seed)
    timings["kmeans"] = time.perf_counter() - t
    t = time.perf_counter()
    mc_sub = stratified_subsample(y[test], knobs["multicut_cap"], seed)
    try:
        mc_labels, mc_info = multicut_supervised(
            Z_test[mc_sub], Z_train, y[join_idx], knn=int(knobs["knn"]),
            bias=multicut_bias(knobs), solver=knobs["solver"], seed=seed,
            graph=knobs.get("graph", "knn"), scale=knobs.get("scale", "none"))
        mc_table = contingency(mc_labels, y[test][mc_sub], dataset.n_classes).tolist()
    except ValueError as exc:
        mc_info, mc_table = {"error": str(exc)}, None
    timings["multicut"] = time.perf_counter() - t
    ov_sub = stratified_subsample(y[test], knobs["overlap_cap"], seed)
    overlap = class_overlap(Z_test[ov_sub], y[test][ov_sub])

    extra = {"reference_seed": seed, "model_acc": model_acc, "n_test": int(len(test)),
             "feature_dim": int(Z_test.shape[1]), "model_cache_hit": bool(hit),
             "kmeans": {"k": dataset.n_classes, "contingency": contingency(
                 km_labels, y[test], dataset.n_classes).tolist()},
             "multicut": {**mc_info, "n": int(len(mc_sub)), "contingency": mc_table},
             "overlap": overlap}
    if dataset.image_shape is None:
        reason = f"data set '{dataset.name}' is not an image data set"
        extra["corruptions"] = {"not_applicable": reason}
        extra["adversarial"] = {"not_applicable": reason}
    else:
        t = time.perf_counter()
        extra["corruptions"] = _corruption_accuracies(clf, dataset, test, spec, env, knobs, seed)
        timings["corruptions"] = time.perf_counter() - t
        t = time.perf_counter()
        extra["adversarial"] = _adversarial(clf, dataset, test, knobs, seed)
        timings["adversarial"] = time.perf_counter() - t
    extra["timings"] = timings
    return trial_row(base, clf, model_acc, extra, t0)


def _corruption_accuracies(clf, dataset, test, spec, env, knobs, seed=None) -> dict:
    """Return clean and corrupted accuracy of ``clf`` on the corruption subsample; ``seed``:
    the repeat's (default the spec's)."""
    seed = int(spec["seed"] if seed is None else seed)
    idx = test[stratified_subsample(dataset.y[test], knobs["corruption_cap"], seed)]
    rows, y = dataset.rows(idx), dataset.y[idx]
    specs = [env.registry.get("corruptions", n) for n in knobs["corruptions"]]
    sets = corruption_sets.corrupted_sets(
        rows.reshape((len(idx),) + tuple(dataset.image_shape)), specs, knobs["severities"], seed,
        fingerprint=dataset.fingerprint(), idx_key=index_hash(idx))

    def accuracy(X, what="rows"):
        return float((predict_checked(clf, X, dataset.n_classes, spec["model"], what)
                      == y).mean())

    clean = accuracy(rows)
    acc = {sp.name: [accuracy(check_model_input(
        sets[(sp.name, s)].reshape(len(idx), -1), spec["model"],
        f"images of corruption '{sp.name}' at severity {s}"), "corrupted rows")
        for s in knobs["severities"]] for sp in specs}
    return {"n": int(len(idx)), "clean": clean, "severities": list(knobs["severities"]),
            "accuracy": acc, "imagenet_c": {sp.name: bool(sp.imagenet_c) for sp in specs}}


def _adversarial(clf, dataset, test, knobs, seed) -> dict:
    """Return robust accuracies under the attacks (torch models only)."""
    module = getattr(clf, "module_", None)
    if module is None:
        return {"not_applicable": f"{type(clf).__name__} is not a torch model (no gradients)"}
    idx = test[stratified_subsample(dataset.y[test], knobs["attack_cap"], seed)]
    res = robust_accuracies(module, dataset.rows(idx), dataset.y[idx], dataset.n_classes,
                            knobs["epsilons"], attacks=knobs["attacks"],
                            pgd_steps=int(knobs["pgd_steps"]),
                            deepfool_iter=int(knobs["deepfool_iter"]),
                            deepfool_grads=int(knobs.get("deepfool_grads", 10)))
    return {**res, "n": int(len(idx)), "epsilons": list(knobs["epsilons"])}


def cluster_accuracy(table) -> float:
    """Return cluster accuracy of a (clusters x classes) table: Hungarian matching, unmatched
    clusters count as errors (the paper's Figure 3)."""
    from scipy.optimize import linear_sum_assignment

    table = np.asarray(table, dtype=np.int64)
    n = table.sum()
    if n == 0:
        return float("nan")
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / n)


def purity(table) -> float:
    """Return purity (eq. 5): (1/N) sum over clusters of the count of its majority class."""
    table = np.asarray(table, dtype=np.int64)
    n = table.sum()
    return float(table.max(axis=1).sum() / n) if n else float("nan")


def class_overlap(Z: np.ndarray, y: np.ndarray) -> dict:
    """Return Delta = (mu_intra + sigma_intra) - (mu_inter + sigma_inter) of squared distances
    over all pairs of rows (eq. 9), and Delta / (mu_inter + sigma_inter)."""
    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y)
    sq = (Z ** 2).sum(1)
    D = np.maximum(sq[:, None] + sq[None, :] - 2 * Z @ Z.T, 0.0)
    iu = np.triu_indices(len(y), k=1)
    d = D[iu]
    same = y[iu[0]] == y[iu[1]]
    if not same.any() or same.all():
        return {"delta": None, "delta_normalized": None}
    intra, inter = d[same], d[~same]
    mi, si, me, se = intra.mean(), intra.std(), inter.mean(), inter.std()
    delta = (mi + si) - (me + se)
    return {"delta": float(delta), "delta_normalized": float(delta / (me + se)) if me + se else None,
            "mu_intra": float(mi), "sigma_intra": float(si), "mu_inter": float(me),
            "sigma_inter": float(se), "n": int(len(y))}


def indicators(extra: dict) -> dict:
    """Return the paper's indicators (eq. 8, 10, 9) from a trial's ``extra`` dict."""
    model_acc = extra.get("model_acc")
    out = {"model_acc": model_acc}
    for name in ("kmeans", "multicut"):
        table = (extra.get(name) or {}).get("contingency")
        out[f"c_acc_{name}"] = cluster_accuracy(table) if table else None
        out[f"c_purity_{name}"] = purity(table) if table else None
        out[f"n_clusters_{name}"] = len(table) if table else None

    def ratio(num):
        return num / model_acc if num is not None and model_acc else None

    for name in ("kmeans", "multicut"):
        out[f"p_acc_{name}"] = ratio(out[f"c_acc_{name}"])
        out[f"p_purity_{name}"] = ratio(out[f"c_purity_{name}"])
    both = all(out[f"c_acc_{n}"] is not None for n in ("kmeans", "multicut"))
    out["p_acc_combined"] = ratio(out["c_acc_kmeans"] * out["c_acc_multicut"]) if both else None
    out["p_purity_combined"] = (ratio(out["c_purity_kmeans"] * out["c_purity_multicut"])
                                if both else None)
    out["delta"] = (extra.get("overlap") or {}).get("delta")
    return out


def corruption_robustness(corr: dict) -> dict:
    """Return robustness (eq. 6-7) of a trial's corruption accuracies (docs/clusterability.md)."""
    if not corr or corr.get("not_applicable") or not corr.get("accuracy"):
        return {}
    clean, acc, sev = corr["clean"], corr["accuracy"], corr["severities"]
    mat = np.array([acc[c] for c in sorted(acc)], dtype=np.float64)  # corruptions x severities
    acc_all = float(mat.mean())
    c_names = sorted(acc)
    ic = [i for i, c in enumerate(c_names) if (corr.get("imagenet_c") or {}).get(c, True)]
    if not clean:  # nothing right on clean images: a ratio is undefined
        return {"acc_all": acc_all, "clean": clean, "robustness": None, "per_severity": {},
                "n": corr.get("n"), "undefined": "clean accuracy is 0"}
    return {
        "clean": clean,
        "acc_all": acc_all,
        "robustness": acc_all / clean,
        "robustness_imagenet_c": float(mat[ic].mean()) / clean if ic else None,
        "per_severity": {str(s): float(mat[:, j].mean()) / clean for j, s in enumerate(sev)},
        "acc_per_severity": {str(s): float(mat[:, j].mean()) for j, s in enumerate(sev)},
        "per_corruption": {c: [float(v) / clean for v in acc[c]] for c in c_names},
        "n": corr.get("n"),
    }


def adversarial_robustness(adv: dict) -> dict:
    """Return {attack: {eps: robust accuracy / clean accuracy}} (relative robust accuracy)."""
    if not adv or adv.get("not_applicable") or not adv.get("clean"):
        return {}
    clean = adv["clean"]
    return {a: {e: v / clean for e, v in adv[a].items()}
            for a in ("fgsm", "pgd", "deepfool") if isinstance(adv.get(a), dict)}


def _on_spread(stat, x, y) -> float:
    """Return ``stat(x, y)`` of x and y as float arrays (NaN with < 3 points or no spread)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float("nan") if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 else float(stat(x, y))


def r_squared(x, y) -> float:
    """Return the coefficient of determination of the least-squares line of y on x (= r^2)."""
    from scipy.stats import linregress

    return _on_spread(lambda a, b: linregress(a, b).rvalue ** 2, x, y)


def pearson_r(x, y) -> float:
    """Return Pearson's signed correlation r of x and y (NaN with < 3 points or no spread)."""
    return _on_spread(lambda a, b: np.corrcoef(a, b)[0, 1], x, y)


def kendall_tau(x, y) -> float:
    """Return Kendall's tau-b between x and y (scipy.stats.kendalltau)."""
    from scipy.stats import kendalltau

    return _on_spread(lambda a, b: kendalltau(a, b).statistic, x, y)
