"""The template plugin in plugins/robench-template works and is packaged right (nothing installed)."""

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import run_config
from robench.plugins import make_registry
from robench.runner import execute
from robench.specs import ModelContext
from robench.store import Store

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "plugins" / "robench-template"
MODULE = "robench_template"


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.syspath_prepend(str(TEMPLATE))
    return make_registry(modules=[MODULE], load_entrypoints=False)


def test_register_models(registry):
    spec = registry.get("models", "logreg")
    assert spec.plugin == MODULE
    assert "logreg" in registry.names("models") and "svm" in registry.names("models")
    assert registry.infos[MODULE].components == {"models": ["logreg"]}
    assert registry.infos[MODULE].status == "ok"

    digits = registry.get("datasets", "digits").load()
    rng = np.random.default_rng(0)
    idx = rng.permutation(digits.n_samples)[:700]
    train, val, test = idx[:400], idx[400:500], idx[500:]
    ctx = ModelContext(digits.n_features, digits.n_classes, digits.image_shape, seed=0)
    model = spec.build(ctx)
    model.fit(digits.X[train], digits.y[train], digits.X[val], digits.y[val])
    pred = model.predict(digits.X[test])
    assert pred.dtype == np.int64 and pred.shape == (len(test),)
    assert (pred == digits.y[test]).mean() > 0.8
    assert model.history_ == [] and model.n_epochs_ == 0 and model.best_epoch_ == 0
    assert 0 < model.val_accuracy_ <= 1 and 0 < model.train_accuracy_ <= 1
    assert model.features(digits.X[test]).shape == (len(test), digits.n_features)


def test_template_model_runs_through_the_runner(monkeypatch, tmp_path):
    # The small data set with true sources from tests/plugins/tiny.py keeps this fast.
    monkeypatch.syspath_prepend(str(TEMPLATE))
    registry = make_registry(modules=["tests.plugins.tiny", MODULE], load_entrypoints=False)
    cfg = run_config(datasets=["tiny"], models=["logreg"], clusterers=["oracle"],
                    metrics=["rho"], repeats=2, executor="local", jobs=1)
    with Store(tmp_path / "r.db") as store:
        report = execute(cfg, registry, store)
        trials = store.trials()
    assert report.failed == [] and report.n_ran == 6
    assert {t["kind"] for t in trials} == {"exclusive", "inclusive", "random"}
    # The plugin's version and the model spec's version are part of every trial's key.
    assert {t["versions"]["model"] for t in trials} == {"0.1.0/1"}
    rho = [s for s in report.scores if s.score == "rho"]
    assert len(rho) == 1 and rho[0].model == "logreg" and 0 < rho[0].value <= 1.5


def test_template_entry_point_is_wired(monkeypatch):
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == "robench-template"
    assert any(d.split(">")[0].split("=")[0].strip() == "robench" for d in project["dependencies"])
    eps = project["entry-points"]
    assert list(eps) == ["robench"], "the entry-point group must be exactly 'robench'"
    (name, target), = eps["robench"].items()
    assert name == "template"
    assert ":" not in target, "the entry point names a module, whose @hookimpl functions load"
    package_dir = TEMPLATE.joinpath(*target.split("."))
    assert (package_dir / "__init__.py").is_file()
    includes = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    assert any(target.startswith(pattern.rstrip("*")) for pattern in includes)
    # __version__ (used when loaded by module path) must match the distribution's version.
    monkeypatch.syspath_prepend(str(TEMPLATE))
    import robench_template

    assert robench_template.__version__ == project["version"]


def test_plugins_folder_is_not_a_python_package():
    assert not (ROOT / "plugins" / "__init__.py").exists()
    assert not (TEMPLATE / "__init__.py").exists()
