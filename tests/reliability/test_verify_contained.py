"""robench verify cannot be stalled by what a re-run leaves behind (issue 51, 6): a model that
forks a child keeps no verify (and no pipe a CI job reads) alive, at its limit or after."""

from __future__ import annotations

import os
import time

import pytest

from tests.reliability.cli import run

PLUGINS = ("tests.plugins.tiny", "tests.plugins.forker")


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.fixture(scope="module")
def forker_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forker")
    db = folder / "forker.db"
    out = run(["run", "-d", "tiny", "-m", "forker", "--metric", "rho", "-r", "1", "-k", "2",
               "--db", db], folder, plugins=PLUGINS)
    assert out.returncode == 0, out.stderr
    return db


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("hang", [False, True], ids=["forks and returns", "forks and hangs"])
def test_verify_kills_what_a_rerun_forked(forker_db, tmp_path, hang):
    """The forked child sleeps five minutes holding verify's stdout: verify used to end while
    the pipe stayed open (the caller waited for the child); at its limit only the worker was
    killed, never its children."""
    marks = tmp_path / "pids"
    env = {"ROBENCH_TEST_FORK": marks}
    if hang:
        env["ROBENCH_TEST_FORK_HANG"] = "1"
    started = time.monotonic()
    limit = "10" if hang else "60"  # a first trial here imports and loads for seconds
    out = run(["verify", "--db", forker_db, "--sample", "1", "--trial-timeout", limit],
              tmp_path, plugins=PLUGINS, env=env, timeout=120)
    took = time.monotonic() - started
    assert took < 90, took
    if hang:
        assert "did not finish within 10 s here" in out.stdout, out.stdout + out.stderr
    else:
        assert out.returncode == 0 and "verified 1 of 1" in out.stdout, out.stdout + out.stderr
    pids = [int(p) for p in marks.read_text().split()]
    assert pids
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(_gone(p) for p in pids), pids
