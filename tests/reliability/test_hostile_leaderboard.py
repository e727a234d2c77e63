"""A leaderboard repository strangers cannot fool or break (issue 40): each reproduction of
the issue, as a test (those of the publish steps, the repository and its lock are in
tests/exchange/test_publish_*.py). Forgeries fail; the pipeline never hangs; what strangers
name is escaped for every language robench writes it into."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from robench.errors import MergeError
from robench.exchange.publish import DEFAULT_SETTINGS
from robench.exchange.merge import merge_databases, trial_inconsistency
from robench.exchange.verify import default_sample, influence, sample_trials
from robench.present.badges import badge_svg
from tests.reliability.cli import HOSTILE, run


def _honest_run(folder: Path, name: str = "honest.db", *extra) -> Path:
    db = folder / name
    out = run(["run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2", "--seed", "1",
               "--db", db, *extra], folder)
    assert out.returncode == 0, out.stderr
    return db


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """An honest contribution: digits, svm, rho, 2 repeats (6 trials)."""
    return _honest_run(tmp_path_factory.mktemp("honest"))


def _one_line_error(out):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


# ------------------------------------------------------------------------------ forgeries


def test_an_edited_trial_with_rescored_scores_contradicts_itself(honest, tmp_path):
    """Issue 40, 1: one exclusive accuracy edited with sqlite3 and --rescore passed validate."""
    forged = tmp_path / "forged.db"
    shutil.copyfile(honest, forged)
    with sqlite3.connect(forged) as conn:
        key, acc = conn.execute("SELECT key, accuracy FROM trials WHERE kind = 'exclusive' "
                                "ORDER BY key LIMIT 1").fetchone()
        conn.execute("UPDATE trials SET accuracy = 0.95 WHERE key = ?", (key,))
    conn.close()
    out = run(["run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2", "--seed", "1",
               "--rescore", "--db", forged], tmp_path)
    assert out.returncode == 0, out.stderr
    with pytest.raises(MergeError, match=f"trial {key[:16]} .* contradicts itself"):
        merge_databases([forged], tmp_path / "all.db")
    assert acc != 0.95


def test_a_forgery_consistent_in_itself_is_read_against_the_data(honest, tmp_path):
    """Every copy of one trial's result edited alike (accuracy, per-class accuracy, all-data
    accuracy, correct bits): the bits set are not all on its partition's test rows."""
    import base64

    import numpy as np

    from robench.exchange.verify import data_inconsistencies
    from robench.plugins import get_registry
    from robench.storage.store import Store

    forged = tmp_path / "forged.db"
    shutil.copyfile(honest, forged)
    with sqlite3.connect(forged) as conn:
        key, bits, acc, n_test, per_class, extra = conn.execute(
            "SELECT key, correct, accuracy, n_test, per_class, extra FROM trials WHERE kind = "
            "'exclusive' ORDER BY key LIMIT 1").fetchone()
        raw = np.frombuffer(base64.b64decode(bits), dtype=np.uint8)
        n = int(round(conn.execute("SELECT n_train + n_val + n_test FROM trials WHERE key = ?",
                                   (key,)).fetchone()[0]))
        flags = np.unpackbits(raw, count=n).astype(bool)
        wrong = np.flatnonzero(~flags)[:3]  # three wrong rows made right, wherever they are
        flags[wrong] = True
        counts = json.loads(extra)["test_class_counts"]
        per_class = json.loads(per_class)
        c = int(np.argmax(counts))
        per_class[c] = (per_class[c] * counts[c] + 3) / counts[c]
        conn.execute("UPDATE trials SET correct = ?, all_accuracy = ?, accuracy = ?, "
                     "per_class = ? WHERE key = ?",
                     (base64.b64encode(np.packbits(flags).tobytes()).decode(),
                      float(flags.mean()), (acc * n_test + 3) / n_test, json.dumps(per_class),
                      key))
    conn.close()
    with Store(forged, readonly=True) as store:
        rows = store.trials(status="ok")
    assert all(trial_inconsistency(r) is None for r in rows)  # consistent in itself
    found = data_inconsistencies(rows, get_registry())
    assert [r["key"] for r, _ in found] == [key]
    # the control: the honest trials agree with the data
    with Store(honest, readonly=True) as store:
        assert data_inconsistencies(store.trials(status="ok"), get_registry()) == []


@pytest.mark.parametrize("change, why", [
    ({"accuracy": 0.5 + 0.5 / 1000}, "whole number of its"),
    ({"all_accuracy": 0.25}, "correct bits"),
    ({"per_class": json.dumps([1.0, 1.0])}, "outside its own per-class"),
    ({"extra": json.dumps({"test_class_counts": [3, 1]})}, "per-class accuracies and test"),
])
def test_each_copy_of_a_trials_result_is_checked_against_the_others(change, why):
    import base64

    row = {"status": "ok", "accuracy": 0.5, "n_test": 4, "all_accuracy": 0.5,
           "correct": base64.b64encode(bytes([0b11110000])).decode(),
           "per_class": json.dumps([0.0, 1.0]),
           "extra": json.dumps({"test_class_counts": [2, 2]})}
    assert trial_inconsistency(row) is None
    assert why in trial_inconsistency({**row, **change})


def test_the_verify_sample_covers_every_stratum_and_weighs_outliers():
    rows = [{"key": f"{m}{k}{r}", "dataset": "d", "model": m, "clusterer": "c",
             "protocol": "p", "kind": k, "n_test": 300, "accuracy": 0.8 + 0.001 * r}
            for m in "abcd" for k in ("inclusive", "exclusive", "random") for r in range(8)]
    rows[0]["accuracy"] = 0.95  # an edited trial stands out from its siblings
    strata = {(r["model"], r["protocol"], r["kind"]) for r in rows}
    n = default_sample(rows, 0.05, 10)
    assert n == len(strata) == 12
    for seed in range(20):
        picked = sample_trials(rows, n, seed, weighted=True)
        assert {(r["model"], r["protocol"], r["kind"]) for r in picked} == strata
    weights = influence(rows)
    assert weights[rows[0]["key"]] > 5 * weights[rows[1]["key"]]
    hits = sum(rows[0] in sample_trials(rows, n, seed, weighted=True) for seed in range(400))
    assert hits / 400 > 0.5  # uniform within its stratum: 1/8


def test_forged_verification_records_are_never_the_leaderboards(honest, tmp_path):
    """Issue 40, 2: a contribution's own verifications row, dated 2099 and claiming the CI."""
    from robench.storage.store import Store
    from robench.storage.verification import status, verifications

    forged = tmp_path / "mallory.db"
    shutil.copyfile(honest, forged)
    trials = json.dumps([{"key": "k", "dataset": "digits", "model": "svm", "outcome": "match"}])
    with sqlite3.connect(forged) as conn:
        conn.execute("INSERT INTO verifications (started_at, finished_at, host, n_sampled, "
                     "n_matched, trials, recorded_in, fingerprint) VALUES ('2099-12-31', "
                     "'2099-12-31', 'robench-leaderboard-ci', 1, 1, ?, "
                     "'the leaderboard''s CI (published/robench.db)', 'x')", (trials,))
    conn.close()
    target = tmp_path / "published.db"
    merge_databases([forged], target, ["mallory"])
    with Store(target, readonly=True) as store:
        records = verifications(store)
    assert [r["recorded_in"] for r in records] == ["mallory (mallory.db)"]
    assert "as reported by mallory (mallory.db), not re-run here" in status(
        records, model="svm")["text"]
    own = {**records[0], "recorded_in": None, "finished_at": "2026-01-01", "host": "ci"}
    assert status(records + [own], model="svm")["host"] == "ci"  # the verifier's own first


def test_an_uninstalled_model_is_refused_not_a_mismatch(tmp_path):
    """Issue 40, 3: an uninstalled model was called a MISMATCH (docs say refused)."""
    db = tmp_path / "r.db"
    out = run(["run", "-d", "digits", "-m", "slow", "--metric", "rho", "-r", "1", "-k", "2",
               "--db", db], tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": "0"})
    assert out.returncode == 0, out.stderr
    out = run(["verify", "--db", db, "--sample", "1"], tmp_path)  # the data is here, the model not
    assert "MISMATCH" not in out.stdout
    assert "refused" in out.stdout and ("not installed" in out.stdout), out.stdout


def test_verify_reruns_under_a_time_limit_and_reports_it_refused(tmp_path):
    """Issue 40, 5: a stored spec that runs far longer than its run had."""
    db = tmp_path / "slow.db"
    out = run(["run", "-d", "tiny", "-m", "slow", "--metric", "rho", "-r", "1", "-k", "2",
               "--db", db], tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": "0"})
    assert out.returncode == 0, out.stderr
    started = time.monotonic()
    out = run(["verify", "--db", db, "--sample", "3", "--trial-timeout", "2", "--budget", "3"],
              tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": "600"}, timeout=120)
    assert time.monotonic() - started < 60
    assert "did not finish within 2 s here" in out.stdout, out.stdout + out.stderr
    assert "time budget of 3 s was spent" in out.stdout
    assert "MISMATCH" not in out.stdout


@pytest.mark.parametrize("threads", ["recorded", "none recorded"])
def test_verifys_time_limit_cannot_be_caught_by_the_trial(tmp_path, threads):
    """A model whose fit ignores SIGALRM and swallows every exception (TrialTimeout
    included): standalone verify kills its re-run a few seconds past the limit and reports
    it refused. A trial that records no thread count used to be re-run in verify's own
    process, where only SIGALRM stood between it and running for ever."""
    db = tmp_path / "defiant.db"
    out = run(["run", "-d", "tiny", "-m", "defiant", "--metric", "rho", "-r", "1", "-k", "2",
               "--db", db], tmp_path, plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": "0"})
    assert out.returncode == 0, out.stderr
    if threads == "none recorded":
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE trials SET execution = json_object('threads', NULL)")
        conn.close()
    started = time.monotonic()
    out = run(["verify", "--db", db, "--sample", "1", "--trial-timeout", "2"], tmp_path,
              plugins=HOSTILE, env={"ROBENCH_TEST_SLEEP": "600"}, timeout=120)
    took = time.monotonic() - started
    from robench.exchange.verify import KILL_GRACE

    assert took < 2 + KILL_GRACE + 30, took  # the worker's start-up and robench's own
    assert "refused" in out.stdout and "did not finish within 2 s here" in out.stdout, (
        out.stdout + out.stderr)
    assert "MISMATCH" not in out.stdout and "match " not in out.stdout


def test_a_rerun_whose_worker_cannot_start_is_refused_not_a_mismatch(honest, tmp_path):
    """A worker that fails to start (a plugin module that does not import in a fresh process)
    says nothing about the trial: refused with the reason, never a mismatch."""
    from robench.exchange.verify import verify
    from robench.plugins import make_registry
    from robench.storage.store import Store

    db = tmp_path / "copy.db"
    shutil.copyfile(honest, db)
    registry = make_registry(load_entrypoints=False)
    registry.recipe = {**registry.recipe, "modules": ["tests.no_such_plugin_module"]}
    with Store(db) as store:
        result = verify(store, registry, sample=1, seed=0)
    assert [t["outcome"] for t in result.trials] == ["refused"]
    assert "worker process failed to start" in result.trials[0]["reason"]


def test_the_catch_probability_of_the_default_sample():
    """The figures docs/publishing.md states, by simulation (tests/reliability/
    forgery_simulation.py): 4 models x 3 kinds x 100 repeats, rho raised by one point."""
    from tests.reliability.forgery_simulation import catch_probability

    default = DEFAULT_SETTINGS["verify_fraction"]
    table = catch_probability(ks=(1, 5, 20, 30), hows=("random",), seeds=100, fraction=default)
    assert table["sampled_fraction"] == default == 0.10
    assert all(v >= 0.95 for k, v in table.items() if isinstance(k, tuple)), table
    # the control: a uniform sample of the same size misses the one-trial forgery often
    import numpy as np

    from robench.exchange.verify import sample_trials as draw
    from tests.reliability.forgery_simulation import contribution, forge

    caught = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        rows = contribution(rng, 4, 100)
        edited = forge(rows, 1, rng)
        caught += any(r["key"] in edited for r in draw(rows, 120, seed, weighted=False))
    assert caught / 100 < 0.3


def test_no_5_percent_sample_catches_a_forgery_hidden_among_its_siblings_95_percent():
    """Why the default is not 5% (docs/publishing.md): a forger who raises the k lowest
    trials of a stratum ends them among their siblings, where no weighting by value can tell
    them apart; then any sample of s per stratum catches the forgery with the hypergeometric
    chance 1 - C(n-k, s)/C(n, s), 0.68 for 5 of 100 and k = 20 (by hand: 1 - 24,040,016 /
    75,287,520), and the weighted sample does no better."""
    import numpy as np

    from tests.reliability.forgery_simulation import blind_catch, catch_probability

    assert abs(blind_catch(100, 5, 20) - (1 - 24_040_016 / 75_287_520)) < 1e-12
    rng = np.random.default_rng(0)  # the formula against draws
    drawn = np.mean([(rng.permutation(100)[:5] < 20).any() for _ in range(4000)])
    assert abs(drawn - blind_catch(100, 5, 20)) < 0.03
    table = catch_probability(ks=(20,), hows=("lowest",), seeds=100, fraction=0.05)
    assert table["sample"] == 60  # 5 per stratum
    assert table[(20, "lowest")] < blind_catch(100, 5, 20) + 0.1 < 0.95
    table = catch_probability(ks=(20,), hows=("lowest",), seeds=100, fraction=0.15)
    assert table[(20, "lowest")] > 0.9  # 15 per stratum: blind 0.974


# ----------------------------------------------------------------------------- escaping


def test_a_badge_attribute_cannot_be_broken_out_of():
    """Issue 40, 6: a data set path `x" onload="alert(1)` put an onload on the <svg>."""
    svg = badge_svg('x" onload="alert(1)', "it's #1 <b>", "#2e7d32")
    root = ET.fromstring(svg)
    assert set(root.attrib) == {"width", "height", "role", "aria-label"}
    assert root.attrib["aria-label"] == "x\" onload=\"alert(1): it's #1 <b>"


def test_diff_and_csv_escape_names_from_the_databases(tmp_path):
    from tests.reliability.cli import ROOT

    base = tmp_path / "a.db"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "docs.db", base)
    other = tmp_path / "b.db"
    shutil.copyfile(base, other)
    for db, name in ((base, "=1+2"), (other, "=1+2")):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE scores SET model = ? WHERE model = 'mlp'", (name,))
            conn.execute("UPDATE scores SET model = '<img src=x> @alice|\u202e' "
                         "WHERE model = 'cnn-1'")
        conn.close()
    md = run(["diff", base, other, "--format", "markdown"], tmp_path)
    assert md.returncode == 0, md.stderr
    rows = [line for line in md.stdout.splitlines() if line.startswith("| ")]
    assert any("`<img src=x> @alice\\|\\u202e`" in line for line in rows)
    assert all(line.count(" | ") == 8 for line in rows)  # no cell split by a pipe
    text = run(["diff", base, other], tmp_path)
    assert "\u202e" not in text.stdout and "\\u202e" in text.stdout
    js = run(["diff", base, other, "--format", "json"], tmp_path)
    json.loads(js.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    site = tmp_path / "site"
    out = run(["leaderboard", "--db", base, "--out", site], tmp_path)
    assert out.returncode == 0, out.stderr
    import csv

    cells = [r[1] for r in csv.reader((site / "scores.csv").open())][1:]
    assert "'=1+2" in cells and "=1+2" not in cells


def test_diff_json_has_no_infinity(tmp_path):
    from tests.reliability.cli import ROOT

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "docs.db", a)
    shutil.copyfile(a, b)
    with sqlite3.connect(b) as conn:  # a width SQLite stores but JSON cannot hold
        conn.execute("UPDATE scores SET ci_low = -1e308, ci_high = 1e308 WHERE metric = 'rho'")
    conn.close()
    out = run(["diff", a, b, "--format", "json"], tmp_path)
    assert "Infinity" not in out.stdout and "NaN" not in out.stdout
    json.loads(out.stdout, parse_constant=lambda c: pytest.fail(c))


# ------------------------------------------------------------------- the smaller items


def test_verify_refuses_an_empty_file_and_a_damaged_database(tmp_path, honest):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    out = run(["verify", "--db", empty], tmp_path)
    _one_line_error(out)
    assert empty.read_bytes() == b""
    damaged = tmp_path / "damaged.db"
    data = bytearray(honest.read_bytes())
    data[len(data) // 2:len(data) // 2 + 4096] = b"\xff" * 4096
    damaged.write_bytes(bytes(data))
    out = run(["verify", "--db", damaged], tmp_path)
    _one_line_error(out)
    assert damaged.read_bytes() == bytes(data)


def test_the_query_sandbox_refuses_fts3_tokenizer(honest, tmp_path):
    out = run(["query", "--db", honest, "SELECT hex(fts3_tokenizer('simple'))"], tmp_path)
    _one_line_error(out)
    assert "fts3_tokenizer" in out.stderr


def test_results_json_works_without_a_key_column(tmp_path):
    from tests.reliability.cli import ROOT

    db = tmp_path / "old.db"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "docs.db", db)
    with sqlite3.connect(db) as conn:
        views = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'").fetchall()
        for name, _ in views:
            conn.execute(f"DROP VIEW {name}")
        cols = [r[1] for r in conn.execute("PRAGMA table_info(trials)") if r[1] != "key"]
        conn.executescript(f"CREATE TABLE t AS SELECT {', '.join(cols)} FROM trials; "
                           "DROP TABLE trials; ALTER TABLE t RENAME TO trials;")
        for _, sql in views:
            conn.execute(sql)
    conn.close()
    text = run(["results", "--db", db], tmp_path)
    out = run(["results", "--db", db, "--format", "json"], tmp_path)
    assert text.returncode == 0 and out.returncode == 0, out.stderr
    assert json.loads(out.stdout)


def test_a_data_load_ended_by_the_time_limit_is_not_the_data_sets_failure():
    """Issue 40, 8 (D8): a load that overran --trial-timeout failed every later trial."""
    from robench.data import Dataset
    from robench.plugins import make_registry
    from robench.process.guard import TrialTimeout
    from robench.specs import DatasetSpec
    from tests.plugins.tiny import make_tiny

    calls = []

    def load():
        calls.append(1)
        if len(calls) == 1:
            raise TrialTimeout("trial ran past its time limit")
        return make_tiny()

    registry = make_registry(load_entrypoints=False)
    registry.add("datasets", DatasetSpec("flaky", load, "slow first load"))
    with pytest.raises(TrialTimeout):
        registry.load_dataset("flaky")
    assert isinstance(registry.load_dataset("flaky"), Dataset)
