"""Issue 18's "done when": purity-ratio on digits with a plugin model has 0 failed trials, and
no stored corrupted set holds a non-finite value."""

from pathlib import Path

import numpy as np
import pytest

from robench.data.cache import cache_dir
from robench.plugins import make_registry
from robench.run.runner import execute
from robench.storage.store import Store
from tests.helpers import run_config

pytest.importorskip("torch")

TEMPLATE = Path(__file__).resolve().parents[2] / "plugins" / "robench-template"


def test_purity_ratio_on_digits_with_plugin_models_fails_no_trial_and_stores_finite_sets(
        monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(TEMPLATE))
    registry = make_registry(modules=["robench_template", "tests.plugins.sklearn_features"],
                             load_entrypoints=False)
    models = ["template-cnn", "logreg-features", "mlp"]
    # every corruption (spatter's empty masks made all-NaN images on these 8x8 digits) at
    # the severities where spatter failed, a small stratified subsample, one attack
    cfg = run_config(datasets=["digits"], models=models, metrics=["purity-ratio"],
                     executor="local", jobs=1, registry=registry, train={"max_epochs": 1},
                     clusterability={"zoo": models, "severities": [1, 2],
                                     "corruption_cap": 150, "attacks": ["fgsm"],
                                     "epsilons": [0.1], "attack_cap": 20,
                                     "multicut_cap": 150, "overlap_cap": 150})
    with Store(tmp_path / "r.db") as store:
        report = execute(cfg, registry, store)
        trials = store.trials()
    assert report.failed == [], [(t["model"], t.get("error")) for t in trials
                                 if t["status"] != "ok"]
    assert {t["model"] for t in trials} == set(models)
    assert all(t["status"] == "ok" for t in trials)
    robust = {s.model: s.value for s in report.scores if s.score == "corruption_robustness"}
    assert set(robust) == set(models) and all(v is not None and v > 0 for v in robust.values())
    # every corrupted set the run stored is finite, spatter's included
    stored = sorted((cache_dir() / "corruptions").glob("*.npz"))
    assert stored, "the run stored no corrupted set"
    names = set()
    for path in stored:
        with np.load(path) as arrays:
            for key in arrays.files:
                a = arrays[key]
                if a.dtype.kind == "f":
                    assert np.isfinite(a).all(), f"{path.name}:{key} holds non-finite values"
                names.add(key)
    assert len(stored) >= 19
