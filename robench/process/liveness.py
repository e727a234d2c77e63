"""Whether a recorded process still runs, and a worker's watch on the process that started it.

A run still ``running`` whose process is gone was killed (docs/guarantees.md).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from typing import Optional


def host_name() -> str:
    """Return this machine's host name, as stored in ``runs.host``."""
    return socket.gethostname()


def process_started(pid: int) -> Optional[str]:
    """Return when process ``pid`` started (ticks since boot), or None where /proc cannot say."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None  # field 22: starttime


def _stat(pid: int) -> list:
    """Return the fields of /proc/PID/stat after the command name ([] if unreadable)."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as fh:
            # the command name (field 2) is in parentheses and may contain spaces
            return fh.read().rpartition(")")[2].split()
    except OSError:
        return []


def process_running(pid: Optional[int], started: Optional[str] = None) -> bool:
    """Return whether process ``pid`` (started at ``started``, if known) runs; no pid: True."""
    if pid is None:
        return True
    try:
        os.kill(int(pid), 0)
    except PermissionError:
        pass  # exists, owned by someone else
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    if _stat(pid)[:1] == ["Z"]:  # a zombie
        return False
    now = process_started(pid) if started is not None else None  # another process, same id?
    return now is None or now == str(started)


def die_with_parent(parent: Optional[int] = None) -> bool:
    """Have the kernel SIGKILL this process when the process that started it dies (exit now if
    ``parent``, its expected id, is gone); return False where prctl is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:  # 1: PR_SET_PDEATHSIG
        if ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent is not None and os.getppid() != parent:
        os._exit(70)
    return True


#: Seconds between a worker's checks that its parent is still there.
PARENT_POLL = 0.5


def watch_parent(exit_code: int = 70, poll: float = PARENT_POLL) -> threading.Thread:
    """Exit this process at once (``os._exit``) when the process that started it dies (from
    a daemon thread; a trial in progress loses nothing: only the driver writes results)."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(poll)
            if os.getppid() != parent:
                os._exit(exit_code)

    thread = threading.Thread(target=watch, name="robench-parent-watch", daemon=True)
    thread.start()
    return thread
