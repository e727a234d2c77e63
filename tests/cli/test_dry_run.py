"""`robench run --dry-run`: the plan, the skips and a time projected from stored durations."""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.run.estimate import Durations, load_reference, project, summarize
from robench.run.runner import Plan

ROWS = [  # as Store.trial_durations returns them
    {"dataset": "d", "model": "m", "protocol": "p", "kind": "a", "max_epochs": 4,
     "seconds": 10.0, "n": 3},
    {"dataset": "d", "model": "m", "protocol": "p", "kind": "a", "max_epochs": 2,
     "seconds": 4.0, "n": 1},
    {"dataset": "d", "model": "m", "protocol": "p", "kind": "b", "max_epochs": 4,
     "seconds": 2.0, "n": 1},
    {"dataset": "d", "model": "", "protocol": "w", "kind": "w", "max_epochs": None,
     "seconds": 7.0, "n": 2},
]


def spec(kind="a", budget=4, protocol="p", model="m", dataset="d"):
    return {"dataset": dataset, "model": model, "protocol": protocol, "kind": kind,
            "params": {"train": {"max_epochs": budget}} if budget else {}}


def test_a_trial_is_charged_what_trials_like_it_took():
    d = Durations(ROWS)
    assert d.seconds(spec()) == 10.0  # same kind and budget: their mean
    assert d.seconds(spec(budget=2)) == 4.0
    # another budget only: each stored mean scaled by the budgets' ratio, weighted by count
    assert d.seconds(spec(budget=8)) == pytest.approx((3 * 20.0 + 1 * 16.0) / 4)
    # another kind only: the protocol's trials of any kind (b's 2 s and a's)
    assert d.seconds(spec(kind="c")) == pytest.approx((3 * 10.0 + 1 * 2.0) / 4)
    assert d.seconds(spec(protocol="w", model="", kind="w", budget=None)) == 7.0
    assert d.seconds(spec(dataset="other")) is None


def test_the_plan_table_counts_stored_trials_and_projects_the_rest():
    plan = Plan()
    plan.specs = {"k1": spec(), "k2": spec(), "k3": spec(kind="b"), "k4": spec(dataset="x"),
                  "k5": spec(protocol="w", model="", kind="w", budget=None)}
    rows = summarize(plan, stored_keys={"k2"}, durations=Durations(ROWS))
    by = {(r["dataset"], r["model"], r["protocol"]): r for r in rows}
    assert by[("d", "m", "p")] == {"dataset": "d", "model": "m", "protocol": "p", "trials": 3,
                                   "stored": 1, "todo": 2, "seconds": 12.0, "unestimated": 0,
                                   "reference": 0}
    assert by[("x", "m", "p")]["unestimated"] == 1 and by[("d", "-", "w")]["seconds"] == 7.0
    proj = project(rows, jobs=2)
    assert (proj["todo"], proj["estimated"], proj["unestimated"]) == (4, 3, 1)
    assert proj["worker_seconds"] == 19.0 and proj["wall_seconds"] == 9.5
    assert project(rows, jobs=8)["wall_seconds"] == 7.0, "never below the longest trial"


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_dry_run_shows_the_plan_skips_and_projection_and_writes_nothing(tiny_registry,
                                                                      tmp_path):
    db = tmp_path / "r.db"
    base = ["run", "-d", "tiny", "-m", "centroid", "-c", "oracle", "--executor", "local"]
    args = [*base, "--metric", "rho", "--metric", "shifted-cv", "-r", "2",
            "--set", "shifted_cv.folds=4", "--set", "shifted_cv.repeats=1", "--db", str(db)]
    res = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert not db.exists(), "a dry run creates no database"
    out = res.output
    assert "nothing runs, nothing is stored" in out
    assert "tiny" in out and "source-aware" in out and "shifted-cv" in out
    # rho: 2 repeats x 3 kinds; shifted-cv: 3 folds (the oracle's 3 sources) x 2 kinds + 1
    assert "total: 13 trials, 0 already stored" in out
    assert "Projected time: no estimate" in out

    run = CliRunner().invoke(cli, [*base, "--metric", "rho", "-r", "1", "--db", str(db)])
    assert run.exit_code == 0, run.output
    before = _digest(db)
    res = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert _digest(db) == before, "a dry run only reads the database"
    assert f"total: 13 trials, 3 already stored in {db}, 10 to run" in res.output
    assert "for the 3 of 10 trials to run that have an estimate; 7 more have no" in res.output

    skipped = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans",
                                       "--metric", "rho", "--metric", "lost-test", "-k", "20",
                                       "--all", "--dry-run", "--db", str(db)])
    assert skipped.exit_code == 0, skipped.output
    assert "rho: source-aware on data set 'tiny' (clusterer 'kmeans'): cannot split" \
        in skipped.output


def test_the_reference_durations_answer_only_where_the_database_knows_nothing():
    reference = Durations([{"dataset": "d", "model": "m", "protocol": "p", "kind": "a",
                            "max_epochs": 4, "seconds": 99.0, "n": 5},
                           {"dataset": "x", "model": "m", "protocol": "p", "kind": "a",
                            "max_epochs": 4, "seconds": 3.0, "n": 5}])
    d = Durations(ROWS, fallback=reference)
    assert d.estimate(spec()) == (10.0, "stored")  # the user's own machine first
    assert d.estimate(spec(dataset="x", budget=8)) == (6.0, "reference")  # scaled like stored
    assert d.estimate(spec(dataset="y")) == (None, None)
    plan = Plan()
    plan.specs = {"k1": spec(), "k2": spec(dataset="x"), "k3": spec(dataset="y")}
    rows = summarize(plan, durations=d)
    proj = project(rows, jobs=1)
    assert (proj["estimated"], proj["reference"], proj["unestimated"]) == (2, 1, 1)
    assert proj["worker_seconds"] == 13.0


def test_the_packaged_reference_covers_the_documented_profiles(tmp_path, monkeypatch):
    """A fresh directory: `run --all --dry-run` of the quick and the standard profile has an
    estimate for every trial, from the reference durations, and says where they were
    measured. Fails when a built-in model, data set or protocol is added without
    regenerating robench/run/reference_durations.json (benchmarks/reference_durations.py)."""
    rows, stamp = load_reference()
    assert rows and stamp["machine"] and stamp["commit"] and stamp["date"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    for profile in ("quick", "standard"):
        res = CliRunner().invoke(cli, ["run", "--all", "--profile", profile, "--dry-run"])
        assert res.exit_code == 0, res.output
        todo = int(res.output.split(" to run\n")[0].rsplit(", ", 1)[1])
        assert f"for the {todo} of {todo} trials to run that have an estimate." in res.output
        said = " ".join(res.output.split())
        assert f"robench's reference durations ({todo} trial(s); measured on " in said
        assert stamp["date"] in said
    assert not (tmp_path / "robench.db").exists()


def test_a_dry_run_of_a_race_names_the_metrics_that_race(tiny_registry, tmp_path):
    """The dry run of a budgeted run says which of its metrics race (those with a paired
    comparison, from the registry) and within what time; a plain run's says nothing of it."""
    db = tmp_path / "r.db"
    args = ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans", "--metric", "rho",
            "--metric", "lost-test", "--dry-run", "--db", str(db)]
    res = CliRunner().invoke(cli, [*args, "--budget", "10m"], terminal_width=200)
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "This run races the tables of rho (--until decided)" in said
    assert "within 10 min" in said and "lost-test" not in said.split("This run races")[1]
    plain = CliRunner().invoke(cli, args, terminal_width=200)
    assert plain.exit_code == 0 and "races" not in plain.output
    assert not db.exists()
