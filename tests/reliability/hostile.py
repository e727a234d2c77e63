"""Components that misbehave the ways a third-party plugin can: the reliability suite's cast.

Each is registered by this module's hooks; ``tests.reliability.cli`` loads it into a real
``robench`` process. The tiny data set and the centroid model come from tests/plugins/tiny.py.
"""

from __future__ import annotations

import os
import time

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.specs import DatasetSpec, ModelSpec
from tests.plugins.tiny import Centroid, make_tiny


class Slow(Centroid):
    """Centroid that takes ROBENCH_TEST_SLEEP seconds (default 1) to fit."""

    def fit(self, X, y, X_val, y_val):
        time.sleep(float(os.environ.get("ROBENCH_TEST_SLEEP", "1")))
        return super().fit(X, y, X_val, y_val)


class Hang(Centroid):
    """Never finishes fitting."""

    def fit(self, X, y, X_val, y_val):
        while True:
            time.sleep(0.05)


class Spin(Centroid):
    """Never finishes fitting, busy in pure Python."""

    def fit(self, X, y, X_val, y_val):
        n = 0
        while True:
            n += 1


class HoldsGil(Centroid):
    """Never finishes fitting, inside one C call that holds the GIL (no Python thread runs).

    Writes ``fit-<pid>`` into $ROBENCH_TEST_MARKS first, so a test knows the call began.
    """

    def fit(self, X, y, X_val, y_val):
        marks = os.environ.get("ROBENCH_TEST_MARKS")
        if marks:
            with open(os.path.join(marks, f"fit-{os.getpid()}"), "w") as fh:
                fh.write("started")
        sum(range(10**15))  # hours in one C loop: the GIL is never released
        return super().fit(X, y, X_val, y_val)


class Defiant(Centroid):
    """Ignores SIGALRM and swallows every exception while it takes ROBENCH_TEST_SLEEP seconds
    (default 3): a trial that defeats the time limit of the process it runs in."""

    def fit(self, X, y, X_val, y_val):
        import signal

        try:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        except ValueError:  # not the main thread (a Dask worker's)
            pass
        end = time.monotonic() + float(os.environ.get("ROBENCH_TEST_SLEEP", "3"))
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except BaseException:  # noqa: BLE001 - that is the point
                pass
        return super().fit(X, y, X_val, y_val)


class Exits(Centroid):
    """Calls sys.exit in fit."""

    def fit(self, X, y, X_val, y_val):
        raise SystemExit(3)


class Interrupts(Centroid):
    """Raises KeyboardInterrupt in fit (no user pressed anything)."""

    def fit(self, X, y, X_val, y_val):
        raise KeyboardInterrupt


class Predicts:
    """Centroid whose ``predict``, once fitted, returns what ``bad`` makes of the right answer."""

    def __init__(self, bad):
        self.bad = bad

    def __call__(self, ctx):
        bad = self.bad

        class Bad(Centroid):
            def fit(self, X, y, X_val, y_val):
                super().fit(X, y, X_val, y_val)
                self.fitted_ = True
                return self

            def predict(self, X):
                good = super().predict(X)
                return bad(good) if getattr(self, "fitted_", False) else good

        return Bad(ctx)


def _nan(pred):
    return np.full(pred.shape, np.nan)


def _short(pred):
    return pred[:-1]


def _out_of_range(pred):
    return pred + 100


def _strings(pred):
    return np.array([str(p) for p in pred])


def _tiny_with(name, **change):
    ds = make_tiny()

    def load():
        X, y = change.get("X", ds.X), change.get("y", ds.y)
        return Dataset(name, X, y)

    return load


def _nan_X():
    X = make_tiny().X.copy()
    X[3, 2] = np.nan
    return X


def _raises():
    raise OSError("the download server is unreachable")


@hookimpl
def register_datasets(register):
    register(DatasetSpec("nan-data", _tiny_with("nan-data", X=_nan_X()), "X has a NaN."))
    register(DatasetSpec("one-class", _tiny_with("one-class", y=np.zeros(108, dtype=int)),
                         "Every label 0."))
    register(DatasetSpec("mismatched", _tiny_with("mismatched", y=make_tiny().y[:-5]),
                         "Fewer labels than rows."))
    register(DatasetSpec("wrong-type", lambda: {"X": make_tiny().X}, "load() returns a dict."))
    register(DatasetSpec("unreachable", _raises, "load() raises OSError."))


@hookimpl
def register_models(register):
    register(ModelSpec("slow", Slow, "Centroid that sleeps before fitting."))
    register(ModelSpec("hang", Hang, "Never finishes fitting (sleeps)."))
    register(ModelSpec("spin", Spin, "Never finishes fitting (busy loop)."))
    register(ModelSpec("exits", Exits, "Raises SystemExit in fit."))
    register(ModelSpec("holds-gil", HoldsGil, "Never finishes fitting, holding the GIL."))
    register(ModelSpec("defiant", Defiant, "Ignores SIGALRM and swallows exceptions."))
    register(ModelSpec("interrupts", Interrupts, "Raises KeyboardInterrupt in fit."))
    register(ModelSpec("nan-pred", Predicts(_nan), "Predicts NaN."))
    register(ModelSpec("short-pred", Predicts(_short), "Predicts one label too few."))
    register(ModelSpec("range-pred", Predicts(_out_of_range), "Predicts labels >= 100."))
    register(ModelSpec("str-pred", Predicts(_strings), "Predicts strings."))
