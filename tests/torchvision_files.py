"""Write tiny data sets in the exact on-disk formats torchvision's classes read (no download).

* MNIST family: ``ROOT/<Class>/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``, idx files
  (big-endian int32 magic 0x0803 / 0x0801 and sizes, then uint8 values).
* CIFAR-10: ``ROOT/cifar-10-batches-py/data_batch_1..5, test_batch`` (pickled dicts with
  ``data`` (n, 3072) uint8 in CHW order and ``labels``) and ``batches.meta`` (``label_names``).
* CIFAR-100: ``ROOT/cifar-100-python/train, test`` (``fine_labels``) and ``meta``.
* SVHN: ``ROOT/SVHN/{train,test}_32x32.mat`` with ``X`` (32, 32, 3, n) uint8 and ``y`` (n, 1)
  labels 1..10 (10 is the digit 0), written by scipy.io.savemat.
"""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np

MNIST_FOLDERS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST", "kmnist": "KMNIST"}


def class_images(n_per_class: int, n_classes: int, shape: tuple, seed: int) -> tuple:
    """Return uint8 images (n, *shape) whose class shows as a bright band, and labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    rng.shuffle(y)
    X = rng.integers(0, 60, (y.size, *shape), dtype=np.uint8)
    rows = shape[-2]
    for i, c in enumerate(y):
        r = (c * 3) % (rows - 2)
        X[i, ..., r:r + 2, :] = 250
    return X, y


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an idx file (what torchvision's read_sn3_pascalvincent reads)."""
    magic = 0x0800 + array.ndim
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist(root: Path, name: str = "fashion-mnist", n_train: int = 6, n_test: int = 2,
                seed: int = 0) -> Path:
    """Write the four idx files of an MNIST-family data set; n_* are per class."""
    raw = Path(root) / MNIST_FOLDERS[name] / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        X, y = class_images(n, 10, (28, 28), seed + (split == "t10k"))
        write_idx(raw / f"{split}-images-idx3-ubyte", X)
        write_idx(raw / f"{split}-labels-idx1-ubyte", y.astype(np.uint8))
    return raw


def write_cifar10(root: Path, n_per_batch_class: int = 1, seed: int = 0) -> Path:
    """Write cifar-10-batches-py with five training batches, a test batch and the meta file."""
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, fname in enumerate(names):
        X, y = class_images(n_per_batch_class, 10, (3, 32, 32), seed + i)
        with open(folder / fname, "wb") as f:
            pickle.dump({"batch_label": fname, "labels": y.tolist(),
                         "data": X.reshape(len(y), -1), "filenames": [f"{j}.png" for j in y]}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                     "frog", "horse", "ship", "truck"],
                     "num_cases_per_batch": 10, "num_vis": 3072}, f)
    return folder


def write_cifar100(root: Path, n_per_class: int = 2, seed: int = 0) -> Path:
    """Write cifar-100-python with train, test and meta."""
    folder = Path(root) / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    for i, fname in enumerate(("train", "test")):
        X, y = class_images(n_per_class, 100, (3, 32, 32), seed + i)
        with open(folder / fname, "wb") as f:
            pickle.dump({"fine_labels": y.tolist(), "coarse_labels": (y // 5).tolist(),
                         "data": X.reshape(len(y), -1)}, f)
    with open(folder / "meta", "wb") as f:
        pickle.dump({"fine_label_names": [f"class{c}" for c in range(100)],
                     "coarse_label_names": [f"super{c}" for c in range(20)]}, f)
    return folder


def write_svhn(root: Path, n_per_class: int = 3, seed: int = 0) -> Path:
    """Write SVHN/{train,test}_32x32.mat as the Stanford files are laid out."""
    from scipy.io import savemat

    folder = Path(root) / "SVHN"
    folder.mkdir(parents=True, exist_ok=True)
    for i, split in enumerate(("train", "test")):
        X, y = class_images(n_per_class, 10, (3, 32, 32), seed + i)
        labels = np.where(y == 0, 10, y).astype(np.uint8)[:, None]
        savemat(folder / f"{split}_32x32.mat", {"X": X.transpose(2, 3, 1, 0), "y": labels})
    return folder
