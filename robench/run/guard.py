"""Containing what a trial does: a time limit, and a plugin's SystemExit or KeyboardInterrupt.

A trial runs third-party code. Whatever it raises, however long it takes, the run goes on:
:func:`time_limit` ends a trial past ``--trial-timeout`` with :class:`TrialTimeout`, and
:func:`user_interrupted` tells a real Ctrl-C (SIGINT delivered to this process) from a
``KeyboardInterrupt`` a plugin raised itself.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Optional


class TrialTimeout(BaseException):
    """A trial ran past its time limit.

    A BaseException so that a plugin's ``except Exception`` cannot swallow it.
    """


_SIGINT = {"installed": False, "received": False}


def _on_sigint(signum, frame):
    _SIGINT["received"] = True
    raise KeyboardInterrupt


def watch_sigint() -> bool:
    """Record real Ctrl-Cs in this process from now on; return False off the main thread.

    A SIGINT still raises KeyboardInterrupt as usual; :func:`user_interrupted` then says it
    was one.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, _on_sigint)
    _SIGINT.update(installed=True, received=False)
    return True


def unwatch_sigint(previous) -> None:
    """Put back the SIGINT handler ``previous`` that :func:`watch_sigint` replaced."""
    signal.signal(signal.SIGINT, previous)
    _SIGINT.update(installed=False, received=False)


def user_interrupted() -> bool:
    """Return whether a KeyboardInterrupt here may be the user's (a real SIGINT, or unknown)."""
    return _SIGINT["received"] or not _SIGINT["installed"]


def can_limit_time() -> bool:
    """Return whether :func:`time_limit` can interrupt code here (main thread, SIGALRM)."""
    return (hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
            and threading.current_thread() is threading.main_thread())


#: In a worker process: seconds past the time limit after which a trial stuck where SIGALRM
#: cannot reach it (inside one C call) ends its whole worker; None in the driver, where that
#: would end the run.
HARD_LIMIT_GRACE: list = [None]


@contextmanager
def time_limit(seconds: Optional[float], what: str = "trial"):
    """Raise :class:`TrialTimeout` in this block once it has run ``seconds`` (None: no limit).

    Uses SIGALRM, so it works on the main thread of a Unix process and interrupts Python code
    and anything that returns to Python (torch operations, sleeps); elsewhere it does nothing.
    In a worker process (:data:`HARD_LIMIT_GRACE` set) a trial still running that long after
    the limit ends its worker, which the process executor records as a failed trial.
    """
    if not seconds or not can_limit_time():
        yield
        return
    hard = None
    if HARD_LIMIT_GRACE[0] is not None:
        import os

        hard = threading.Timer(float(seconds) + HARD_LIMIT_GRACE[0], os._exit, args=(71,))
        hard.daemon = True
        hard.start()

    def expire(signum, frame):
        raise TrialTimeout(f"{what} ran past the time limit of {seconds:g} s "
                           "(--trial-timeout); stopped")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if hard is not None:
            hard.cancel()
