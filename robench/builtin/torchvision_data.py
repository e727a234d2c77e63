"""``torchvision:NAME``: MNIST, Fashion-MNIST, KMNIST, CIFAR-10/100 and SVHN from a data folder.

Read by torchvision's classes (``download=False``) in torchvision's layout; ``robench data
fetch NAME`` downloads; MD5 checks are skipped (the content fingerprint identifies the
data). docs/data-and-models.md has the layout.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from robench import hookimpl
from robench.data import Dataset, DatasetError
from robench.data.references import FileDataset, file_dataset_spec, reference_name
from robench.specs import ResolverSpec
from robench.builtin.references import image_rows

_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

#: name -> (torchvision class, folder under the data dir, files by split, description)
DATASETS = {
    "mnist": ("MNIST", "MNIST/raw", {"all": _MNIST_FILES}, "70,000 28x28 grey digits, 10 classes"),
    "fashion-mnist": ("FashionMNIST", "FashionMNIST/raw", {"all": _MNIST_FILES},
                      "70,000 28x28 grey clothing images, 10 classes"),
    "kmnist": ("KMNIST", "KMNIST/raw", {"all": _MNIST_FILES},
               "70,000 28x28 grey Kuzushiji characters, 10 classes"),
    "cifar10": ("CIFAR10", "cifar-10-batches-py",
                {"train": tuple(f"data_batch_{i}" for i in range(1, 6)),
                 "test": ("test_batch",), "all": ("batches.meta",)},
                "60,000 32x32 colour images, 10 classes"),
    "cifar100": ("CIFAR100", "cifar-100-python",
                 {"train": ("train",), "test": ("test",), "all": ("meta",)},
                 "60,000 32x32 colour images, 100 classes"),
    "svhn": ("SVHN", "SVHN", {"train": ("train_32x32.mat",), "test": ("test_32x32.mat",)},
             "99,289 32x32 colour house-number digits, 10 classes"),
}

SPLITS = ("train", "test", "all")

_OVERRIDE: list = []  # set by the CLI's --data-dir; beats the environment


def data_dir() -> Path:
    """Return the data folder: --data-dir, else $ROBENCH_DATA_DIR, else ~/.local/share/robench."""
    if _OVERRIDE:
        return Path(_OVERRIDE[-1]).expanduser()
    if os.environ.get("ROBENCH_DATA_DIR"):
        return Path(os.environ["ROBENCH_DATA_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base).expanduser() / "robench"


def set_data_dir(path) -> None:
    """Use ``path`` as the data folder for this process and the workers it starts."""
    _OVERRIDE[:] = [str(path)] if path else []
    if path:
        os.environ["ROBENCH_DATA_DIR"] = str(Path(path).expanduser().resolve())


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise DatasetError(f"unknown torchvision data set '{name}'; robench reads "
                           f"{', '.join(DATASETS)}")


def _root(name: str, root: Path) -> Path:
    """Return the folder the torchvision class is given as ``root``."""
    if name == "svhn":
        # torchvision's SVHN reads ROOT/train_32x32.mat; robench keeps them in ROOT/SVHN
        # but also reads them where torchvision(root=DATA_DIR) put them
        inside = root / "SVHN"
        return inside if inside.is_dir() or not (root / "train_32x32.mat").exists() else root
    return root


def required_files(name: str, split: str, root: Path) -> list:
    """Return the paths torchvision reads for ``name`` and ``split`` under ``root``."""
    _, folder, files, _ = DATASETS[name]
    base = _root(name, root) if name == "svhn" else root / folder
    wanted = list(files.get("all", ()))
    for s in (("train", "test") if split == "all" else (split,)):
        wanted += [f for f in files.get(s, ()) if f not in wanted]
    return [base / f for f in wanted]


def missing_message(name: str, missing: list, root: Path) -> str:
    """Return the one-line error for missing files: which, where, and how to get them."""
    first = missing[0]
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    hint = ""
    gz = first.with_name(first.name + ".gz")
    if gz.exists():
        hint = f" ({gz.name} is there: torchvision reads it extracted, run gunzip -k {gz})"
    return (f"torchvision:{name}: missing {first}{more}{hint}; put torchvision's files for "
            f"{DATASETS[name][0]} under {root} (data dir from --data-dir or ROBENCH_DATA_DIR) "
            f"or run `robench data fetch {name}` where a network exists")


def _present(name: str, split: str, root: Path) -> list:
    files = required_files(name, split, root)
    missing = [p for p in files if not p.is_file()]
    if missing:
        raise DatasetError(missing_message(name, missing, root))
    return files


def torchvision_class(name: str):
    """Return torchvision's class for ``name``; for CIFAR and SVHN without the MD5 checks."""
    import torchvision.datasets as tvd

    base = getattr(tvd, DATASETS[name][0])
    if name in ("cifar10", "cifar100"):
        attrs = {"train_list": [[f, None] for f, _ in base.train_list],
                 "test_list": [[f, None] for f, _ in base.test_list],
                 "meta": {**base.meta, "md5": None}}
    elif name == "svhn":
        attrs = {"split_list": {k: [v[0], v[1], None] for k, v in base.split_list.items()}}
    else:
        return base
    return type(base.__name__, (base,), attrs)


def _split(cls, name: str, root: Path, split: str):
    """Return (uint8 images (n, C, H, W), labels, class names) of one split."""
    kwargs = {"split": split} if name == "svhn" else {"train": split == "train"}
    try:
        ds = cls(str(_root(name, root)), download=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - torchvision's reader failed on these files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise DatasetError(f"torchvision:{name}: torchvision.datasets.{cls.__name__} could not "
                           f"read the files under {root}: {type(exc).__name__}: {first}") from None
    if name == "svhn":
        images, labels = np.asarray(ds.data), np.asarray(ds.labels)
        classes = [str(c) for c in range(10)]
    elif name in ("cifar10", "cifar100"):
        images = np.asarray(ds.data).transpose(0, 3, 1, 2)  # torchvision holds HWC
        labels, classes = np.asarray(ds.targets), list(ds.classes)
    else:
        images = ds.data.numpy()[:, None]
        labels, classes = ds.targets.numpy(), list(ds.classes)
    return images, labels.astype(np.int64), classes


def load(name: str, split: str, n, root: Path, ref: str) -> Dataset:
    """Read ``name`` (its files checked by the caller) with torchvision's class as a Dataset."""
    cls = torchvision_class(name)
    parts = [_split(cls, name, root, s) for s in (("train", "test") if split == "all"
                                                    else (split,))]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    classes = parts[0][2]
    if n is not None and n < len(labels):
        # a seeded subsample, sorted so the data keeps torchvision's order
        keep = np.sort(np.random.default_rng(0).choice(len(labels), n, replace=False))
        images, labels = images[keep], labels[keep]
    if images.dtype != np.uint8:
        raise DatasetError(f"{ref}: torchvision returned {images.dtype} images, expected uint8")
    present = np.unique(labels)
    if present.size != len(classes):
        raise DatasetError(f"{ref}: {present.size} of its {len(classes)} classes have samples; "
                           "every class needs at least one (a larger n?)")
    rows, shape, pixels = image_rows(images, ref)
    return Dataset(ref, rows, labels, image_shape=shape, class_names=[str(c) for c in classes],
                   pixels=pixels)


def resolve(target: str, options: dict):
    """Resolve ``torchvision:NAME[?split=train|test|all][&n=N]``."""
    name = target.lower()
    _check_name(name)
    split = options.get("split", "train")
    if split not in SPLITS:
        raise DatasetError(f"torchvision:{name}: split must be one of {', '.join(SPLITS)}, "
                           f"got '{split}'")
    n = None
    if "n" in options:
        try:
            n = int(options["n"])
        except ValueError:
            n = 0
        if n < 2:
            raise DatasetError(f"torchvision:{name}: n must be an integer >= 2, got "
                               f"'{options['n']}'")
    ref = reference_name("torchvision", name, options)
    root = data_dir()
    data = FileDataset(ref, lambda: _present(name, split, root),
                       lambda: load(name, split, n, root, ref))
    return file_dataset_spec(data, DATASETS[name][3] + f" ({split} split, via torchvision)")


def fetch(name: str, root: Path) -> list:
    """Download ``name`` into ``root`` (both splits; nothing twice); return its files.

    A failed download raises DatasetError saying which files to put where instead.
    """
    _check_name(name)
    root.mkdir(parents=True, exist_ok=True)
    if name == "svhn":
        (root / "SVHN").mkdir(exist_ok=True)
    files = required_files(name, "all", root)
    if all(p.is_file() for p in files):
        return files
    import torchvision.datasets as tvd

    cls = getattr(tvd, DATASETS[name][0])
    try:
        if name == "svhn":
            for split in ("train", "test"):
                cls(str(root / "SVHN"), split=split, download=True)
        else:
            cls(str(root), train=True, download=True)
    except Exception as exc:  # noqa: BLE001 - network and server errors alike
        text = " ".join(str(exc).split())[:200]
        missing = [str(p) for p in files if not p.is_file()]
        raise DatasetError(
            f"could not download {name} into {root} ({type(exc).__name__}: {text}); "
            f"offline, copy torchvision's files there by hand: {', '.join(missing)}"
        ) from None
    return files


@hookimpl
def register_dataset_resolvers(register):
    """Register torchvision:."""
    register(ResolverSpec(
        "torchvision", resolve,
        f"torchvision's {', '.join(DATASETS)} read from --data-dir / ROBENCH_DATA_DIR by "
        "torchvision's own classes (no download at run time: `robench data fetch NAME`)",
        syntax="torchvision:NAME[?split=train|test|all][&n=N]", options=("split", "n"),
        takes_path=False,
    ))
