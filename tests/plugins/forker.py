"""A model that forks a child process in ``fit`` (a stranger's plugin that leaves processes
behind): with ROBENCH_TEST_FORK set to a file, each fit forks a child that sleeps for five
minutes and writes the child's pid to that file; with ROBENCH_TEST_FORK_HANG also set, the
fit then blocks SIGALRM and sleeps past any time limit."""

from __future__ import annotations

import os
import signal
import time

from robench import hookimpl
from robench.specs import ModelSpec
from tests.plugins.tiny import Centroid


class Forker(Centroid):
    def fit(self, X, y, X_val, y_val):
        marks = os.environ.get("ROBENCH_TEST_FORK")
        if marks:
            pid = os.fork()
            if pid == 0:  # the child outlives its trial, holding what its parent held
                time.sleep(300)
                os._exit(0)
            with open(marks, "a", encoding="utf-8") as f:
                f.write(f"{pid}\n")
            if os.environ.get("ROBENCH_TEST_FORK_HANG"):
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
                time.sleep(300)
        return super().fit(X, y, X_val, y_val)


@hookimpl
def register_models(register):
    register(ModelSpec("forker", Forker, "Centroid that forks a long-lived child in fit."))
