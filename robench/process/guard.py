"""Containing what a trial does: a time limit, and a plugin's SystemExit or KeyboardInterrupt.

docs/guarantees.md says how :func:`time_limit` ends a trial, what it reaches and what the local
executor cannot do; :func:`user_interrupted` tells a real Ctrl-C from a plugin's.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Optional


class TrialTimeout(BaseException):
    """A trial ran past its time limit (a BaseException: ``except Exception`` cannot swallow it)."""


_SIGINT = {"installed": False, "received": False}


def _on_sigint(signum, frame):
    _SIGINT["received"] = True
    raise KeyboardInterrupt


def watch_sigint() -> bool:
    """Record real Ctrl-Cs in this process from now on; return False off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, _on_sigint)
    _SIGINT.update(installed=True, received=False)
    return True


def unwatch_sigint(previous) -> None:
    """Put back the SIGINT handler ``previous`` that :func:`watch_sigint` replaced."""
    signal.signal(signal.SIGINT, previous)
    _SIGINT.update(installed=False, received=False)


def sigint_watched() -> bool:
    """Return whether :func:`watch_sigint` is recording Ctrl-Cs in this process now."""
    return _SIGINT["installed"]


def user_interrupted() -> bool:
    """Return whether a KeyboardInterrupt here may be the user's (a real SIGINT, or unknown)."""
    return _SIGINT["received"] or not _SIGINT["installed"]


def can_limit_time() -> bool:
    """Return whether :func:`time_limit` can interrupt code here (main thread, SIGALRM)."""
    return (hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
            and threading.current_thread() is threading.main_thread())


#: In a worker process: seconds past the time limit after which a trial still running (stuck
#: inside one C call, holding the GIL, or ignoring the limit) ends its whole worker; None in
#: the driver, where that would end the run.
HARD_LIMIT_GRACE: list = [None]


class _KernelTimer:
    """A POSIX timer that sends this process SIGKILL (Linux, through ctypes): unlike a Python
    thread or a signal handler it needs neither the GIL nor the trial's cooperation."""

    _instance = None

    class _Itimerspec(ctypes.Structure):
        _fields_ = [("it_interval", ctypes.c_long * 2), ("it_value", ctypes.c_long * 2)]

    class _Sigevent(ctypes.Structure):  # struct sigevent: 64 bytes on Linux
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int),
                    ("notify", ctypes.c_int), ("pad", ctypes.c_byte * 48)]

    def __init__(self):
        if not sys.platform.startswith("linux"):
            raise OSError("kernel timers are used on Linux only")
        self.libc = ctypes.CDLL(None, use_errno=True)
        event = self._Sigevent(signo=int(signal.SIGKILL), notify=0)  # SIGEV_SIGNAL
        self.timer = ctypes.c_void_p()
        if self.libc.timer_create(1, ctypes.byref(event), ctypes.byref(self.timer)) != 0:
            raise OSError(ctypes.get_errno(), "timer_create failed")  # 1: CLOCK_MONOTONIC

    @classmethod
    def get(cls) -> Optional["_KernelTimer"]:
        if cls._instance is None:
            try:
                cls._instance = cls()
            except (OSError, AttributeError):
                cls._instance = False
        return cls._instance or None

    def arm(self, seconds: float) -> None:
        whole = int(seconds)
        spec = self._Itimerspec((0, 0), (whole, int((seconds - whole) * 1e9)))
        self.libc.timer_settime(self.timer, 0, ctypes.byref(spec), None)


def _raise_in_thread(ident: int, exc_type) -> None:
    """Raise ``exc_type`` in thread ``ident`` when it next runs Python code (None: clear)."""
    exc = ctypes.py_object(exc_type) if exc_type is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), exc)


@contextmanager
def time_limit(seconds: Optional[float], what: str = "trial", option: str = "--trial-timeout"):
    """Raise :class:`TrialTimeout` in this block once it has run ``seconds`` (None: no limit);
    nested limits keep the outer one's deadline."""
    if not seconds:
        yield
        return
    message = f"{what} ran past the time limit of {seconds:g} s ({option}); stopped"
    hard = kernel = None
    if HARD_LIMIT_GRACE[0] is not None:
        if (kernel := _KernelTimer.get()) is not None:
            kernel.arm(float(seconds) + HARD_LIMIT_GRACE[0])
        else:
            hard = threading.Timer(float(seconds) + HARD_LIMIT_GRACE[0], os._exit, args=(71,))
            hard.daemon = True
            hard.start()
    limit = (_alarm if can_limit_time() else _async_limit if hasattr(ctypes, "pythonapi")
             else None)  # None: not CPython
    try:
        with limit(float(seconds), message) if limit is not None else nullcontext():
            yield
    finally:
        if kernel is not None:
            kernel.arm(0.0)  # disarmed
        if hard is not None:
            hard.cancel()


@contextmanager
def _alarm(seconds: float, message: str):
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer and outer <= seconds:  # an enclosing limit ends first: leave it in charge
        yield
        return

    def expire(signum, frame):
        raise TrialTimeout(message)

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # the enclosing limit's remaining time
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


@contextmanager
def _async_limit(seconds: float, message: str):
    ident = threading.get_ident()
    expired = type("TrialTimeout", (TrialTimeout,), {"__init__": lambda self, *a:
                                                      TrialTimeout.__init__(self, message)})
    state = {"inside": True}
    lock = threading.Lock()

    def expire():
        with lock:
            if state["inside"]:
                _raise_in_thread(ident, expired)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["inside"] = False
            timer.cancel()
            _raise_in_thread(ident, None)  # drop one set but not yet raised
