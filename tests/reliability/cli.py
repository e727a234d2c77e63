"""Run ``robench`` as a user would: a separate process on this worktree's code."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def robench_env(tmp_path, **extra) -> dict:
    """Return an environment that runs this checkout's robench with a private cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["ROBENCH_CACHE_DIR"] = str(Path(tmp_path) / "cache")
    env.pop("ROBENCH_DB", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


#: Plugin modules a test process can load beside the built-ins (``plugins=``).
HOSTILE = ("tests.plugins.tiny", "tests.reliability.hostile")

_WITH_PLUGINS = """
import sys
from robench.plugins import make_registry, set_registry
set_registry(make_registry(modules={modules!r}, load_entrypoints=False))
from robench.cli import cli
cli(sys.argv[1:], prog_name="robench")
"""


def command(args, plugins=()) -> list:
    """Return the argv of ``robench ARGS``, with extra plugin modules loaded if given."""
    if plugins:
        return [sys.executable, "-c", _WITH_PLUGINS.format(modules=list(plugins)), *args]
    return [sys.executable, "-m", "robench", *args]


def start(args, tmp_path, plugins=(), env=None, **popen) -> subprocess.Popen:
    """Start ``robench ARGS`` in ``tmp_path`` and return the process (stdout/stderr piped)."""
    return subprocess.Popen(command(args, plugins), cwd=tmp_path,
                            env=robench_env(tmp_path, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def run(args, tmp_path, plugins=(), timeout=300, input=None, env=None):
    """Run ``robench ARGS`` in ``tmp_path`` to completion; return the CompletedProcess."""
    return subprocess.run(command(args, plugins), cwd=tmp_path,
                          env=robench_env(tmp_path, **(env or {})), capture_output=True,
                          text=True, timeout=timeout, input=input)


def children(pid) -> list:
    """Return the ids of the live processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(pid) and fields[0] != "Z":
            out.append(int(entry))
    return out


def alive(pids) -> list:
    """Return those of ``pids`` that still run (zombies count as gone)."""
    from robench.process.liveness import process_running

    return [p for p in pids if process_running(p)]


def rows(db, sql, params=()) -> list:
    """Return the rows of a read-only query on ``db``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def trials_stored(db) -> int:
    """Return how many trials ``db`` holds; 0 before the file or its tables exist (a polling
    reader can open the file between its creation and the schema's)."""
    try:
        return rows(db, "SELECT COUNT(*) FROM trials")[0][0] if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


def integrity(db) -> str:
    """Return SQLite's integrity check of ``db`` ('ok' when sound)."""
    return rows(db, "PRAGMA integrity_check")[0][0]


def wait_for(predicate, timeout, what):
    """Return once ``predicate()`` is true; AssertionError naming ``what`` after ``timeout`` s."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill_driver(driver, pids, seconds):
    """SIGKILL ``driver``; return whether all of ``pids`` ended within ``seconds`` after it.

    Any of them still alive then is killed too: a failing test leaves no orphans behind.
    """
    import signal
    import time

    if driver.poll() is None:
        driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    end = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < end:
        time.sleep(0.1)
    left = alive(pids)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return not left
