"""Every registration hook, exercised by a tiny plugin class on a fresh plugin manager.

``register_models`` is tested with the template plugin in tests/test_template_plugin.py.
tests/test_hook_docs.py checks that every hook has a test named after it.
"""

import numpy as np
import pytest

from robench import hookimpl
from robench.config import RunConfig
from robench.data import Dataset
from robench.executors import Executor, LocalExecutor
from robench.plugins import Registry, make_plugin_manager
from robench.runner import execute
from robench.specs import ClustererSpec, DatasetSpec, ExecutorSpec, MetricSpec, Score
from robench.store import Store

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


def test_plugin_components_run_end_to_end(tmp_path, monkeypatch):
    """A third-party dataset, clusterer, metric and executor work together through the runner."""
    monkeypatch.setattr(RecordingExecutor, "ran", [])
    reg = registry_with(TinyPlugin())
    assert reg.infos[PLUGIN].components == {
        "datasets": ["two-blobs"], "clusterers": ["rank-bins"],
        "metrics": ["mean-exclusive"], "executors": ["recording"],
    }
    cfg = RunConfig(datasets=["two-blobs"], models=["svm"], clusterers=["rank-bins"],
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
