"""The publish loop as a maintainer and a contributor meet it: an honest default contribution,
run and verified on a machine whose BLAS and torch use 2 threads, reproduces exactly and is
published with the pipeline's verification; a naive forgery is rejected with the true reason
and leaves nothing published or accepted; the generated workflow passes real linters."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from robench.exchange import publish
from robench.exchange.verify import difference_text
from robench.storage.content import first_difference
from robench.storage.verification import PIPELINE
from tests.exchange.boards import edit

#: A default contribution (every default metric, purity-ratio included), kept small: one
#: data set and model, 2 repeats, 2 epochs, a 3-model purity-ratio zoo with a CNN in it.
CONTRIBUTION = ["run", "-d", "digits", "-m", "mlp", "-r", "2", "--set", "train.max_epochs=2",
                "--set", 'clusterability.zoo=["mlp","zoo-mlp-narrow","cnn-1"]']


def robench(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=1200, env=env)


def two_threads() -> dict:
    """The environment of a machine whose BLAS, OpenMP and torch default to 2 threads."""
    env = {k: v for k, v in os.environ.items() if k != "ROBENCH_TORCH_THREADS"}
    env.update(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    return env


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------- fast: the pieces


def test_a_difference_is_named_by_its_json_path_with_both_whole_values():
    stored = {"coef": 1.0, "extra": {"multicut": {"coef": -4.869149183653176, "k": 3}}}
    rerun = {"coef": 1.0, "extra": {"multicut": {"coef": -4.8691491836531755, "k": 3}}}
    path, a, b = first_difference(stored["extra"], rerun["extra"], "extra")
    assert (path, a, b) == ("extra/multicut/coef", -4.869149183653176, -4.8691491836531755)
    history = [{"epoch": 1, "loss": 0.5}, {"epoch": 2, "loss": 0.25}]
    assert first_difference(history, [history[0], {"epoch": 2, "loss": 0.2500001}], "history") \
        == ("history/1/loss", 0.25, 0.2500001)
    text = difference_text({"column": "extra", "path": path, "stored_at": a, "rerun_at": b,
                            "stored": stored, "rerun": rerun, "tolerance": 0.0})
    # both values whole: cut at 57 characters they looked identical
    assert text == "extra/multicut/coef stored -4.869149183653176, re-run -4.8691491836531755"
    long = "x" * 200
    assert long + "y" in difference_text({"column": "error", "stored": long + "y",
                                          "rerun": long + "z", "tolerance": 0.0})


# ----------------------------------------------------------- slow: the loop, end to end


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """A default contribution run on a machine whose libraries default to 2 threads."""
    db = tmp_path_factory.mktemp("honest") / "alice.db"
    out = robench(*CONTRIBUTION, "--db", db, env=two_threads(), cwd=db.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    return db


@pytest.mark.slow(reason="a default contribution with purity-ratio's zoo, then every trial "
                  "re-run: ~3 min on 2 busy cores")
def test_an_honest_default_contribution_verifies_exactly_under_two_threads(honest, tmp_path):
    db = tmp_path / "alice.db"
    shutil.copyfile(honest, db)
    with sqlite3.connect(db) as conn:
        n, protocols, executions = conn.execute(
            "SELECT count(*), group_concat(DISTINCT protocol), group_concat(DISTINCT execution) "
            "FROM trials WHERE status = 'ok'").fetchone()
    assert "clusterability" in protocols and "source-aware" in protocols
    assert json.loads(executions)["threads"] == 1  # what the workers ran with, recorded
    out = robench("verify", "--db", db, "--sample", 10_000, env=two_threads())
    assert out.returncode == 0, out.stdout[-4000:]
    assert f"verified {n} of {n} re-run trial(s)" in out.stdout
    assert out.stdout.count(", exact") == n and "MISMATCH" not in out.stdout


@pytest.mark.slow(reason="init-leaderboard, a default contribution published with the "
                  "pipeline's verification, a forgery rejected: ~4 min on 2 busy cores")
def test_the_loop_publishes_an_honest_contribution_verified_and_rejects_a_forgery(
        honest, tmp_path):
    board = tmp_path / "board"
    out = robench("init-leaderboard", board, "--no-example", "--requirement", "robench",
                  "--allow-editable")
    assert out.returncode == 0, out.stderr
    shutil.copyfile(honest, board / "contributions" / "alice.db")
    out = robench("publish", "run", board, env=two_threads())
    assert out.returncode == 0, out.stdout + out.stderr
    assert [r["contributor"] for r in publish.accepted(board).values()] == ["alice"]
    published = board / "published" / "robench.db"
    with sqlite3.connect(published) as conn:
        records = conn.execute("SELECT contributor, recorded_in, n_matched, n_sampled, host "
                               "FROM verifications").fetchall()
    assert len(records) == 1
    contributor, where, matched, sampled, host = records[0]
    assert contributor == "alice" and where.startswith(PIPELINE)
    # the sample: every (model, protocol, kind) stratum, 10% of the trials, at least 10
    assert matched == sampled >= publish.DEFAULT_SETTINGS["verify_sample"] and host
    page = (board / "site" / "models" / "mlp.html").read_text().replace("&#39;", "'")
    said = re.search(r"verified (\d+) of (\d+) sampled trials on (\S+), (\d{4}-\d\d-\d\d) "
                     r"\(recorded in ([^)]*)\)", page)
    assert said, page[:2000]
    k, n, on, date, where = said.groups()
    assert k == n and int(n) > 0 and on == host and where == records[0][1]
    assert sorted(p.name for p in published.parent.iterdir()) == ["accepted.json", "robench.db"]

    # a naive forgery on a board of its own: one trial's accuracy edited, scores left as run
    forged = tmp_path / "forged"
    assert robench("init-leaderboard", forged, "--no-example", "--requirement",
                   "robench", "--allow-editable").returncode == 0
    mallory = forged / "contributions" / "mallory.db"
    shutil.copyfile(honest, mallory)
    edit(mallory, "UPDATE trials SET accuracy = 0.99 WHERE protocol = 'source-aware' AND "
          "kind = 'exclusive'")
    before = {p.name: digest(p) for p in (forged / "published").iterdir()}
    out = robench("publish", "merge", forged)  # run alone: nothing verified, nothing merged
    assert out.returncode == 1 and "`mallory.db`: rejected." in out.stdout
    out = robench("publish", "run", forged)
    assert out.returncode == 1
    report = (forged / ".staging" / "report.md").read_text()
    reason = report.split("`mallory.db`: rejected.**", 1)[1].splitlines()[0]
    # the truth: the edited trial's accuracy contradicts its own stored correct bits and
    # per-class accuracies (checked before its scores are recomputed); nothing is published
    # to clash with
    assert "contradicts itself" in reason, reason
    assert "conflict with" not in reason, reason
    assert {p.name: digest(p) for p in (forged / "published").iterdir()} == before
    assert publish.accepted(forged) == {}
