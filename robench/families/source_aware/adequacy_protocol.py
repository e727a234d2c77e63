"""Dataset adequacy (Kilinc & Uysal, section 5.2): rho as the training set grows.

The source-aware protocol's test partitions, with training partitions cut to nested,
stratified subsets; the full size is the source-aware trial itself (docs/adequacy.md).
"""

from __future__ import annotations

import math

import numpy as np

from robench.families.source_aware import protocol as source_aware
from robench.stats.seeds import derived_seed
from robench.specs import Knob
from robench.present.formatting import percent
from robench.data.splitters import KIND_CODES, partition_rng, validation_split
from robench.run.trials import Combo, fit_and_score, make_spec

NAME = "adequacy"
#: 2: the exclusive test partitions are the source-aware protocol 2's (balanced held-out
#: design); inclusive trials keep version 1's keys (their partitions did not change).
VERSION = "2"
KIND_VERSIONS = {"inclusive": "1", "exclusive": VERSION}
#: Older versions whose trials this one still runs unchanged (``robench verify`` re-runs them).
TRIAL_VERSIONS = tuple(sorted(set(KIND_VERSIONS.values()) - {VERSION}))
DESCRIPTION = ("Nested, stratified subsets of each source-aware training partition "
               "(test partitions fixed): the training-size sweep.")
KINDS = ("inclusive", "exclusive")
#: Subset sizes used when the profile names none (the full training partition is always added).
DEFAULT_SIZES = (100, 300, 1000, 3000)
#: "Enough data": E[Acc] within this distance (1 point) of its full-size value.
ENOUGH_TOLERANCE = 0.01
#: Extra stream of partition_rng for the nested ordering (1 is the validation split's).
_ORDER_STREAM = 2
FULL = "full"


SECTION = "adequacy"

#: The sweep's knobs (``--set adequacy.KEY=VALUE``); repeats null = the run's repeats.
KNOBS = (
    Knob("repeats", "int", "repeats per size (capped by --repeats); null: the run's repeats",
         default=None, profiles={"quick": 2, "standard": 4}, minimum=1, maximum=10_000,
         nullable=True),
    Knob("sizes", "list", "nominal training sizes of the sweep (below the full partition)",
         default=list(DEFAULT_SIZES),
         profiles={"quick": [100, 300, 1000], "paper": [100, 300, 1000, 3000, 10000, 30000]},
         items="int", minimum=2, min_items=1),
)


def settings(cfg) -> tuple:
    """Return (repeats, nominal sizes) of the adequacy sweep for a run configuration
    (repeats capped by ``cfg.repeats``; ``None`` means ``cfg.repeats``)."""
    knobs = cfg.knobs[SECTION]
    wanted = knobs.get("repeats")
    repeats = cfg.repeats if wanted is None else max(1, min(int(wanted), cfg.repeats))
    sizes = sorted({int(s) for s in (knobs.get("sizes") or DEFAULT_SIZES)})
    if any(s < 2 for s in sizes):
        raise ValueError(f"adequacy sizes must be at least 2, got {sizes}")
    return repeats, sizes


def usable_sizes(sizes, n_samples: int, test_size: float, k: int) -> list:
    """Return the nominal sizes smaller than the training partition is expected to be
    (inclusive: (1 - test_size)·N, exclusive: (1 - 1/k)·N; capped at run time)."""
    limit = n_samples * (1 - max(test_size, 1 / max(int(k or 2), 2)))
    return [s for s in sizes if s < limit]


def plan(combo: Combo, cfg, registry) -> list:
    """Return the trial specs of one (dataset, model, clusterer): kinds x repeats x sizes
    (the full-size specs are the source-aware protocol's own, shared by key with ``rho``)."""
    repeats, sizes = settings(cfg)
    try:  # loaded once per registry: the driver's preparation and trials reuse it
        n = int(registry.load_dataset(combo.dataset.name).y.shape[0])
    except Exception:  # noqa: BLE001 - the trials will record the loading error themselves
        n = None
    if n is not None:
        sizes = usable_sizes(sizes, n, cfg.test_size, cfg.k)
    full = {(s["kind"], s["repeat"]): s for s in source_aware.plan(combo, cfg, registry)
            if s["kind"] in KINDS and s["repeat"] < repeats}
    specs = []
    for kind in KINDS:
        for r in range(repeats):
            for size in sizes:
                params = {"k": cfg.k, "test_size": cfg.test_size,
                          "val_fraction": cfg.val_fraction, "train": cfg.train, "size": int(size),
                          **({"held_out": source_aware.HELD_OUT} if kind == "exclusive" else {})}
                specs.append(make_spec(NAME, KIND_VERSIONS[kind], combo, cfg, registry,
                                       kind=kind, repeat=r, params=params, with_clusterer=True))
            specs.append(full[(kind, r)])
    return specs


#: Sources are found (or loaded from cache) exactly as the source-aware protocol does.
prepare = source_aware.prepare


def stratified_order(idx, y, rng: np.random.Generator) -> np.ndarray:
    """Return ``idx`` reordered so that every prefix is stratified by class: sorted by the
    key (j + u_c) / n_c of a class's j-th shuffled sample (docs/adequacy.md)."""
    idx = np.asarray(idx)
    labels = np.asarray(y)[idx]
    members, keys = [], []
    for c in np.unique(labels):
        in_c = rng.permutation(idx[labels == c])
        members.append(in_c)
        keys.append((np.arange(in_c.size) + rng.random()) / in_c.size)
    if not members:
        return idx[:0]
    order = np.argsort(np.concatenate(keys), kind="stable")
    return np.concatenate(members)[order]


def nested_subset(train_idx, y, size: int, rng: np.random.Generator) -> np.ndarray:
    """Return the first ``size`` samples of the stratified ordering of ``train_idx`` (sorted)."""
    return np.sort(stratified_order(train_idx, y, rng)[: int(size)])


def partition(spec: dict, dataset, registry) -> tuple:
    """Return (fit, val, test) indices of an adequacy trial spec (pure function of the spec):
    the source-aware partitions, training cut to ``params['size']`` samples, then split."""
    return _partition(spec, dataset, registry)[:3]


def _partition(spec: dict, dataset, registry) -> tuple:
    """Return (fit, val, test, fit part of the full-size run) of an adequacy trial spec."""
    fit_all, val_all, test = source_aware.partition(spec, dataset, registry)
    train_all = np.union1d(fit_all, val_all)
    size = int(spec["params"]["size"])
    kind, r, seed = spec["kind"], spec["repeat"], spec["seed"]
    subset = nested_subset(train_all, dataset.y, min(size, train_all.size),
                           partition_rng(seed, r, kind, _ORDER_STREAM))
    fit, val = validation_split(subset, dataset.y, spec["params"]["val_fraction"],
                                partition_rng(seed, r, kind, 1, size))
    if val.size == 0 and subset.size >= 2:
        # Too few samples per class for a stratified fraction: keep one for early stopping.
        fit, val = subset[1:], subset[:1]
    return fit, val, test, fit_all


def scaled_budget(train: dict, n_fit: int, n_fit_full: int) -> dict:
    """Return the training budget giving a subset as many gradient steps as the full size
    (epochs and patience times full / subset mini-batches; no ``max_epochs``: unchanged)."""
    budget = dict(train)
    if "max_epochs" not in budget or n_fit <= 0:
        return budget
    bs = max(1, int(budget.get("batch_size") or 128))
    scale = math.ceil(n_fit_full / bs) / math.ceil(n_fit / bs)
    if scale > 1:
        budget["max_epochs"] = int(math.ceil(budget["max_epochs"] * scale))
        if budget.get("patience"):
            budget["patience"] = int(math.ceil(budget["patience"] * scale))
    return budget


def run(spec: dict, env) -> dict:
    """Run one trial: nested subset of the training partition, train, score on the fixed test."""
    dataset = env.dataset(spec["dataset"])
    fit, val, test, fit_full = _partition(spec, dataset, env.registry)
    model_spec = env.registry.get("models", spec["model"])
    seed = derived_seed(spec["seed"], spec["repeat"], KIND_CODES[spec["kind"]],
                        spec["params"]["size"])
    budget = scaled_budget(spec["params"]["train"], len(fit), len(fit_full))
    return fit_and_score(model_spec, dataset, fit, val, test, seed=seed, train_budget=budget)


def size_label(row: dict):
    """Return a trial row's nominal size, or ``"full"`` for a source-aware (full-size) trial."""
    size = (row.get("params") or {}).get("size")
    return FULL if size is None else int(size)


def size_curves(trials: list, clusterer: str = None) -> list:
    """Return one entry per size (ascending, ``full`` last) from successful trial rows: per
    kind the accuracies, their repeats and per-class accuracies; n_samples; n_capped."""
    by_size: dict = {}
    for t in trials:
        if t.get("status", "ok") != "ok" or t["kind"] not in KINDS or (
                clusterer is not None and t.get("clusterer") != clusterer):
            continue
        label = size_label(t)
        e = by_size.setdefault(label, {"label": label, "acc_exclusive": [], "acc_inclusive": [],
                                       "repeats_exclusive": [], "repeats_inclusive": [],
                                       "per_class_exclusive": [], "per_class_inclusive": [],
                                       "sizes": [], "n_capped": 0})
        e[f"acc_{t['kind']}"].append(float(t["accuracy"]))
        e[f"repeats_{t['kind']}"].append(t.get("repeat"))
        e[f"per_class_{t['kind']}"].append(t.get("per_class") or [])
        n_sub = int(t.get("n_train") or 0) + int(t.get("n_val") or 0)
        e["sizes"].append(n_sub)
        if label != FULL and n_sub < label:
            e["n_capped"] += 1
    for e in by_size.values():
        sizes = e.pop("sizes")
        e["n_samples"] = float(np.mean(sizes)) if sizes else None
    return [by_size[label] for label in sorted(
        by_size, key=lambda label: (1, 0) if label == FULL else (0, label))]


def mean_or_none(values):
    """Return the mean of a list, or None if it is empty."""
    return float(np.mean(values)) if len(values) else None


def enough_size(curves: list, kind: str, tol: float = ENOUGH_TOLERANCE):
    """Return the curve entry from which E[Acc_kind] stays within ``tol`` of the full size's
    (every larger size within ``tol`` too); None without a full-size point."""
    key = f"acc_{kind}"
    points = [(c, mean_or_none(c[key])) for c in curves]
    full = next((m for c, m in points if c["label"] == FULL), None)
    if full is None:
        return None
    answer = None
    for c, m in reversed(points):
        if m is None or abs(m - full) > tol:
            break
        answer = c
    return answer


def class_curves(curves: list) -> list:
    """Return per class, per size, (E[AccX_c], E[AccI_c], rho_c) via source_aware.class_rho."""
    n_classes = max((len(pc) for c in curves
                     for pc in c["per_class_exclusive"] + c["per_class_inclusive"]), default=0)
    out = [{"class": cl, "labels": [], "acc_exclusive": [], "acc_inclusive": [], "rho": []}
           for cl in range(n_classes)]
    for c in curves:
        if not (c["per_class_exclusive"] and c["per_class_inclusive"]):
            continue
        per = source_aware.class_rho(c["per_class_exclusive"], c["per_class_inclusive"])
        for cl, entry in enumerate(per):
            out[cl]["labels"].append(c["label"])
            for key, value in entry.items():  # acc_exclusive, acc_inclusive, rho
                out[cl][key].append(value)
    return out


#: A class's accuracy "rises with size" if it gains at least this much from the smallest to
#: the full size (2 points); "flat" otherwise.
RISE = 0.02


def _gain(values):
    vals = [v for v in values if v is not None]
    return (vals[-1] - vals[0]) if len(vals) >= 2 else 0.0


def _pct(v):
    return percent(v, 1, missing="-")


def class_reading(curve: dict, name: str = None) -> str:
    """Return a one-line reading of one class's curve (what more data would do for it)."""
    name = name or f"class {curve['class']}"
    x, i, rho = curve["acc_exclusive"], curve["acc_inclusive"], curve["rho"]
    if not x or x[-1] is None or i[-1] is None:
        return f"{name}: no test samples at the full size"
    gx, gi = _gain(x), _gain(i)
    x_range, i_range = (f"{_pct(next((v for v in c if v is not None), None))}->{_pct(c[-1])}"
                        for c in (x, i))
    rho_full = rho[-1]
    if gx >= RISE and gi < max(RISE, gx / 2):
        return (f"collect more data for {name}: its AccX rises with size ({x_range}) while "
                f"AccI is flat ({i_range}); more, and more varied, samples help unlikely inputs")
    if gx >= RISE:
        return (f"{name} is hard with little data: AccI ({i_range}) and AccX ({x_range}) both "
                "rise with size; more data of any kind helps")
    if rho_full is not None and rho_full < 1 - RISE:
        return (f"{name}: AccX does not rise with size ({x_range}, rho {rho_full:.3f}) "
                f"while AccI is {_pct(i[-1])}; more of the same data will not fix it: collect "
                "samples from new sources (styles) of this class")
    return (f"{name} is robust: AccX {_pct(x[-1])} vs AccI {_pct(i[-1])} at the full size"
            + ("" if rho_full is None else f" (rho {rho_full:.3f})"))


def rank_classes(curves_by_class: list) -> list:
    """Return the classes ordered least robust first: by full-size rho, then by AccX."""
    def key(c):
        rho = c["rho"][-1] if c["rho"] else None
        x = c["acc_exclusive"][-1] if c["acc_exclusive"] else None
        return (rho is None, math.inf if rho is None else rho, math.inf if x is None else x)

    return sorted(curves_by_class, key=key)
