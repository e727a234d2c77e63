"""robench verify: re-run a stratified sample of stored trials, compare, record, exit 0/1/2."""

import json
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.exchange.verify import sample_trials, tolerance

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "2", "--metric", "rho",
        "--set", "train.max_epochs=2", "--set", "train.batch_size=16"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A database of tiny trials of a numpy and a torch model, run in worker processes."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    try:
        db = tmp_path_factory.mktemp("verify") / "alice.db"
        # trained one at a time: these tests check the exact mode (a trial trained in a batch
        # is verified within the tolerance, tests/run/test_batching.py)
        res = CliRunner().invoke(cli, [str(a) for a in (
            "run", *TINY, "-m", "centroid", "-m", "mlp", "--executor", "process", "-j", "2",
            "--db", db)], env={"ROBENCH_BATCH": "off"})
        assert res.exit_code == 0, res.output
    finally:
        set_registry(None)
    return db


@pytest.fixture
def ran(pristine, tiny_registry, tmp_path):
    """A copy of the pristine database to verify (and edit)."""
    db = tmp_path / "alice.db"
    with sqlite3.connect(pristine) as a, sqlite3.connect(db) as b:
        a.backup(b)
    return db


def test_trials_are_deterministic_from_their_stored_spec(ran, tiny_registry):
    """Invariant 10: every stored trial, re-run here from its spec, gives the same result
    bit for bit (it first ran in a worker process; numpy and torch models alike)."""
    from robench.storage.content import trial_content
    from robench.run.executors import execute_trial
    from robench.storage.store import Store
    from robench.run.trials import TrialEnv
    from robench.exchange.verify import _stored_like

    with Store(ran, readonly=True) as store:
        rows = store.trials(status="ok")
    assert {r["model"] for r in rows} == {"centroid", "mlp"} and len(rows) == 12
    env = TrialEnv(tiny_registry)
    for row in rows:
        again = _stored_like(execute_trial(row["spec"], env))
        assert trial_content(again) == trial_content(row), row["key"]
        assert again["correct"] == row["correct"] and again["history"] == row["history"]


def test_verify_passes_on_an_honest_database_and_records_what_it_checked(ran):
    res = run("verify", "--db", ran, "--sample", "4", "--seed", "3")
    assert res.exit_code == 0, res.output
    assert "verified 4 of 4 re-run trial(s)" in res.output and "0 mismatch(es)" in res.output
    assert res.output.count(", exact") == 4
    conn = sqlite3.connect(ran)
    (n, k, m, r, trials, host) = conn.execute(
        "SELECT n_sampled, n_matched, n_mismatched, n_refused, trials, host "
        "FROM verifications").fetchone()
    assert (n, k, m, r) == (4, 4, 0, 0) and host
    trials = json.loads(trials)
    # stratified: both models and (within each) both kinds of partition before any twice
    assert {t["model"] for t in trials} == {"centroid", "mlp"}
    assert all(t["outcome"] == "match" and t["mode"] == "exact" for t in trials)
    rows = json.loads(run("results", "--db", ran, "--format", "json").output)
    assert {r["verification"]["text"].split(" on ")[0] for r in rows} == {
        "verified 2 of 2 sampled trials"}
    text = run("results", "--db", ran).output
    assert "tiny / centroid: verified 2 of 2 sampled trials on" in text
    site = ran.parent / "site"
    assert run("leaderboard", "--db", ran, "--out", site).exit_code == 0
    assert "Verification</dt><dd>verified 2 of 2 sampled trials on " in \
        (site / "models" / "mlp.html").read_text()
    assert "Verification: verified 4 of 4 sampled trials on " in \
        (site / "datasets" / "tiny.html").read_text()


def test_an_unverified_database_says_so(ran):
    rows = json.loads(run("results", "--db", ran, "--format", "json").output)
    assert {r["verification"]["text"] for r in rows} == {"not verified"}


def test_verify_exits_1_on_an_edited_accuracy_and_names_it(ran):
    conn = sqlite3.connect(ran)
    (key, acc) = conn.execute("SELECT key, accuracy FROM trials WHERE model = 'mlp' AND "
                              "status = 'ok' ORDER BY key LIMIT 1").fetchone()
    conn.execute("UPDATE trials SET accuracy = ? WHERE key = ?", (round(1 - acc, 3) or 0.5, key))
    conn.commit()
    conn.close()
    res = run("verify", "--db", ran, "--sample", "12")
    assert res.exit_code == 1, res.output
    assert f"MISMATCH {key[:16]} (tiny mlp" in res.output
    assert f"accuracy stored {round(1 - acc, 3) or 0.5}, re-run {acc}" in res.output
    assert "verified 11 of 12 re-run trial(s)" in res.output
    (m, trials) = sqlite3.connect(ran).execute(
        "SELECT n_mismatched, trials FROM verifications").fetchone()
    bad = [t for t in json.loads(trials) if t["outcome"] == "mismatch"]
    assert m == 1 and bad[0]["key"] == key and bad[0]["differences"][0]["rerun"] == acc


def test_another_device_is_compared_within_the_stated_tolerance(ran):
    conn = sqlite3.connect(ran)
    conn.execute("UPDATE trials SET device = 'cuda:0'")
    (key, acc, n) = conn.execute("SELECT key, accuracy, n_test FROM trials WHERE model = "
                                 "'centroid' ORDER BY key LIMIT 1").fetchone()
    conn.execute("UPDATE trials SET accuracy = ? WHERE key = ?", (acc - 0.5 / n, key))
    conn.commit()
    conn.close()
    res = run("verify", "--db", ran, "--sample", "8")
    assert res.exit_code == 0, res.output  # half a row off: within tolerance
    assert res.output.count(", tolerance") == 8


def test_a_trial_whose_version_is_not_installed_is_refused_not_a_mismatch(ran):
    conn = sqlite3.connect(ran)
    for key, spec in conn.execute("SELECT key, spec FROM trials").fetchall():
        spec = json.loads(spec)
        spec["versions"]["model"] = "9.9/9"
        conn.execute("UPDATE trials SET spec = ? WHERE key = ?", (json.dumps(spec), key))
    conn.commit()
    conn.close()
    res = run("verify", "--db", ran, "--sample", "3")
    assert res.exit_code == 2, res.output
    assert "the trial ran with 9.9/9; install the plugin version it ran with" in res.output
    assert "0 mismatch(es), 3 refused" in res.output
    assert "Error: none of the 3 sampled trial(s) can be re-run here" in res.output
    assert "Traceback" not in res.output


def test_bad_input_is_refused_with_one_line(ran, tmp_path):
    res = run("verify", "--db", tmp_path / "none.db")
    assert res.exit_code == 2 and "no results database" in res.output
    res = run("verify", "--db", ran, "--contributor", "nobody")
    assert res.exit_code == 2 and "contributor 'nobody'; known: none" in res.output
    res = run("verify", "--db", ran, "--sample", "0")
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = run("verify", "--db", ran, "--budget", "ten minutes")
    assert res.exit_code == 2 and "is not a duration; write it like 90s, 10m or 1h" in res.output
    assert "Traceback" not in res.output


def test_verify_takes_its_budget_as_a_duration(ran):
    """``--budget 10m`` as ``robench run`` takes it (it took plain seconds only)."""
    res = run("verify", "--db", ran, "--sample", "2", "--budget", "10m")
    assert res.exit_code == 0, res.output
    assert "verified 2 of 2 re-run trial(s)" in res.output


def test_the_sample_is_stratified_by_model_and_protocol():
    rows = [{"key": f"{m}{p}{i}", "model": m, "protocol": p}
            for m, n in (("a", 50), ("b", 3), ("c", 1)) for p in ("x", "y") for i in range(n)]
    picked = sample_trials(rows, 6, seed=1)
    assert {(r["model"], r["protocol"]) for r in picked} == {
        (m, p) for m in "abc" for p in "xy"}  # every stratum once before any twice
    assert sample_trials(rows, 6, seed=1) == picked  # seeded
    assert len(sample_trials(rows, 1000, seed=1)) == len(rows)


def test_the_tolerance_is_three_standard_errors_of_a_difference_plus_a_row():
    # by hand: 0.5 and 0.5 on 100 rows: pooled (50 + 50 + 2) / 204 = 0.5,
    # 3 * sqrt(2 * 0.25 / 100) + 1/100
    assert tolerance(0.5, 0.5, 100) == pytest.approx(3 * 0.0707107 + 0.01, abs=1e-6)
    # two perfect scores on 50 rows: pooled 102 / 104
    p = 102 / 104
    assert tolerance(1.0, 1.0, 50) == pytest.approx(3 * (2 * p * (1 - p) / 50) ** 0.5 + 0.02)
    # its false-mismatch rate, by simulation: two independent measurements of one accuracy
    # (the other device's model as another draw), skewed accuracies and small test sets too
    rng = np.random.default_rng(0)
    for p in (0.5, 0.9, 0.99, 0.999):
        for n in (10, 30, 200, 2000):
            a = rng.binomial(n, p, 20000) / n
            b = rng.binomial(n, p, 20000) / n
            tol = np.array([tolerance(x, y, n) for x, y in zip(a, b)])
            assert np.mean(np.abs(a - b) > tol) < 0.01, (p, n)
    # and it still catches an accuracy edited by 10 points on a test set of 1,000 rows
    a = rng.binomial(1000, 0.8, 5000) / 1000
    b = rng.binomial(1000, 0.9, 5000) / 1000
    assert np.mean([abs(x - y) > tolerance(x, y, 1000) for x, y in zip(a, b)]) > 0.99


def test_a_merge_keeps_each_contributions_verification_history(ran, tmp_path):
    assert run("verify", "--db", ran, "--sample", "2").exit_code == 0
    merged = tmp_path / "all.db"
    res = run("merge", ran, "--contributor", "alice", "--db", merged)
    assert res.exit_code == 0 and "1 verification record(s) copied" in res.output
    rows = json.loads(run("results", "--db", merged, "--format", "json").output)
    texts = {r["model"]: r["verification"]["text"] for r in rows}
    assert texts["centroid"].startswith("verified 1 of 1 sampled trials on ")
    assert texts["centroid"].endswith("(as reported by alice (alice.db), not re-run here)")
    # the maintainer's own verification of the merged database comes on top of it
    assert run("verify", "--db", merged, "--sample", "4").exit_code == 0
    rows = json.loads(run("results", "--db", merged, "--format", "json").output)
    assert not any("reported by" in r["verification"]["text"] for r in rows)
    conn = sqlite3.connect(merged)
    assert [r[0] for r in conn.execute("SELECT recorded_in FROM verifications ORDER BY id")] \
        == ["alice (alice.db)", None]
    conn.close()
    # another copy of the same contribution brings no second copy of its record
    copy = tmp_path / "alice-again.db"
    with sqlite3.connect(ran) as a, sqlite3.connect(copy) as b:
        a.backup(b)
    conn = sqlite3.connect(copy)
    conn.execute("UPDATE runs SET command = 'robench run (again)'")
    conn.commit()
    conn.close()
    res = run("merge", copy, "--contributor", "alice", "--db", merged)
    assert res.exit_code == 0 and "verification record(s) copied" not in res.output


def test_every_kind_of_source_aware_trial_is_re_runnable_after_protocol_2(ran, tiny_registry):
    """Protocol 2 changed the exclusive partition only: inclusive and random trials keep
    their version-1 keys (ProtocolSpec.trial_versions) and stay re-runnable by verify;
    a version neither current nor listed is refused."""
    from robench.exchange.verify import missing
    from robench.storage.store import Store

    store = Store(ran, readonly=True)
    specs = {t["kind"]: t["spec"] for t in store.trials() if t["protocol"] == "source-aware"}
    assert specs["exclusive"]["versions"]["protocol"] == "2"
    assert specs["inclusive"]["versions"]["protocol"] == specs["random"]["versions"]["protocol"] == "1"
    assert all(missing(s, tiny_registry) is None for s in specs.values())
    old = {**specs["inclusive"], "versions": {**specs["inclusive"]["versions"], "protocol": "0"}}
    assert "version 2 here, the trial ran with 0" in missing(old, tiny_registry)


# --- issue 51, 5: a tolerance is not a licence -----------------------------------------------


def test_the_joint_shift_test_refuses_one_direction_and_keeps_its_error_rate():
    """By simulation, in standard errors of a difference (what systematic_shift reads):
    honest re-run minus stored differences are differences of two draws of one training
    procedure, so symmetric about 0 whatever the shape of a draw (normal, heavy-tailed,
    mostly zero, skewed draws, draws that degrade now and then, whole test rows): refused in
    at most SHIFT_ALPHA of verifications (Bonferroni over the two tests). Every trial raised by
    0.8 of its tolerance (2.4 standard errors) is refused at 10 re-runs even with re-run noise
    of one standard error, and at 3 when the re-runs reproduce (no noise)."""
    from robench.exchange.verify import SHIFT_ALPHA, shift_pvalues

    rng = np.random.default_rng(0)
    reps = 4000

    def refused(z):
        p_sign, p_t = shift_pvalues(z)
        return float(np.mean(np.minimum(p_sign, p_t) < SHIFT_ALPHA / 2))

    def draw(shape):  # a run degrades (-4 se) one time in ten
        return np.where(rng.random(shape) < 0.1, -4.0, 0.0) + 0.7 * rng.normal(size=shape)

    for n in (3, 10, 40):
        shape = (reps, n)
        honest = {
            "normal": rng.normal(size=shape),
            "t3": rng.standard_t(3, size=shape),
            "mostly zero": np.where(rng.random(shape) < 0.7, 0.0, rng.normal(size=shape)),
            "skewed draws": rng.gamma(2, 1, shape) - rng.gamma(2, 1, shape),
            "degraded runs": draw(shape) - draw(shape),
            "test rows": (rng.binomial(30, 0.9, shape) - rng.binomial(30, 0.9, shape))
            / np.sqrt(2 * 30 * 0.09),
        }
        for name, z in honest.items():  # 3 Monte Carlo standard errors above the level
            assert refused(z) <= SHIFT_ALPHA + 3 * (SHIFT_ALPHA / reps) ** 0.5, (n, name)
    assert refused(np.full((reps, 3), -2.4)) == 1.0
    assert refused(-2.4 + rng.normal(size=(reps, 10))) > 0.99
    # the control: the same differences in both directions are not refused
    assert refused(np.tile([-2.4, 2.4], (reps, 5))) == 0.0


def test_systematic_shift_names_the_column_and_both_tests():
    from robench.exchange.verify import systematic_shift, tolerance

    n = 360
    raised = [{"accuracy": (a + 0.8 * tolerance(a, a, n), a, n), "val_accuracy": (0.9, 0.9, 40)}
              for a in np.linspace(0.80, 0.95, 10)]
    (shift,) = systematic_shift(raised)
    assert shift["column"] == "accuracy" and shift["negative"] == 10 and shift["n"] == 10
    assert shift["p_sign"] == pytest.approx(2 / 2 ** 10) and shift["p_t"] < 1e-6
    assert "negative in 10 of 10 re-runs" in shift["text"]
    both = [dict(r, accuracy=(r["accuracy"][1] + (-1) ** i * 0.8 * tolerance(0.9, 0.9, n),
                              r["accuracy"][1], n)) for i, r in enumerate(raised)]
    assert systematic_shift(both) == []
    assert systematic_shift(raised[:2]) == []  # fewer than SHIFT_LEAST re-runs: no test


@pytest.fixture(scope="module")
def digits_svm(tmp_path_factory):
    """digits, svm, rho, 4 repeats: 12 trials with test sets of hundreds of rows."""
    db = tmp_path_factory.mktemp("svm") / "honest.db"
    res = CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r",
                                   "4", "--seed", "1", "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db


@pytest.mark.parametrize("claim", ["batched", "another device"])
def test_every_trial_raised_just_inside_the_tolerance_is_refused_by_default(
        digits_svm, tmp_path, claim):
    """Issue 51: trials that claim batched training (or another device) are compared within
    the tolerance; raising every one just inside it published a forged rho as verified. With
    default settings the ten re-runs are now also tested together and refused; the honest
    file with the same claim passes (the control)."""
    from robench.exchange.verify import tolerance

    for name, forge in (("honest", False), ("forged", True)):
        db = tmp_path / f"{name}.db"
        with sqlite3.connect(digits_svm) as a, sqlite3.connect(db) as b:
            a.backup(b)
        conn = sqlite3.connect(db)
        if claim == "batched":
            conn.execute("UPDATE trials SET execution = json_set(execution, '$.batched', 2)")
        else:
            conn.execute("UPDATE trials SET device = 'cuda:0'")
        if forge:
            for key, acc, n in conn.execute("SELECT key, accuracy, n_test FROM trials")\
                    .fetchall():
                new = min(1.0, acc + 0.8 * tolerance(acc, acc, n))
                assert abs(new - acc) <= tolerance(new, acc, n)  # inside, trial by trial
                conn.execute("UPDATE trials SET accuracy = ? WHERE key = ?", (new, key))
        conn.commit()
        conn.close()
        res = run("verify", "--db", db)
        if not forge:
            assert res.exit_code == 0, res.output
            assert "verified 10 of 10" in res.output and res.output.count(", tolerance") == 10
            continue
        assert res.exit_code == 1, res.output
        assert "SHIFT    systematic shift: re-run minus stored accuracy is negative in 10 of " \
               "10 re-runs" in res.output
        assert "10 mismatch(es)" in res.output
        (m,) = sqlite3.connect(db).execute("SELECT n_mismatched FROM verifications").fetchone()
        assert m == 10


# --- issue 51, 6: bounded re-runs, and what was not re-run does not pass by omission ---------


def test_a_rerun_is_bounded_by_its_trials_recorded_time():
    """A spec edited to ask for 100,000 epochs ran to the profile's 900 s; the trial's own
    recorded seconds now bound it (20 x + 60 s), never above its run's limit or verify's."""
    from robench.exchange.verify import RECORDED_FACTOR, RECORDED_FLOOR, trial_limit

    run_ = {"config": {"trial_timeout": 900}}
    assert trial_limit(run_, None) == 900.0
    assert trial_limit(run_, None, 1.5) == RECORDED_FLOOR + RECORDED_FACTOR * 1.5 == 90.0
    assert trial_limit(run_, 30, 1.5) == 30.0  # verify's own limit is lower
    assert trial_limit(run_, None, 100.0) == 900.0  # the run's limit caps it
    assert trial_limit(run_, None, "lots") == 900.0  # a recorded time that is no number


def test_verify_exits_non_zero_when_a_sampled_trial_could_not_be_re_run(ran):
    """Issue 51: sampled trials refused (their data set not here at the version they ran on)
    while the others matched: exit 0, their accuracies passing by omission. Now exit 3."""
    conn = sqlite3.connect(ran)
    for key, spec in conn.execute("SELECT key, spec FROM trials WHERE model = 'mlp'").fetchall():
        spec = json.loads(spec)
        spec["versions"]["dataset"] = "9.9/9"
        conn.execute("UPDATE trials SET spec = ? WHERE key = ?", (json.dumps(spec), key))
    conn.commit()
    conn.close()
    res = run("verify", "--db", ran, "--sample", "6")  # every (model, kind) once
    assert res.exit_code == 3, res.output
    assert "0 mismatch(es), 3 refused" in res.output and "verified 3 of 3" in res.output
    assert "3 of the 6 sampled trial(s) could not be re-run here" in res.output
    assert "Traceback" not in res.output
