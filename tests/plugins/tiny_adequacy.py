"""Tiny components for the adequacy and lost-test tests: a toy data set and an instant model."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.specs import DatasetSpec, ModelSpec
from tests.plugins.tiny import make_tiny

#: Training accuracy the toy model's "training log" under-reports by (a stale running mean).
LOG_LAG = 0.05


def make_toy(n_per_source: int = 40, n_classes: int = 4, n_sources: int = 3, seed: int = 1):
    """Return 480 rows: 4 classes x 3 true sources, each source a shifted Gaussian blob."""
    return make_tiny(n_per_source, n_classes, n_sources, seed, dim=8, spread=2.5, noise=1.2,
                     name="adequacy-toy")


class ToyCentroid:
    """Nearest class centroid with a one-epoch 'training log' (deterministic, instant)."""

    has_features = False

    def __init__(self, ctx):
        self.ctx = ctx

    def fit(self, X, y, X_val, y_val):
        means = np.zeros((self.ctx.n_classes, X.shape[1]))
        for c in range(self.ctx.n_classes):
            if (y == c).any():
                means[c] = X[y == c].mean(0)
            else:  # a class absent from a small subset is never predicted
                means[c] = np.inf
        self.means_ = means
        self.train_accuracy_ = float((self.predict(X) == y).mean())
        self.val_accuracy_ = float((self.predict(X_val) == y_val).mean()) if len(y_val) else None
        self.n_epochs_ = self.best_epoch_ = 1
        self.history_ = [{"epoch": 1, "train_accuracy": self.train_accuracy_ - LOG_LAG,
                          "val_accuracy": self.val_accuracy_}]
        return self

    def predict(self, X):
        d = ((X[:, None, :] - self.means_[None]) ** 2).sum(-1)
        return d.argmin(1)


@hookimpl
def register_datasets(register):
    register(DatasetSpec("adequacy-toy", make_toy, "480 rows, 4 classes x 3 true sources.",
                         has_sources=True))


@hookimpl
def register_models(register):
    register(ModelSpec("toy-centroid", ToyCentroid, "Nearest class centroid with a fake log."))
