"""Protocol ``corruption``: one model per (data set, model) trained on the clean split, then
measured on every chosen corruption x severity of a stratified test subsample.

The model is robench's reference model (:mod:`robench.learn.reference_model`: the random-split partition of
repeat 0, validation carved from training, weights cached by content key), so a model that
purity-ratio or coverage already trained is not trained again; the corrupted images come from
:func:`robench.data.corruptions.corrupted_sets`, cached by content, so with the same cap, severities
and seed they are the very images the clusterability protocol corrupts.
"""

from __future__ import annotations

import time

import numpy as np

from robench.learn.reference_model import fit_reference, not_applicable_row, trial_row
from robench.specs import Knob
from robench.run.trials import keyed_spec

NAME = "corruption"
VERSION = "1"
SECTION = "corruption"
KIND = "corruption"
DESCRIPTION = ("The reference model of each (data set, model) and of a baseline model, "
               "measured on every registered corruption x severity of a test subsample.")

#: mlp: in every default run, applies to every data set (tabular too, so it never blocks a
#: combination), cheap to train, and its reference model is already cached by purity-ratio and
#: coverage; it plays AlexNet's role in the paper (a plain, weaker model everything is measured
#: against).
DEFAULT_BASELINE = "mlp"

KNOBS = (
    Knob("baseline", "str", "registered model whose corruption errors normalise CE (CE = 1 "
         "for it)", default=DEFAULT_BASELINE),
    Knob("cap", "int", "stratified test images corrupted per data set; null: the whole test "
         "split", default=150, profiles={"quick": 60, "paper": None}, minimum=1, nullable=True),
    Knob("corruptions", "list", "registered corruptions to measure; null: every one",
         default=None, items="str", nullable=True),
    Knob("severities", "list", "corruption severities", default=[1, 2, 3, 4, 5], items="int",
         minimum=1, maximum=5),
)


def check_knobs(values: dict) -> None:
    """Refuse an empty or repeated list of severities or corruptions."""
    for name in ("severities", "corruptions"):
        v = values.get(name)
        if v is not None and (not v or len(set(v)) != len(v)):
            raise ValueError(f"corruption.{name} must be a non-empty list without repeats, "
                             f"got {v}")


def _corruptions(knobs, registry) -> list:
    wanted = knobs.get("corruptions")
    if wanted is None:
        return registry.all("corruptions")
    known = registry.names("corruptions")
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"corruption.corruptions names unknown corruption(s) "
                         f"{', '.join(unknown)}; registered: {', '.join(known)}")
    return [registry.get("corruptions", n) for n in wanted]


def baseline_of(cfg, registry) -> str:
    """Return the run's baseline model, or raise ValueError naming the knob and the fix."""
    name = cfg.knobs[SECTION]["baseline"]
    if name not in registry.names("models"):
        raise ValueError(f"unknown baseline model '{name}' (--set corruption.baseline); "
                         f"pick a registered model: {', '.join(registry.names('models'))}")
    return name


def trial_spec(dataset_spec, model_name: str, cfg, registry) -> dict:
    """Return the keyed spec of one model's corruption trial on one data set."""
    knobs = cfg.knobs[SECTION]
    chosen = _corruptions(knobs, registry)
    corruptions = {c.name: registry.component_version("corruptions", c.name)
                   for c in chosen if c.not_applicable(dataset_spec) is None}
    return keyed_spec(
        NAME, VERSION, dataset=dataset_spec.name, model=model_name, kind=KIND, repeat=0,
        seed=cfg.seed,
        params={
            "test_size": cfg.test_size,
            "val_fraction": cfg.val_fraction,
            "train": cfg.train,
            "cap": knobs["cap"],
            "severities": [int(s) for s in knobs["severities"]],
            "corruptions": sorted(corruptions),
        },
        versions={
            **registry.dataset_versions(dataset_spec.name),
            "model": registry.component_version("models", model_name),
            "corruptions": corruptions,
        })


def plan(combo, cfg, registry) -> list:
    """Return the model's trial and the baseline's (one spec when the model is the baseline)."""
    baseline = baseline_of(cfg, registry)
    base_spec = registry.get("models", baseline)
    why = base_spec.not_applicable(combo.dataset)
    if why:
        raise ValueError(f"baseline model '{baseline}' cannot run on data set "
                         f"'{combo.dataset.name}' ({why}); pick another with "
                         f"--set corruption.baseline=MODEL")
    specs = [trial_spec(combo.dataset, combo.model.name, cfg, registry)]
    if combo.model.name != baseline:
        specs.append(trial_spec(combo.dataset, baseline, cfg, registry))
    for spec in specs:
        spec["baseline"] = baseline  # after the key: which model normalises does not change a trial
    return specs


def run(spec: dict, env) -> dict:
    """Train (or load) the reference model and measure clean and corrupted accuracy."""
    from robench.data.corruptions import corrupted_sets, index_hash
    from robench.learn.multicut import stratified_subsample

    t0 = time.perf_counter()
    dataset = env.dataset(spec["dataset"])
    params, seed = spec["params"], int(spec["seed"])
    ref = fit_reference(spec, env, dataset)
    if dataset.image_shape is None:
        return not_applicable_row(ref["base"], f"data set '{dataset.name}' is not an image "
                                  "data set", t0)
    clf, test = ref["clf"], ref["test"]
    idx = test[stratified_subsample(dataset.y[test], params["cap"], seed)]
    images = dataset.X[idx].reshape((len(idx),) + tuple(dataset.image_shape))
    y = dataset.y[idx]
    specs = [env.registry.get("corruptions", n) for n in params["corruptions"]]
    sets = corrupted_sets(images, specs, params["severities"], seed,
                          fingerprint=dataset.fingerprint(), idx_key=index_hash(idx))
    clean = float((np.asarray(clf.predict(dataset.X[idx])) == y).mean())
    acc = {sp.name: [float((np.asarray(clf.predict(sets[(sp.name, s)].reshape(len(idx), -1)))
                            == y).mean()) for s in params["severities"]] for sp in specs}
    test_acc = float((np.asarray(clf.predict(dataset.X[test])) == dataset.y[test]).mean())
    extra = {"n": int(len(idx)), "clean": clean, "severities": list(params["severities"]),
             "accuracy": acc, "model_cache_hit": bool(ref["hit"])}
    return trial_row(ref["base"], clf, test_acc, extra, t0)
