"""Tiny, fast components for tests: a small data set with true sources and numpy models."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.run.executors import Executor, LocalExecutor
from robench.specs import DatasetSpec, ExecutorSpec, ModelSpec

#: Rows every "spy" model was fitted or validated on (in-process executors only).
SEEN = {"fit": [], "val": [], "fit_calls": 0}


def make_tiny(n_per_source: int = 12, n_classes: int = 3, n_sources: int = 3, seed: int = 0,
              *, dim: int = 6, spread: float = 3.0, noise: float = 0.7, name: str = "tiny"):
    """Return a small tabular data set: class means plus a distinct offset per source."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, spread, (n_classes, dim))
    offsets = rng.normal(0, 1.5, (n_classes * n_sources, dim))
    groups = np.repeat(np.arange(n_classes * n_sources), n_per_source)
    y = groups // n_sources
    X = means[y] + offsets[groups] + rng.normal(0, noise, (groups.size, dim))
    return Dataset(name, X, y, sources=groups)


class Centroid:
    """Nearest class centroid: deterministic, instant."""

    has_features = False
    history_: list = []

    def __init__(self, ctx):
        self.ctx = ctx

    def fit(self, X, y, X_val, y_val):
        SEEN["fit_calls"] += 1
        self.means_ = np.stack([X[y == c].mean(0) for c in range(self.ctx.n_classes)])
        self.train_accuracy_ = float((self.predict(X) == y).mean())
        self.val_accuracy_ = float((self.predict(X_val) == y_val).mean()) if len(y_val) else None
        self.n_epochs_ = self.best_epoch_ = 1
        return self

    def predict(self, X):
        d = ((X[:, None, :] - self.means_[None]) ** 2).sum(-1)
        return d.argmin(1)


class Spy(Centroid):
    """Centroid that records every row it is given for fitting and validation."""

    def fit(self, X, y, X_val, y_val):
        SEEN["fit"].append(np.array(X))
        SEEN["val"].append(np.array(X_val))
        return super().fit(X, y, X_val, y_val)


class Shuffled(Centroid):
    """A random-label model: nearest centroid of labels shuffled by its seed (learns nothing
    of the data, so it is at chance on every partition and its rho is ~1)."""

    def fit(self, X, y, X_val, y_val):
        rng = np.random.default_rng(self.ctx.seed)
        y = rng.permutation(np.asarray(y))
        present = [c for c in range(self.ctx.n_classes) if (y == c).any()]
        self.means_ = np.stack([X[y == c].mean(0) if c in present else X.mean(0)
                                for c in range(self.ctx.n_classes)])
        self.train_accuracy_ = float((self.predict(X) == y).mean())
        self.val_accuracy_ = None
        self.n_epochs_ = self.best_epoch_ = 1
        return self


class Boom(Centroid):
    """A model whose training always raises."""

    def fit(self, X, y, X_val, y_val):
        raise RuntimeError("boom: this model always fails")


class InterruptAfter(Executor):
    """Run N trials, then behave as if the user pressed Ctrl-C."""

    name = "interrupt-after"
    N = 3

    def __init__(self, registry, jobs=1, **_):
        self.inner = LocalExecutor(registry)

    def run(self, specs):
        for i, row in enumerate(self.inner.run(specs)):
            if i == self.N:
                raise KeyboardInterrupt
            yield row


@hookimpl
def register_datasets(register):
    register(DatasetSpec("tiny", make_tiny, "108 rows, 3 classes x 3 true sources.",
                         has_sources=True))
    register(DatasetSpec("tiny-nosrc", lambda: Dataset("tiny-nosrc", make_tiny().X, make_tiny().y),
                         "The tiny data without source ids."))


@hookimpl
def register_models(register):
    register(ModelSpec("centroid", Centroid, "Nearest class centroid."))
    register(ModelSpec("spy", Spy, "Centroid that records what it was trained on."))
    register(ModelSpec("boom", Boom, "Always fails in fit."))
    register(ModelSpec("shuffled", Shuffled, "Learns from shuffled labels: at chance."))
    register(ModelSpec("die", lambda ctx: DieInWorker(ctx), "Kills its worker process."))


@hookimpl
def register_executors(register):
    register(ExecutorSpec("interrupt-after", InterruptAfter, "Raises Ctrl-C after 3 trials."))


class DieInWorker(Centroid):
    """Kills its own process when fitted outside the main process (a crashed worker)."""

    def fit(self, X, y, X_val, y_val):
        import multiprocessing
        import os
        import signal

        if multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().fit(X, y, X_val, y_val)
