"""Compact data (issue 21, item 5): uint8 pixels converted per batch, memory maps from the cache.

The float32 path and the compact path must give the very same numbers: a pixel's float value is
value / 255 rounded once in float32 on both.
"""

import json
import sqlite3

import numpy as np
import pytest

from robench.data import Dataset, DatasetError, pixels_to_float
from robench.trials import fit_and_score


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

    from robench.train import _as_float

    np.testing.assert_array_equal(_as_float(torch.from_numpy(v)).numpy(), as_before)


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
    from robench.train import TorchClassifier

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
