"""Tiny components for the purity-ratio tests: small 8x8 images and numpy feature models."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.specs import DatasetSpec, ModelSpec


def make_tiny_images(n_per_class: int = 30, n_classes: int = 3, size: int = 8, seed: int = 0):
    """Return n_classes x n_per_class grey images: a bright blob at a class position + noise."""
    rng = np.random.default_rng(seed)
    g = np.linspace(-1, 1, size)
    yy, xx = np.meshgrid(g, g, indexing="ij")
    centers = [(-0.5, -0.5), (0.5, 0.5), (0.5, -0.5), (-0.5, 0.5)][:n_classes]
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = np.empty((y.size, size * size), dtype=np.float32)
    for i, c in enumerate(y):
        cx, cy = np.asarray(centers[c]) + rng.normal(0, 0.12, 2)
        img = 0.1 + 0.8 * np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / 0.15))
        X[i] = np.clip(img + rng.normal(0, 0.05, img.shape), 0, 1).ravel()
    return Dataset("tiny-images", X, y, image_shape=(1, size, size))


class Centroid:
    """Nearest class centroid whose 'features' are its inputs (a well-separated space)."""

    has_features = True

    def __init__(self, ctx):
        self.ctx = ctx

    def fit(self, X, y, X_val, y_val):
        self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
        self.train_accuracy_ = float((self.predict(X) == y).mean())
        self.val_accuracy_ = float((self.predict(X_val) == y_val).mean())
        self.history_, self.n_epochs_, self.best_epoch_ = [], 1, 1
        return self

    def predict(self, X):
        return ((X[:, None, :] - self.means_[None]) ** 2).sum(-1).argmin(1)

    def features(self, X):
        return np.asarray(X, dtype=np.float32)


class Collapsed(Centroid):
    """The same classifier with a collapsed feature space: every input maps to one point."""

    def features(self, X):
        return np.zeros((len(X), 4), dtype=np.float32)


class NoFeatures(Centroid):
    """A classifier without a feature space (like the RBF SVM)."""

    has_features = False


@hookimpl
def register_datasets(register):
    register(DatasetSpec("tiny-images", make_tiny_images, "90 8x8 grey blobs, 3 classes.",
                         is_image=True))


@hookimpl
def register_models(register):
    register(ModelSpec("feat-centroid", Centroid, "Centroid; features = inputs."))
    register(ModelSpec("feat-collapsed", Collapsed, "Centroid; constant features."))
    register(ModelSpec("feat-none", NoFeatures, "Centroid without a feature space."))
