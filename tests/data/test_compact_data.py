"""Compact data (issue 21, item 5): uint8 pixels converted per batch, memory maps from the cache.

The float32 path and the compact path must give the very same numbers: a pixel's float value is
value / 255 rounded once in float32 on both.
"""

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from robench.data import Dataset, DatasetError, pixels_to_float
from robench.run.trials import fit_and_score


def pixel_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.integers(0, 80, (n, 1, 8, 8), dtype=np.uint8)
    for i, c in enumerate(y):
        X[i, 0, 2 * c:2 * c + 2] = 240
    return X.reshape(n, -1), y


def test_pixels_convert_exactly_like_the_float32_path():
    v = np.arange(256, dtype=np.uint8)
    as_before = (v / 255.0).astype(np.float32)  # how mnist-5k and the first npz reader scaled
    np.testing.assert_array_equal(pixels_to_float(v), as_before)
    import torch

    from robench.learn.train import as_float

    np.testing.assert_array_equal(as_float(torch.from_numpy(v)).numpy(), as_before)


def test_a_compact_data_set_holds_uint8_and_reads_float32_rows():
    X, y = pixel_data()
    ds = Dataset("px", X, y, image_shape=(1, 8, 8), pixels=True)
    assert ds.raw.dtype == np.uint8 and ds.pixels and ds.nbytes == X.nbytes
    np.testing.assert_array_equal(ds.rows([3, 5]), pixels_to_float(X[[3, 5]]))
    assert ds._X is None  # rows() converted only the rows asked for
    assert ds.X.dtype == np.float32 and ds.X.max() <= 1.0
    with pytest.raises(DatasetError, match="needs uint8"):
        Dataset("px", X.astype(np.int16), y, image_shape=(1, 8, 8), pixels=True)
    with pytest.raises(DatasetError, match="needs an image_shape"):
        Dataset("px", X, y, pixels=True)


def test_float_data_keeps_its_fingerprint_and_compact_data_has_its_own():
    X, y = pixel_data()
    flt = Dataset("f", pixels_to_float(X), y, image_shape=(1, 8, 8))
    px = Dataset("p", X, y, image_shape=(1, 8, 8), pixels=True)
    assert flt.fingerprint() != px.fingerprint()
    # digits is float data: its fingerprint is the one the key-stability fixture pins
    from sklearn.datasets import load_digits

    from robench.builtin.datasets import load_digits as robench_digits

    assert robench_digits().fingerprint() == "f6eb73e04aa7d0f81089"
    assert load_digits().data.shape == (1797, 64)


@pytest.mark.parametrize("model", ["mlp", "cnn-1", "svm"])
def test_compact_and_float32_data_give_the_same_trial(model):
    from robench.plugins import make_registry

    spec = make_registry(load_entrypoints=False).get("models", model)
    X, y = pixel_data()
    compact = Dataset("px", X, y, image_shape=(1, 8, 8), pixels=True)
    flt = Dataset("px", pixels_to_float(X), y, image_shape=(1, 8, 8))
    idx = np.random.default_rng(1).permutation(len(y))
    parts = idx[:70], idx[70:90], idx[90:]
    budget = {"max_epochs": 2, "patience": 2, "batch_size": 16}
    a = fit_and_score(spec, compact, *parts, seed=3, train_budget=budget)
    b = fit_and_score(spec, flt, *parts, seed=3, train_budget=budget)
    for key in ("accuracy", "all_accuracy", "correct", "per_class", "history", "train_accuracy",
                "val_accuracy", "best_epoch"):
        assert a[key] == b[key], key


def test_a_torch_model_is_handed_uint8_rows_and_never_the_float_copy(monkeypatch):
    from robench.plugins import make_registry
    from robench.learn.train import TorchClassifier

    seen = []
    fit = TorchClassifier.fit
    monkeypatch.setattr(TorchClassifier, "fit",
                        lambda self, X, *a: seen.append(X.dtype) or fit(self, X, *a))
    X, y = pixel_data()
    ds = Dataset("px", X, y, image_shape=(1, 8, 8), pixels=True)
    spec = make_registry(load_entrypoints=False).get("models", "mlp")
    fit_and_score(spec, ds, np.arange(80), np.arange(80, 100), np.arange(100, 120), seed=0,
                  train_budget={"max_epochs": 1})
    assert seen == [np.uint8]
    assert ds._X is None  # no float32 copy of the data set was made


def _npz_images(path, seed=0):
    X, y = pixel_data(seed=seed)
    np.savez(path, X=X.reshape(-1, 1, 8, 8), y=y, groups=np.arange(len(y)) % 6)
    return path


def test_file_data_is_memory_mapped_above_the_threshold_and_float32_when_asked(tmp_path,
                                                                               monkeypatch):
    from robench.plugins import make_registry

    ref = f"npz:{_npz_images(tmp_path / 'x.npz')}"

    def load():
        reg = make_registry(load_entrypoints=False)
        return reg.load_dataset(reg.get("datasets", ref).name)

    small = load()
    assert small.raw.dtype == np.uint8 and not isinstance(small.raw, np.memmap)
    monkeypatch.setenv("ROBENCH_MMAP_BYTES", "0")
    mapped = load()
    assert isinstance(mapped.raw, np.memmap) and mapped.raw.dtype == np.uint8
    monkeypatch.setenv("ROBENCH_COMPACT_DATA", "0")
    old_path = load()
    assert old_path.raw.dtype == np.float32 and not isinstance(old_path.raw, np.memmap)
    np.testing.assert_array_equal(old_path.X, mapped.X)
    assert old_path.fingerprint() == mapped.fingerprint() == small.fingerprint()


def test_a_run_on_memory_mapped_pixels_stores_what_the_float32_path_stores(tmp_path,
                                                                          monkeypatch):
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.plugins import set_registry

    npz = _npz_images(tmp_path / "x.npz")
    results = {}
    for mode, env in (("compact", {"ROBENCH_MMAP_BYTES": "0"}),
                      ("float32", {"ROBENCH_COMPACT_DATA": "0"})):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / f"cache-{mode}"))
        set_registry(None)
        db = tmp_path / f"{mode}.db"
        res = CliRunner().invoke(cli, ["run", "-d", f"npz:{npz}", "-m", "cnn-1",
                                       "-c", "oracle", "-k", 2, "-r", 1, "--metric", "rho",
                                       "--executor", "process", "-j", 2,
                                       "--set", "train.max_epochs=2", "--db", str(db)])
        set_registry(None)
        for k in env:
            monkeypatch.delenv(k)
        assert res.exit_code == 0, res.output
        conn = sqlite3.connect(db)
        results[mode] = conn.execute("SELECT key, accuracy, correct, history FROM trials "
                                     "ORDER BY key").fetchall()
        conn.close()
    assert len(results["compact"]) == 3
    assert results["compact"] == results["float32"]  # same keys, same numbers
    assert all(json.loads(r[3]) for r in results["compact"])


# --- memory that scales: rows read a batch at a time (issue 21, item 5) ---------------------


def _mapped(tmp_path, n=600, d=3 * 16 * 16, seed=0):
    """Return a pixel Dataset memory-mapped from a .npy file, and its array in memory."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 255, (n, d), dtype=np.uint8)
    y = np.arange(n) % 3
    X[np.arange(n), y] = 255  # a learnable signal
    np.save(tmp_path / "X.npy", X)
    mm = np.load(tmp_path / "X.npy", mmap_mode="c")
    return Dataset("mapped", mm, y, image_shape=(3, 16, 16), pixels=True), X


def test_rows_of_a_mapped_data_set_are_read_from_the_file_not_through_the_map(tmp_path,
                                                                               monkeypatch):
    ds, X = _mapped(tmp_path)
    assert isinstance(ds.raw, np.memmap)  # still memory-mapped: nothing loaded it whole

    def no_map(*a, **k):
        raise AssertionError("rows were read through the memory map")

    monkeypatch.setattr(np.memmap, "__getitem__", no_map)
    idx = np.random.default_rng(1).permutation(len(X))[:100]
    np.testing.assert_array_equal(ds.take(idx), X[idx])
    np.testing.assert_array_equal(ds.take(np.arange(5, 50)), X[5:50])  # one run, one read
    np.testing.assert_array_equal(ds.take([-1, 0, 0]), X[[-1, 0, 0]])
    np.testing.assert_array_equal(ds.rows(idx), pixels_to_float(X[idx]))
    rows = ds.view(idx)
    assert len(rows) == 100 and rows.shape == (100, X.shape[1]) and rows.dtype == np.uint8
    np.testing.assert_array_equal(rows[10:20], X[idx[10:20]])
    np.testing.assert_array_equal(rows[[3, 1]], X[idx[[3, 1]]])
    np.testing.assert_array_equal(np.asarray(rows), X[idx])
    np.testing.assert_array_equal(ds.view()[590:700], X[590:])
    with pytest.raises(IndexError):
        ds.take([len(X)])


def test_a_view_of_a_memory_map_is_not_mistaken_for_the_file(tmp_path):
    ds, X = _mapped(tmp_path)
    part = Dataset("part", ds.raw[100:], ds.y[100:], image_shape=(3, 16, 16), pixels=True)
    assert part._reader() is None  # its rows are not at the file's offset: read as an array
    np.testing.assert_array_equal(part.take([0, 5]), X[[100, 105]])


def test_a_torch_model_reads_batches_and_never_copies_a_split(tmp_path, monkeypatch):
    """fit gets Rows views; the numpy memory of a trial stays at batches, not the split."""
    import tracemalloc

    from robench.plugins import make_registry
    from robench.learn.train import TorchClassifier

    ds, X = _mapped(tmp_path, n=3000)
    seen = []
    fit = TorchClassifier.fit
    monkeypatch.setattr(TorchClassifier, "fit",
                        lambda self, X, y, Xv, yv: seen.append((type(X), type(Xv)))
                        or fit(self, X, y, Xv, yv))
    spec = make_registry(load_entrypoints=False).get("models", "mlp")
    parts = np.arange(2400), np.arange(2400, 2700), np.arange(2700, 3000)
    fit_and_score(spec, ds, *parts, seed=0, train_budget={"max_epochs": 1})  # warm up
    tracemalloc.start()
    try:
        fit_and_score(spec, ds, *parts, seed=0, train_budget={"max_epochs": 1})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    from robench.data import Rows

    assert seen[-1] == (Rows, Rows)
    split = X[parts[0]].nbytes  # 1.8 MB: what a copy of the training split costs
    assert peak < split / 2, f"numpy peak {peak} bytes vs a {split}-byte training split"


@pytest.mark.parametrize("model", ["mlp", "svm"])
def test_batched_and_chunked_passes_equal_the_whole_array_path(tmp_path, monkeypatch, model):
    """The Rows path (and the SVM's chunked prediction) gives the old path's numbers."""
    from robench.run import trials
    from robench.plugins import make_registry

    ds, X = _mapped(tmp_path)
    spec = make_registry(load_entrypoints=False).get("models", model)
    idx = np.random.default_rng(2).permutation(len(X))
    parts = idx[:400], idx[400:480], idx[480:]
    budget = {"max_epochs": 2, "patience": 2, "batch_size": 32}
    monkeypatch.setattr(trials, "PREDICT_CHUNK", 7)  # many chunks, one shorter
    new = fit_and_score(spec, ds, *parts, seed=5, train_budget=budget)
    monkeypatch.setenv("ROBENCH_COMPACT_DATA", "0")  # the float32 path: whole arrays
    old = fit_and_score(spec, Dataset("mapped", pixels_to_float(X), ds.y,
                                      image_shape=(3, 16, 16)), *parts, seed=5,
                        train_budget=budget)
    for key in ("accuracy", "all_accuracy", "correct", "per_class", "history", "train_accuracy",
                "val_accuracy", "best_epoch"):
        assert new[key] == old[key], key


def test_evaluation_fills_one_result_and_gives_torch_cat_values(monkeypatch):
    import torch

    from robench.learn.train import MLP, TorchClassifier, EVAL_BATCH_SIZE

    X = np.random.default_rng(0).random((EVAL_BATCH_SIZE * 3 + 5, 20), dtype=np.float32)
    y = np.arange(len(X)) % 4
    clf = TorchClassifier(lambda: MLP(20, 4), seed=0, max_epochs=1, patience=1,
                          batch_size=64, lr=1e-3).fit(X, y, X[:50], y[:50])
    with torch.inference_mode():
        want = torch.cat([clf.module_(torch.from_numpy(X[s:s + EVAL_BATCH_SIZE]))
                          for s in range(0, len(X), EVAL_BATCH_SIZE)])
    cat = torch.cat
    monkeypatch.setattr(torch, "cat", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("results joined from a list of batch tensors")))
    got = clf.predict_proba(X)
    np.testing.assert_array_equal(got, cat([torch.softmax(want, 1)]).numpy())
    assert clf.features(X[:0]).shape == (0, 128)


def test_the_boundary_checks_float_rows_of_a_view_a_batch_at_a_time(monkeypatch):
    from robench.data import boundary
    from robench.data.boundary import NonFiniteModelInput, check_model_input

    X = np.random.default_rng(0).random((50, 4)).astype(np.float32)
    ds = Dataset("f", X, np.arange(50) % 2)
    ds.raw[[7, 31], 2] = np.nan  # after validation: what the boundary must still catch
    monkeypatch.setattr(boundary, "CHECK_BATCH", 8)
    with pytest.raises(NonFiniteModelInput, match="2 of 50 rows"):
        check_model_input(ds.view(), "m", "rows")
    assert len(check_model_input(ds.view(np.arange(7)), "m", "rows")) == 7


WORKER_RSS = r"""
import json, sys
import numpy as np
from robench.data import Dataset
from robench.plugins import make_registry
from robench.run.trials import fit_and_score

def status():
    out = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssFile", "RssAnon"):
            out[key] = int(value.split()[0]) * 1024
    return out

n, path = int(sys.argv[1]), sys.argv[2]
X = np.load(path, mmap_mode="c")
ds = Dataset("big", X, np.arange(n) % 4, image_shape=(3, 32, 32), pixels=True)
spec = make_registry(load_entrypoints=False).get("models", "mlp")
small = np.arange(0, n, 50)  # warm up torch and the allocator on a few rows
fit_and_score(spec, ds, small[:40], small[40:60], small[60:], seed=0,
              train_budget={"max_epochs": 1})
before = status()
fit_and_score(spec, ds, np.arange(0, int(n * .7)), np.arange(int(n * .7), int(n * .8)),
              np.arange(int(n * .8), n), seed=0, train_budget={"max_epochs": 1})
after = status()
print(json.dumps({"before": before, "after": after}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_trial_on_mapped_data_grows_a_process_by_batches_not_by_the_data_set(tmp_path):
    """A trial over 20,000 CIFAR-sized rows (61 MB) raises the peak RSS by a few MB at most.

    Before: the uint8 copies of the splits (49 MB), the file's pages mapped by the
    prediction pass (61 MB) and the heap the evaluation passes fragmented.
    """
    import subprocess
    import sys

    n = 20_000
    np.save(tmp_path / "X.npy", np.random.default_rng(0).integers(0, 255, (n, 3072),
                                                                    dtype=np.uint8))
    out = subprocess.run([sys.executable, "-c", WORKER_RSS, str(n), str(tmp_path / "X.npy")],
                         capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    grew = res["after"]["VmHWM"] - res["before"]["VmHWM"]
    mapped = res["after"]["RssFile"] - res["before"]["RssFile"]
    assert mapped < 8 << 20, f"{mapped >> 20} MB of the file mapped into the process"
    assert grew < 24 << 20, f"peak RSS grew by {grew >> 20} MB over a 61 MB data set"


def test_feature_space_protocols_never_convert_the_whole_data_set(tmp_path, monkeypatch):
    """purity-ratio and coverage read the rows they use (dataset.rows), never dataset.X."""
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.plugins import set_registry

    def whole(self):
        raise AssertionError("a trial converted the whole data set to float32 (dataset.X)")

    monkeypatch.setattr(Dataset, "X", property(whole))
    monkeypatch.setenv("ROBENCH_MMAP_BYTES", "0")
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    npz = _npz_images(tmp_path / "x.npz")
    set_registry(None)
    try:
        res = CliRunner().invoke(cli, ["run", "-d", f"npz:{npz}", "-m", "mlp", "-c", "oracle",
                                       "-k", 2, "-r", 1, "--metric", "purity-ratio",
                                       "--metric", "coverage", "--set", "train.max_epochs=1",
                                       "--executor", "local", "--db", str(tmp_path / "r.db")])
    finally:
        set_registry(None)
    assert res.exit_code == 0, res.output
    conn = sqlite3.connect(tmp_path / "r.db")
    rows = conn.execute("SELECT protocol, status, error FROM trials").fetchall()
    conn.close()
    assert rows and all(r[1] == "ok" for r in rows), rows
