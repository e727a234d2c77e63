"""The template plugin in plugins/robench-template works and is packaged right (nothing installed)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_config
from robench.plugins import make_registry
from robench.run.runner import execute
from robench.specs import ModelContext
from robench.storage.store import Store
from robench.testing import check_all, check_model

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "plugins" / "robench-template"
MODULE = "robench_template"


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.syspath_prepend(str(TEMPLATE))
    return make_registry(modules=[MODULE], load_entrypoints=False)


def test_register_models(registry):
    spec = registry.get("models", "template-cnn")
    assert spec.plugin == MODULE and spec.requires_image
    assert "template-cnn" in registry.names("models") and "svm" in registry.names("models")
    assert registry.infos[MODULE].components == {"models": ["template-cnn"],
                                                  "metrics": ["template-gap"]}
    assert registry.infos[MODULE].status == "ok"
    # the kit on everything the plugin registers: one model, on 8x8 synthetic images, and
    # one metric (a tiny real run on digits)
    reports = check_all(registry, plugin=MODULE)
    assert list(reports) == [("models", "template-cnn"), ("metrics", "template-gap")]
    assert {"features", "features-head", "deterministic"} <= set(
        reports[("models", "template-cnn")].passed)
    assert {"run-scores", "failed-trials", "empty-group"} <= set(
        reports[("metrics", "template-gap")].passed)


def test_template_metric_is_built_from_its_module_by_the_family_kit(registry):
    """The template's metric is a family of one module: MetricSpec.from_module reads its
    name, version, definition, description, direction and aggregate; __init__ only wires."""
    import robench_template.metric as metric

    spec = registry.get("metrics", "template-gap")
    assert (spec.name, spec.version, spec.definition, spec.description, spec.aggregate) == (
        metric.METRIC, metric.VERSION, metric.DEFINITION, metric.DESCRIPTION, metric.aggregate)
    assert (spec.protocol, spec.higher_is_better, spec.uses_clusterer) == (
        "random-split", False, False)
    assert spec.protocol in registry.names("protocols")


def test_template_cnn_takes_mnist_sized_images(registry):
    check_model("template-cnn", registry, image_shape=(1, 28, 28), train={"max_epochs": 1})


def test_template_cnn_is_a_torch_classifier_with_the_trial_budget(registry):
    from robench.learn.train import DEFAULT_TRAIN, TorchClassifier

    ctx = ModelContext(64, 10, (1, 8, 8), seed=3, train={"max_epochs": 2, "mc_samples": 4})
    clf = registry.get("models", "template-cnn").build(ctx)
    assert isinstance(clf, TorchClassifier)
    assert (clf.seed, clf.max_epochs, clf.lr) == (3, 2, DEFAULT_TRAIN["lr"])
    module = clf.build_module()
    assert module.head.in_features == module.features(torch.zeros(5, 64)).shape[1]
    with pytest.raises(ValueError, match="image"):
        registry.get("models", "template-cnn").build(ModelContext(64, 10, None, seed=0))


def test_importing_the_template_does_not_import_torch():
    code = ("import sys, robench_template; "
            "heavy = {'torch', 'sklearn'} & set(sys.modules); assert not heavy, heavy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(TEMPLATE), str(ROOT), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_template_model_runs_through_the_runner(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(TEMPLATE))
    registry = make_registry(modules=[MODULE], load_entrypoints=False)
    cfg = run_config(datasets=["digits"], models=["template-cnn"], clusterers=["kmeans"],
                     metrics=["rho"], repeats=1, k=2, executor="local", jobs=1,
                     train={"max_epochs": 2}, registry=registry)
    with Store(tmp_path / "r.db") as store:
        report = execute(cfg, registry, store)
        trials = store.trials()
    assert report.failed == [] and report.n_ran == 3
    assert {t["kind"] for t in trials} == {"exclusive", "inclusive", "random"}
    # it learns in 2 epochs (the held-out sources of "exclusive" are harder: not checked)
    assert all(t["accuracy"] > 0.5 for t in trials if t["kind"] != "exclusive")
    # The plugin's version and the model spec's version are part of every trial's key.
    assert {t["versions"]["model"] for t in trials} == {"0.2.0/1"}
    rho = [s for s in report.scores if s.score == "rho"]
    assert len(rho) == 1 and rho[0].model == "template-cnn" and 0 < rho[0].value <= 1.5


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


def test_the_template_install_line_brings_its_test_extra():
    """A plugin author's first `python -m pytest` needs pytest: the README's install lines
    include the template's `test` extra, which holds it."""
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())
    assert any(d.startswith("pytest") for d in meta["project"]["optional-dependencies"]["test"])
    readme = (TEMPLATE / "README.md").read_text(encoding="utf-8")
    installs = [l for l in readme.splitlines() if l.startswith("pip install -e")]
    assert installs and all("[test]" in l for l in installs), installs


def test_a_copy_of_the_template_keeps_what_running_it_writes_out_of_git(tmp_path):
    """Copied into its own repository (CONTRIBUTING's step 1), the template's .gitignore keeps
    out what its steps write there: the results database of `robench run` (step 5) and its
    SQLite side files, a built leaderboard, Python's build and test caches; its own files
    stay visible."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    copy = tmp_path / "robench-my-model"
    shutil.copytree(TEMPLATE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                                  ".pytest_cache"))
    subprocess.run(["git", "init", "-q", str(copy)], check=True)
    own = {p.relative_to(copy).as_posix() for p in copy.rglob("*")
           if p.is_file() and ".git" not in p.relative_to(copy).parts}
    assert ".gitignore" in own and "README.md" in own
    written = ["robench.db", "robench.db-wal", "robench.db-shm", "robench.db-journal",
               "leaderboard/index.html", "robench_template/__pycache__/cnn.cpython-311.pyc",
               "robench_template.egg-info/PKG-INFO", ".pytest_cache/v/cache/nodeids",
               "build/lib/x.py", "dist/robench_template-0.2.0-py3-none-any.whl"]
    for name in written:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text("x")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=copy,
                            capture_output=True, text=True, check=True).stdout
    seen = {line[3:] for line in status.splitlines()}
    assert seen == own, (seen ^ own)
