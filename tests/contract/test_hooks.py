"""Every registration hook, exercised by a tiny plugin class on a fresh plugin manager.

``register_models`` is tested with the template plugin in tests/contract/test_template_plugin.py.
tests/contract/test_hook_docs.py checks that every hook has a test named after it.
"""

import numpy as np
import pytest

from robench import hookimpl
from tests.helpers import run_config
from robench.data import Dataset
from robench.run.executors import Executor, LocalExecutor
from robench.plugins import Registry, make_plugin_manager
from robench.run.runner import execute
from robench.specs import ClustererSpec, DatasetSpec, ExecutorSpec, MetricSpec, Score
from robench.storage.store import Store

PLUGIN = "tiny-plugin"


def registry_with(plugin) -> Registry:
    """Return a registry of the built-ins plus ``plugin``, no installed entry points."""
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(plugin, name=PLUGIN)
    return Registry(pm, infos)


def load_two_blobs() -> Dataset:
    """Return 60 samples of 2 well separated classes, 4 features."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    return Dataset("two-blobs", rng.normal(size=(60, 4)) + 3.0 * y[:, None], y)


def rank_bins(Z, k, *, seed, true_sources=None):
    """Split rows into k equal bins by their first feature."""
    ranks = np.argsort(np.argsort(Z[:, 0], kind="stable"), kind="stable")
    return ranks * k // len(Z)


def mean_exclusive(group, trials):
    """Return the mean accuracy of the group's exclusive trials."""
    accs = [t["accuracy"] for t in trials if t["kind"] == "exclusive" and t["status"] == "ok"]
    return [Score(**group, metric="mean-exclusive", score="mean-exclusive",
                  value=float(np.mean(accs)) if accs else None, n=len(accs))]


class RecordingExecutor(Executor):
    """Run trials in this process and remember their keys."""

    name = "recording"
    ran: list = []

    def __init__(self, registry, jobs=1, **options):
        self.inner = LocalExecutor(registry, jobs=jobs)

    def run(self, specs):
        for spec in specs:
            RecordingExecutor.ran.append(spec["key"])
            yield from self.inner.run([spec])


DATASET = DatasetSpec("two-blobs", load_two_blobs, "Two Gaussian blobs.", version="2")
CLUSTERER = ClustererSpec("rank-bins", rank_bins, "Equal bins of the first feature.")
METRIC = MetricSpec(
    name="mean-exclusive", description="Mean exclusive accuracy.", protocol="source-aware",
    aggregate=mean_exclusive, definition="mean over repeats of the source-exclusive accuracy",
)
EXECUTOR = ExecutorSpec("recording", RecordingExecutor, "Local, and records what ran.")


class TinyPlugin:
    """A plugin that implements every hook but register_models."""

    @hookimpl
    def register_datasets(self, register):
        register(DATASET)

    @hookimpl
    def register_clusterers(self, register):
        register(CLUSTERER)

    @hookimpl
    def register_metrics(self, register):
        register(METRIC)

    @hookimpl
    def register_executors(self, register):
        register(EXECUTOR)


def test_register_datasets():
    class Plugin:
        @hookimpl
        def register_datasets(self, register):
            register(DATASET)

    reg = registry_with(Plugin())
    spec = reg.get("datasets", "two-blobs")
    assert spec.plugin == PLUGIN and spec.description == "Two Gaussian blobs."
    assert "digits" in reg.names("datasets")  # built-ins are registered beside it
    assert reg.infos[PLUGIN].components == {"datasets": ["two-blobs"]}
    data = spec.load()
    assert (data.n_samples, data.n_features, data.n_classes) == (60, 4, 2)
    assert reg.component_version("datasets", "two-blobs").endswith("/2")


def test_register_clusterers():
    class Plugin:
        @hookimpl
        def register_clusterers(self, register):
            register(CLUSTERER)

    reg = registry_with(Plugin())
    spec = reg.get("clusterers", "rank-bins")
    assert spec.plugin == PLUGIN
    assert set(reg.names("clusterers")) >= {"kmeans", "oracle", "rank-bins"}
    labels = spec.fit_predict(np.arange(12, dtype=float)[:, None], 3, seed=0)
    assert labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_register_metrics():
    class Plugin:
        @hookimpl
        def register_metrics(self, register):
            register(METRIC)

    reg = registry_with(Plugin())
    spec = reg.get("metrics", "mean-exclusive")
    assert spec.plugin == PLUGIN and spec.protocol == "source-aware" and spec.higher_is_better
    group = {"dataset": "d", "model": "m", "clusterer": "c"}
    trials = [{"kind": "exclusive", "status": "ok", "accuracy": a} for a in (0.5, 0.7)]
    trials.append({"kind": "inclusive", "status": "ok", "accuracy": 0.9})
    (score,) = spec.aggregate(group, trials)
    assert score.value == pytest.approx(0.6) and score.n == 2


def test_register_executors():
    class Plugin:
        @hookimpl
        def register_executors(self, register):
            register(EXECUTOR)

    reg = registry_with(Plugin())
    spec = reg.get("executors", "recording")
    assert spec.plugin == PLUGIN
    assert set(reg.names("executors")) >= {"local", "process", "recording"}
    executor = spec.create(reg, jobs=1)
    assert list(executor.run([])) == []
    executor.close()


def test_register_protocols(tmp_path, monkeypatch):
    """A plugin adds a whole family: protocol with knobs, metric, CLI report, leaderboard."""
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.run.config import parse_settings
    from robench.present.site import build_site
    from robench.plugins import make_registry, set_registry
    from tests.plugins import holdout_family

    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.holdout_family"],
                        load_entrypoints=False)
    spec = reg.get("protocols", "holdout")
    assert spec.plugin == "tests.plugins.holdout_family" and spec is not holdout_family.PROTOCOL
    assert reg.infos["tests.plugins.holdout_family"].components == {
        "metrics": ["holdout-acc"], "protocols": ["holdout"]}
    # knobs come from the registry: defaults < profile < --set, typed when parsed
    assert run_config(registry=reg).knobs["holdout"] == {"repeats": 2, "test_size": 0.25}
    assert run_config(registry=reg, profile="paper").knobs["holdout"]["repeats"] == 10
    assert parse_settings(["holdout.test_size=0.5"], reg) == {"holdout": {"test_size": 0.5}}
    with pytest.raises(ValueError, match=r"holdout.repeats: value \"x\" is not an integer"):
        parse_settings(['holdout.repeats="x"'], reg)
    with pytest.raises(ValueError, match="above 50"):
        run_config(registry=reg, holdout={"repeats": 60})

    set_registry(reg)
    try:
        db = str(tmp_path / "r.db")
        runner = CliRunner()
        out = runner.invoke(cli, ["knobs", "holdout"])
        assert out.exit_code == 0 and "holdout.test_size = quick 0.25, standard 0.25, paper 0.25" in out.output
        out = runner.invoke(cli, ["list", "protocols"])
        assert "holdout" in out.output and "--set holdout.*" in out.output
        out = runner.invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "--metric",
                                  "holdout-acc", "--set", "holdout.repeats=3", "--executor",
                                  "local", "--db", db])
        assert out.exit_code == 0, out.output
        assert "3 trials planned" in out.output and "HOLDOUT REPORT tiny/centroid" in out.output
        out = runner.invoke(cli, ["results", "--metric", "holdout-acc", "--db", db])
        label, report = out.output.split("\n", 1)  # which configuration, then the report
        assert label.startswith("tiny / holdout-acc: configuration quick R=3 k=5 seed=0 "
                                "(holdout.repeats=3)")
        assert report.startswith("HOLDOUT REPORT tiny/centroid")
        out = runner.invoke(cli, ["run", "-d", "tiny", "--metric", "holdout-acc", "--set",
                                  "holdout.test_size=2", "--db", db])
        assert out.exit_code == 2 and "holdout.test_size: value 2 is above the maximum 0.9" \
            in out.output and "Traceback" not in out.output
        # applies_to: a combination the metric cannot score is skipped with its reason
        import dataclasses

        picky = dataclasses.replace(reg.get("metrics", "holdout-acc"),
                                    applies_to=lambda d, m: f"no {m.name} on {d.name}")
        monkeypatch.setitem(reg._by_kind["metrics"], "holdout-acc", picky)
        out = runner.invoke(cli, ["run", "--metric", "holdout-acc", "--executor", "local",
                                  "--db", db])
        assert out.exit_code == 0 and "0 trials planned" in out.output
        assert "holdout-acc: no centroid on tiny" in out.output  # listed as skipped
        out = runner.invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "--metric",
                                  "holdout-acc", "--db", db])
        assert out.exit_code == 2 and "no centroid on tiny" in out.output  # by name: an error
        monkeypatch.undo()
        with Store(db) as store:
            build_site(store, tmp_path / "site", registry=reg)
            html = (tmp_path / "site" / "datasets" / "tiny.html").read_text()
        assert "<h3>Hold-out accuracy on tiny</h3>" in html and 'class="holdout"' in html
    finally:
        set_registry(None)


def test_plugin_components_run_end_to_end(tmp_path, monkeypatch):
    """A third-party dataset, clusterer, metric and executor work together through the runner."""
    monkeypatch.setattr(RecordingExecutor, "ran", [])
    reg = registry_with(TinyPlugin())
    assert reg.infos[PLUGIN].components == {
        "datasets": ["two-blobs"], "clusterers": ["rank-bins"],
        "metrics": ["mean-exclusive"], "executors": ["recording"],
    }
    cfg = run_config(datasets=["two-blobs"], models=["svm"], clusterers=["rank-bins"],
                    metrics=["mean-exclusive"], repeats=2, k=2, executor="recording", jobs=1)
    with Store(tmp_path / "r.db") as store:
        report = execute(cfg, reg, store)
        assert report.failed == [] and report.n_ran == 6
        assert sorted(RecordingExecutor.ran) == sorted(t["key"] for t in store.trials())
        (score,) = report.scores
        assert (score.dataset, score.model, score.clusterer) == ("two-blobs", "svm", "rank-bins")
        assert score.metric == "mean-exclusive" and score.n == 2 and score.value > 0.8
        # Same config again: every trial is stored, nothing runs.
        again = execute(cfg, reg, store)
    assert again.n_ran == 0 and again.n_cached == 6
    assert len(RecordingExecutor.ran) == 6
