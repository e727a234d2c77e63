"""Devices: --device resolution and errors, the device in every trial row (never in its key),
one GPU per process worker, torch work on the trial's device."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from robench.learn import devices
from robench.learn.devices import DeviceError, resolve_device
from tests.helpers import run_config

HAS_CUDA = devices.cuda_count() > 0
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU; this machine has none")
no_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the error raised where no GPU is visible")


def test_cpu_resolves_to_cpu_and_auto_to_the_gpu_only_when_one_is_visible():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(" CPU ") == "cpu"
    expected = "cuda" if HAS_CUDA else ("mps" if devices.mps_available() else "cpu")
    assert resolve_device("auto") == expected


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:x", "cuda0", "tpu", ""])
def test_malformed_devices_are_refused_with_the_syntax(bad):
    with pytest.raises(DeviceError, match="auto, cpu, cuda, cuda:N or mps"):
        resolve_device(bad)


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_a_gpu_is_a_clear_error(device):
    with pytest.raises(DeviceError, match="no CUDA GPU is visible"):
        resolve_device(device)


def test_cuda_index_beyond_the_visible_gpus_is_refused(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 2)
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceError, match="only 2 CUDA GPU"):
        resolve_device("cuda:2")


@no_cuda
def test_cli_device_cuda_without_a_gpu_exits_2_and_stores_nothing(tmp_path):
    from robench.cli import cli

    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "mlp", "--metric", "rho",
                                      "--device", "cuda", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "no CUDA GPU is visible" in result.output and "Traceback" not in result.output
    assert not db.exists()


def test_cli_bad_device_exits_2(tmp_path):
    from robench.cli import cli

    result = CliRunner().invoke(cli, ["run", "-d", "digits", "--device", "gpu0",
                                      "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 2 and "'gpu0' is not a device" in result.output


def test_every_trial_records_its_device_and_the_device_is_not_in_the_key(tiny_registry, store):
    """--device cpu is recorded in each row; rerunning with another device trains nothing."""
    from robench.run.runner import execute

    base = dict(datasets=["tiny"], models=["centroid", "mlp"], clusterers=["kmeans"],
                metrics=["rho"], repeats=1, k=3, executor="local",
                train={"max_epochs": 2, "patience": 1}, registry=tiny_registry)
    first = execute(run_config(device="cpu", **base), tiny_registry, store)
    assert first.n_ran == first.n_planned > 0 and not first.failed
    rows = store.trials()
    assert {r["device"] for r in rows} == {"cpu"}
    # the stored spec is what the key hashes: no device in it
    assert all("device" not in r["spec"] for r in rows)
    # Another device plans the very same keys: everything is found stored. (cuda itself is
    # never touched: nothing runs.)
    again = execute(run_config(device="cuda", **base), tiny_registry, store)
    assert again.n_ran == 0 and again.n_cached == first.n_planned


def test_the_process_executor_gives_each_worker_one_gpu(tiny_registry, store, monkeypatch):
    """With several GPUs visible and device cuda, each worker sees exactly one of them.

    The assignment is made by the driver, so pretending the driver sees two GPUs exercises it
    on a CPU-only machine: the centroid model never touches torch, and each worker's rows
    record the GPU it was given.
    """
    from robench.run.runner import execute

    monkeypatch.setattr(devices, "cuda_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = run_config(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"],
                     metrics=["rho"], repeats=3, k=3, executor="process", jobs=2,
                     device="cuda", registry=tiny_registry)
    report = execute(cfg, tiny_registry, store)
    assert not report.failed, report.failed
    by_worker = {}
    for row in store.trials():
        by_worker.setdefault(row["worker"], set()).add(row["device"])
    assert all(len(d) == 1 for d in by_worker.values()), by_worker
    labels = [d.pop() for d in by_worker.values()]
    assert set(labels) <= {"cuda:0", "cuda:1"}
    assert len(set(labels)) == len(labels)  # no two workers share a GPU


def test_worker_gpus_round_robin_over_the_visible_ones(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 3)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert devices.worker_gpus("cuda", 4) == ["0", "1", "2", "0"]
    assert devices.worker_gpus("cuda:1", 4) == []  # pinned: every worker uses GPU 1
    assert devices.worker_gpus("cpu", 4) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")
    assert devices.worker_gpus("cuda", 2) == ["4", "6"]  # physical ids the user made visible
    monkeypatch.setattr(devices, "cuda_count", lambda: 1)
    assert devices.worker_gpus("cuda", 4) == []  # one GPU: nothing to spread


def test_device_label_names_the_workers_own_gpu(monkeypatch):
    monkeypatch.delenv(devices.WORKER_GPU_ENV, raising=False)
    assert devices.device_label("cpu") == "cpu"
    assert devices.device_label("cuda:2") == "cuda:2"
    assert devices.device_label("cuda") == "cuda:0"
    monkeypatch.setenv(devices.WORKER_GPU_ENV, "3")
    assert devices.device_label("cuda") == "cuda:3"


def test_using_device_sets_and_restores_the_current_device():
    assert devices.current_device() == "cpu"
    with devices.using_device("cuda:1"):
        assert devices.current_device() == "cuda:1"
    assert devices.current_device() == "cpu"


def _fit_small(seed=0):
    import functools

    from robench.learn.train import MLP, TorchClassifier

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    clf = TorchClassifier(functools.partial(MLP, 5, 2, hidden=(8,)), seed=seed, max_epochs=2,
                          patience=1, batch_size=32, lr=1e-2)
    return clf.fit(X[:80], y[:80], X[80:], y[80:]), X


def test_torch_classifier_trains_on_the_current_device_cpu():
    clf, X = _fit_small()
    assert clf.device_ == "cpu"
    assert clf.predict(X).dtype == np.int64 and clf.features(X).shape == (120, 8)


@needs_cuda
def test_torch_classifier_trains_predicts_and_reads_features_on_cuda():
    import torch

    with devices.using_device("cuda"):
        clf, X = _fit_small()
    assert clf.device_.startswith("cuda")
    assert next(clf.module_.parameters()).device.type == "cuda"
    cpu, _ = _fit_small()
    # the same model on the CPU agrees on nearly every prediction (last-bit differences only)
    assert (clf.predict(X) == cpu.predict(X)).mean() > 0.95
    assert isinstance(clf.features(X), np.ndarray)
    assert torch.cuda.is_available()


@needs_cuda
def test_attacks_run_on_the_modules_gpu():
    from robench.families.purity_ratio.attacks import robust_accuracies

    with devices.using_device("cuda"):
        clf, X = _fit_small()
    X01 = (X - X.min()) / (X.max() - X.min())
    y = clf.predict(X01)
    res = robust_accuracies(clf.module_, X01[:20], y[:20], 2, [0.05])
    assert res["clean"] == 1.0 and set(res) >= {"fgsm", "pgd", "deepfool"}
    assert next(clf.module_.parameters()).device.type == "cuda"  # ART moved it back


def test_the_runs_device_is_stored_with_the_run(tiny_registry, store):
    from robench.run.runner import execute

    report = execute(run_config(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"],
                                metrics=["rho"], repeats=1, k=3, device="cpu",
                                registry=tiny_registry), tiny_registry, store)
    config = json.loads(store.db.conn.execute("select config from runs where id=?",
                                    (report.run_id,)).fetchone()[0])
    assert config["device"] == "cpu"


def test_finding_sources_runs_on_the_runs_device(tiny_registry, store):
    """The driver-side preparation (a VAE may train there) sees the run's device."""
    from dataclasses import replace

    from robench.run.runner import execute

    seen = []
    registry_protocol = tiny_registry.get("protocols", "source-aware")

    def spy(*args, **kwargs):
        seen.append(devices.current_device())
        return registry_protocol.prepare(*args, **kwargs)

    tiny_registry._by_kind["protocols"]["source-aware"] = replace(registry_protocol, prepare=spy)
    cfg = run_config(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"],
                     metrics=["rho"], repeats=1, k=3, device="cuda:1", registry=tiny_registry)
    # nothing touches CUDA: the centroid model and k-means are numpy; trials run locally
    report = execute(cfg, tiny_registry, store)
    assert seen == ["cuda:1"] and devices.current_device() == "cpu"
    assert {r["device"] for r in store.trials()} == {"cuda:1"}
    assert not report.failed
