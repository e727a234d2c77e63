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


def start(args, tmp_path, **popen) -> subprocess.Popen:
    """Start ``robench ARGS`` in ``tmp_path`` and return the process (stdout/stderr piped)."""
    return subprocess.Popen([sys.executable, "-m", "robench", *args], cwd=tmp_path,
                            env=robench_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def run(args, tmp_path, timeout=300, input=None) -> subprocess.CompletedProcess:
    """Run ``robench ARGS`` in ``tmp_path`` to completion."""
    return subprocess.run([sys.executable, "-m", "robench", *args], cwd=tmp_path,
                          env=robench_env(tmp_path), capture_output=True, text=True,
                          timeout=timeout, input=input)


def rows(db, sql, params=()) -> list:
    """Return the rows of a read-only query on ``db``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def integrity(db) -> str:
    """Return SQLite's integrity check of ``db`` ('ok' when sound)."""
    return rows(db, "PRAGMA integrity_check")[0][0]
