"""torchvision:NAME read by torchvision's own classes from generated files; robench data fetch."""

import gzip
import shutil
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli
from tests import torchvision_files as tvf


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    from robench.builtin import torchvision_data
    from robench.plugins import set_registry

    monkeypatch.setattr(torchvision_data, "_OVERRIDE", [])
    monkeypatch.delenv("ROBENCH_DATA_DIR", raising=False)
    set_registry(None)
    yield
    set_registry(None)


def invoke(*args):
    from robench.plugins import set_registry

    set_registry(None)
    return CliRunner().invoke(cli, [str(a) for a in args])


def registry_at(root):
    from robench.builtin.torchvision_data import set_data_dir
    from robench.plugins import make_registry

    set_data_dir(root)
    return make_registry(load_entrypoints=False)


def test_torchvision_fashion_mnist_end_to_end_from_generated_files(tmp_path):
    tvf.write_mnist(tmp_path / "data", "fashion-mnist", n_train=12)
    db = tmp_path / "r.db"
    res = invoke("run", "-d", "torchvision:fashion-mnist", "--data-dir", tmp_path / "data",
                 "-m", "mlp", "-c", "kmeans", "-k", 2, "-r", 1, "--metric", "rho",
                 "--executor", "local", "--set", "train.max_epochs=1", "--db", db)
    assert res.exit_code == 0, res.output
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT dataset, status FROM trials").fetchall()
    conn.close()
    assert len(rows) == 3 and set(rows) == {("torchvision:fashion-mnist", "ok")}


def _expected(name, root):
    """Return what the generator wrote for the train split: (uint8 images NCHW, labels)."""
    if name in tvf.MNIST_FOLDERS:
        return tvf.class_images(6, 10, (28, 28), 0)[0][:, None], tvf.class_images(6, 10, (28, 28), 0)[1]
    if name == "cifar10":
        parts = [tvf.class_images(1, 10, (3, 32, 32), i) for i in range(5)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if name == "cifar100":
        return tvf.class_images(2, 100, (3, 32, 32), 0)
    return tvf.class_images(3, 10, (3, 32, 32), 0)


WRITERS = {"mnist": lambda r: tvf.write_mnist(r, "mnist"),
           "fashion-mnist": lambda r: tvf.write_mnist(r, "fashion-mnist"),
           "kmnist": lambda r: tvf.write_mnist(r, "kmnist"),
           "cifar10": tvf.write_cifar10, "cifar100": tvf.write_cifar100, "svhn": tvf.write_svhn}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_each_torchvision_data_set_reads_pixels_labels_and_classes_exactly(tmp_path, name):
    WRITERS[name](tmp_path)
    reg = registry_at(tmp_path)
    spec = reg.get("datasets", f"torchvision:{name}")
    images, labels = _expected(name, tmp_path)
    assert spec.is_image and spec.image_shape == images.shape[1:]
    ds = reg.load_dataset(spec.name)
    # CHW order, scaled by 255, labels as written (SVHN's 10 read back as the digit 0)
    np.testing.assert_array_equal(ds.X, images.reshape(len(images), -1).astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.y, labels)
    assert len(ds.class_names) == (100 if name == "cifar100" else 10)
    if name == "cifar10":
        assert ds.class_names[:2] == ["airplane", "automobile"]


def test_split_all_and_a_seeded_subsample(tmp_path):
    tvf.write_mnist(tmp_path, "mnist")
    reg = registry_at(tmp_path)
    assert reg.load_dataset(reg.get("datasets", "torchvision:mnist?split=all").name).n_samples == 80
    assert reg.load_dataset(reg.get("datasets", "torchvision:mnist?split=test").name).n_samples == 20
    sub = reg.load_dataset(reg.get("datasets", "torchvision:mnist?n=30").name)
    again = registry_at(tmp_path)
    assert sub.n_samples == 30
    assert again.load_dataset(again.get("datasets", "torchvision:mnist?n=30").name).fingerprint() \
        == sub.fingerprint()


def test_missing_torchvision_files_exit_2_naming_the_file_and_where(tmp_path):
    db = tmp_path / "r.db"
    res = invoke("run", "-d", "torchvision:cifar10", "--data-dir", tmp_path / "data", "-m",
                 "mlp", "--db", db)
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert len(line.splitlines()) == 1
    assert str(tmp_path / "data" / "cifar-10-batches-py" / "batches.meta") in line
    assert "robench data fetch cifar10" in line and "--data-dir" in line
    assert not db.exists() or sqlite3.connect(db).execute(
        "SELECT count(*) FROM trials").fetchone() == (0,)


def test_a_gzipped_idx_file_gets_a_gunzip_hint(tmp_path):
    raw = tvf.write_mnist(tmp_path, "kmnist")
    f = raw / "train-images-idx3-ubyte"
    with open(f, "rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    f.unlink()
    res = invoke("run", "-d", "torchvision:kmnist", "--data-dir", tmp_path, "-m", "mlp",
                 "--db", tmp_path / "r.db")
    assert res.exit_code == 2 and "gunzip -k" in res.output


def test_unknown_name_and_bad_options_exit_2(tmp_path):
    for ref, text in (("torchvision:imagenet", "robench reads mnist, fashion-mnist"),
                      ("torchvision:mnist?split=val", "split must be one of"),
                      ("torchvision:mnist?n=x", "n must be an integer")):
        res = invoke("run", "-d", ref, "--data-dir", tmp_path, "-m", "mlp",
                     "--db", tmp_path / "r.db")
        assert res.exit_code == 2 and text in res.output, res.output


def test_data_fetch_offline_is_a_clear_error(tmp_path, monkeypatch):
    import torchvision.datasets as tvd
    from urllib.error import URLError

    def offline(self):
        raise URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(tvd.MNIST, "download", offline)
    res = invoke("data", "fetch", "fashion-mnist", "--data-dir", tmp_path / "d")
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert len(line.splitlines()) == 1
    assert "could not download fashion-mnist" in line and "name resolution" in line
    assert str(tmp_path / "d" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte") in line


def test_data_fetch_keeps_files_already_there(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    tvf.write_cifar10(tmp_path)
    monkeypatch.setattr(tvd.CIFAR10, "download",
                        lambda self: pytest.fail("nothing should be downloaded"))
    res = invoke("data", "fetch", "cifar10", "--data-dir", tmp_path)
    assert res.exit_code == 0, res.output
    assert "7 file(s)" in res.output and "torchvision:cifar10" in res.output
