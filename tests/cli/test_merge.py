"""robench merge: contributors' databases into one, with provenance, conflicts kept apart."""

import hashlib
import json
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from robench.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OLD_MAIN = FIXTURES / "main_0a81169.db"  # schema 0: digits, mlp and svm, rho, R=2, k=3

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "2", "--executor", "local",
        "--metric", "rho"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def copy_db(src, dst):
    """Copy a database with everything committed (a run's connection may hold a WAL)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


@contextmanager
def another_run(src, dst):
    """Copy ``src`` to ``dst`` as another contributor's run; edit it in the with block."""
    copy_db(src, dst)
    conn = sqlite3.connect(dst)
    try:
        yield conn
        conn.execute("UPDATE runs SET command = ?", (f"robench run ({Path(dst).stem})",))
        conn.commit()
    finally:
        conn.close()


def dump(path):
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def two(tiny_registry, tmp_path):
    """Two contributors' databases: alice ran centroid, bob ran spy... on tiny."""
    a, b = tmp_path / "alice.db", tmp_path / "bob.db"
    assert run("run", *TINY, "-m", "centroid", "--db", a).exit_code == 0
    assert run("run", *TINY, "-m", "centroid", "-m", "spy", "--db", b).exit_code == 0
    return a, b


def test_merge_keeps_provenance_and_twice_changes_nothing(two, tmp_path):
    a, b = two
    c = tmp_path / "c.db"
    before = hashlib.md5(a.read_bytes()).hexdigest(), hashlib.md5(b.read_bytes()).hexdigest()
    res = run("merge", a, b, "--db", c)
    assert res.exit_code == 0, res.output
    assert "alice.db (alice): 1 run(s) copied" in res.output
    assert "bob.db (bob): 1 run(s) copied" in res.output and "6 duplicate" in res.output
    assert (hashlib.md5(a.read_bytes()).hexdigest(),
            hashlib.md5(b.read_bytes()).hexdigest()) == before  # sources are only read
    first = dump(c)
    again = run("merge", a, b, "--db", c)
    assert again.exit_code == 0 and "merged before (same file, as alice); nothing new" \
        in again.output and "conflict" not in again.output
    assert dump(c) == first
    conn = sqlite3.connect(c)
    runs = conn.execute("SELECT r.id, c.contributor, c.source, c.source_run_id FROM runs r "
                        "JOIN contributions c ON c.run_id = r.id ORDER BY r.id").fetchall()
    assert runs == [(1, "alice", "alice.db", 1), (2, "bob", "bob.db", 1)]  # renumbered
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()
    rows = json.loads(run("results", "--db", c, "--format", "json").output)
    who = {(r["model"], r["contributor"]) for r in rows if r["score"] == "rho"}
    # both ran centroid with the same configuration: one score key, alice's came first
    assert who == {("centroid", "alice"), ("spy", "bob")}
    site = tmp_path / "site"
    assert run("leaderboard", "--db", c, "--out", site).exit_code == 0
    methods = (site / "methods.html").read_text()
    assert "alice" in methods and "bob" in methods and "bob.db" in methods


def test_a_conflicting_trial_is_reported_and_kept_apart(two, tmp_path):
    a, _ = two
    forged = tmp_path / "mallory.db"
    with another_run(a, forged) as conn:
        (key,) = conn.execute("SELECT key FROM trials WHERE status = 'ok' LIMIT 1").fetchone()
        # a result that is consistent in itself (an accuracy edited alone contradicts its
        # per-class accuracies and is refused whole: tests/reliability/test_hostile_leaderboard)
        conn.execute("UPDATE trials SET best_epoch = 7 WHERE key = ?", (key,))
    c = tmp_path / "c.db"
    assert run("merge", a, "--db", c).exit_code == 0
    res = run("merge", forged, "--db", c)
    assert res.exit_code == 0, res.output
    assert "1 conflicting" in res.output and "1 conflict(s)" in res.output
    assert f"trial {key[:16]} (tiny " in res.output \
        and "differs in best_epoch: best_epoch kept" in res.output
    assert "incoming 7; kept the one from alice (alice.db, run 1 there)" in res.output
    conn = sqlite3.connect(c)
    assert conn.execute("SELECT best_epoch FROM trials WHERE key = ?", (key,)).fetchone()[0] \
        != 7  # the stored result is kept
    (kind, columns, contributor, incoming) = conn.execute(
        "SELECT kind, columns, contributor, incoming FROM conflicts").fetchone()
    assert (kind, json.loads(columns), contributor) == ("trial", ["best_epoch"], "mallory")
    assert json.loads(incoming)["best_epoch"] == 7
    conn.close()
    first = dump(c)
    assert run("merge", forged, "--db", c).exit_code == 0
    assert dump(c) == first  # the conflict is recorded once


def test_a_self_contradicting_trial_is_refused(two, tmp_path):
    """An accuracy edited by hand contradicts the trial's own correct bits and per-class
    accuracies: merge refuses the source whole, the target is unchanged (issue 40)."""
    a, _ = two
    forged = tmp_path / "mallory.db"
    with another_run(a, forged) as conn:
        (key,) = conn.execute("SELECT key FROM trials WHERE status = 'ok' LIMIT 1").fetchone()
        conn.execute("UPDATE trials SET accuracy = 0.123 WHERE key = ?", (key,))
    c = tmp_path / "c.db"
    assert run("merge", a, "--db", c).exit_code == 0
    first = dump(c)
    res = run("merge", forged, "--db", c)
    assert res.exit_code == 2 and "contradicts itself" in res.output, res.output
    assert dump(c) == first


def test_an_old_contributor_database_is_migrated_in_a_copy(tmp_path):
    src = tmp_path / "old.db"
    shutil.copyfile(OLD_MAIN, src)
    before = hashlib.md5(src.read_bytes()).hexdigest()
    c = tmp_path / "c.db"
    res = run("merge", src, "--db", c)
    assert res.exit_code == 0, res.output
    assert hashlib.md5(src.read_bytes()).hexdigest() == before
    out = run("results", "--db", c, "--metric", "rho").output
    assert "configuration legacy" in out and "svm" in out


def test_untrusted_sources_are_checked_and_their_schema_objects_never_copied(two, tmp_path):
    a, _ = two
    evil = tmp_path / "evil.db"
    copy_db(a, evil)
    conn = sqlite3.connect(evil)
    conn.execute("CREATE TABLE loot (x)")
    conn.execute("CREATE TRIGGER t AFTER INSERT ON runs BEGIN INSERT INTO loot VALUES (1); END")
    conn.execute("CREATE VIEW v AS SELECT * FROM loot")
    conn.commit()
    conn.close()
    c = tmp_path / "c.db"
    assert run("merge", evil, "--db", c).exit_code == 0
    names = {r[0] for r in sqlite3.connect(c).execute("SELECT name FROM sqlite_master")}
    assert not {"loot", "t", "v"} & names

    extra = tmp_path / "extra.db"
    copy_db(a, extra)
    conn = sqlite3.connect(extra)
    conn.execute("ALTER TABLE trials ADD COLUMN payload TEXT")
    conn.commit()
    conn.close()
    res = run("merge", extra, "--db", tmp_path / "d.db")
    assert res.exit_code == 2 and "columns robench does not declare (payload)" in res.output

    bad = tmp_path / "bad.db"
    copy_db(a, bad)
    conn = sqlite3.connect(bad)
    conn.execute("UPDATE trials SET per_class = 'not json{' WHERE rowid = 1")
    conn.commit()
    conn.close()
    res = run("merge", bad, "--db", tmp_path / "e.db")
    assert res.exit_code == 2 and "per_class is not JSON" in res.output

    text = tmp_path / "notes.db"
    text.write_text("hello" * 100)
    res = run("merge", text, "--db", tmp_path / "f.db")
    assert res.exit_code == 2 and "not an SQLite database" in res.output
    assert "Traceback" not in res.output


def test_differing_scores_and_score_groups_are_counted_reported_and_kept_apart(two, tmp_path):
    a, _ = two
    forged = tmp_path / "mallory.db"
    with another_run(a, forged) as conn:
        (score_key, value) = conn.execute(
            "SELECT key, value FROM scores WHERE score = 'rho' LIMIT 1").fetchone()
        conn.execute("UPDATE scores SET value = 0.5 WHERE key = ?", (score_key,))
        (group_key, keys) = conn.execute(
            "SELECT key, trial_keys FROM score_groups LIMIT 1").fetchone()
        fewer = json.dumps(json.loads(keys)[1:])
        conn.execute("UPDATE score_groups SET trial_keys = ?, inputs = 'forged' WHERE key = ?",
                     (fewer, group_key))
        (trial_key,) = conn.execute(
            "SELECT key FROM trials WHERE status = 'ok' LIMIT 1").fetchone()
        conn.execute("UPDATE trials SET status = 'failed', error = 'x' WHERE key = ?",
                     (trial_key,))
        n_groups = conn.execute("SELECT count(*) FROM score_groups").fetchone()[0]
        n_scores = conn.execute("SELECT count(*) FROM scores").fetchone()[0]
    c = tmp_path / "c.db"
    assert run("merge", a, "--db", c).exit_code == 0
    res = run("merge", forged, "--db", c)
    assert res.exit_code == 0, res.output
    assert (f"{n_scores - 1} duplicate, 1 conflicting; 0 score group(s) copied, "
            f"{n_groups - 1} duplicate, 1 conflicting") in res.output
    assert "1 failed trial(s) not copied" in res.output
    assert "2 conflict(s) (1 score, 1 score group)" in res.output
    assert f"score {score_key[:16]} (tiny centroid kmeans rho rho)" in res.output
    assert f"value kept {value}, incoming 0.5; kept the one from alice (alice.db, run 1" \
        in res.output
    assert f"score group {group_key[:16]}" in res.output and "differs in trial_keys" in res.output
    conn = sqlite3.connect(c)
    assert conn.execute("SELECT value FROM scores WHERE key = ?", (score_key,)).fetchone()[0] \
        == value
    assert conn.execute("SELECT trial_keys FROM score_groups WHERE key = ?",
                        (group_key,)).fetchone()[0] == keys
    assert conn.execute("SELECT status FROM trials WHERE key = ?",
                        (trial_key,)).fetchone()[0] == "ok"
    assert sorted(r[0] for r in conn.execute("SELECT kind FROM conflicts")) == [
        "score", "score_group"]
    conn.close()
    again = run("merge", forged, "--db", c)
    assert "merged before" in again.output and "conflict(s) (" not in again.output


def test_honest_runs_of_the_same_trials_merge_without_conflicts(tiny_registry, tmp_path):
    """Three contributors ran centroid separately (other run times, workers, finish times)."""
    dbs = []
    for name, models in (("alice", ["centroid"]), ("bob", ["centroid", "spy"]),
                         ("carol", ["spy", "centroid"])):
        dbs.append(tmp_path / f"{name}.db")
        assert run("run", *TINY, *[x for m in models for x in ("-m", m)],
                   "--db", dbs[-1]).exit_code == 0
    conn = sqlite3.connect(dbs[1])  # bob's centroid trials ran at other times, elsewhere
    conn.execute("UPDATE trials SET seconds = seconds + 1, worker = 'elsewhere:1', "
                 "finished_at = '2031-01-01T00:00:00+00:00'")
    conn.commit()
    conn.close()
    c = tmp_path / "c.db"
    res = run("merge", *dbs, "--db", c)
    assert res.exit_code == 0, res.output
    assert "conflict(s)" not in res.output and res.output.count(" 0 conflicting") == 9
    assert "bob.db (bob): 1 run(s) copied, 0 already merged; 6 trial(s) copied, 6 duplicate" \
        in res.output
    again = run("merge", *dbs, "--db", c)
    assert again.output.count("nothing new") == 3 and "conflict(s)" not in again.output


def test_a_forged_score_never_replaces_a_stored_one_whatever_its_key(two, tmp_path):
    a, _ = two
    c = tmp_path / "c.db"
    assert run("merge", a, "--db", c, "--contributor", "maintainer").exit_code == 0
    conn = sqlite3.connect(c)
    (key, stored) = conn.execute("SELECT key, value FROM scores WHERE score = 'rho' AND "
                                 "model = 'centroid'").fetchone()
    conn.close()
    # 1. the score alone, under another key, claiming the maintainer made it
    forged = tmp_path / "official.db"
    copy_db(a, forged)
    conn = sqlite3.connect(forged)
    conn.execute("DELETE FROM score_groups")
    conn.execute("DELETE FROM trials")
    conn.execute("DELETE FROM scores WHERE key != ?", (key,))
    conn.execute("UPDATE scores SET value = 0.999, key = ?", ("f" * 64,))
    conn.execute("UPDATE runs SET command = 'robench run (official)'")
    conn.execute("INSERT INTO contributions (contributor, source, source_run_id, run_id) "
                 "VALUES ('the-maintainer', 'official.db', 1, 1)")
    conn.commit()
    conn.close()
    res = run("merge", forged, "--db", c, "--contributor", "mallory")
    assert res.exit_code == 2 and "official.db: score ffffffffffffffff (tiny centroid kmeans " \
        "rho rho): its key is not the one of its data set" in res.output
    assert "Traceback" not in res.output and str(c) not in res.output
    # 2. the same with its true key but without its trials: not copied
    conn = sqlite3.connect(forged)
    conn.execute("UPDATE scores SET key = ?", (key,))
    conn.commit()
    conn.close()
    res = run("merge", forged, "--db", c, "--contributor", "mallory")
    assert res.exit_code == 0, res.output
    assert "0 score(s) copied, 0 duplicate, 1 conflicting" in res.output
    assert "value kept" in res.output and "incoming 0.999" in res.output
    # 3. into a fresh database, where nothing is stored: without trials, nothing is copied
    fresh = tmp_path / "fresh.db"
    res = run("merge", forged, "--db", fresh, "--contributor", "mallory")
    assert "0 score(s) copied" in res.output and "1 score(s) not copied: the source does " \
        "not hold the trials" in res.output
    # 4. with its trials, the value edited: recomputed here, differs, not copied
    edited = tmp_path / "edited.db"
    with another_run(a, edited) as conn:
        conn.execute("UPDATE scores SET value = 0.999 WHERE key = ?", (key,))
    res = run("merge", edited, "--db", fresh, "--contributor", "mallory")
    assert res.exit_code == 0, res.output
    assert f"score {key[:16]} (tiny centroid kmeans rho rho) from {edited}: not what its " \
        f"trials give here (recomputed here from its 6 trial(s)): value 0.999 claimed, " \
        f"{stored} recomputed; not copied" in res.output
    for db in (c, fresh):
        rows = json.loads(run("results", "--db", db, "--format", "json").output)
        assert 0.999 not in {r["value"] for r in rows}
    assert not [r for r in rows if r["score"] == "rho"]  # fresh: the edited score not copied
    # provenance is what the person merging said
    who = sqlite3.connect(c).execute("SELECT DISTINCT contributor, source FROM contributions "
                                     "ORDER BY 1").fetchall()
    assert who == [("maintainer", "alice.db"), ("mallory", "official.db")]


def test_a_score_whose_metric_version_is_not_installed_is_not_copied(two, tmp_path):
    a, _ = two
    other = tmp_path / "future.db"
    with another_run(a, other) as conn:
        conn.execute("UPDATE scores SET metric_version = '99'")
        conn.execute("UPDATE score_groups SET metric_version = '99'")
    c = tmp_path / "c.db"
    res = run("merge", other, "--db", c)
    assert res.exit_code == 0, res.output
    assert "6 trial(s) copied" in res.output and "0 score(s) copied" in res.output
    assert "4 score(s) of metric 'rho' version 99 from" in res.output
    assert "installed here at version" in res.output and "merge again" in res.output
    assert sqlite3.connect(c).execute("SELECT count(*) FROM scores").fetchone()[0] == 0
    # not complete: merging the same file again looks again (once the plugin is there)
    assert "nothing new" not in run("merge", other, "--db", c).output


def test_a_source_schema_is_checked_whole_and_the_source_named(two, tmp_path):
    a, _ = two
    c = tmp_path / "c.db"
    assert run("merge", a, "--db", c).exit_code == 0
    before = dump(c)
    cases = {
        "virtual.db": ["ALTER TABLE scores ADD COLUMN shadow REAL GENERATED ALWAYS AS "
                       "(value * 2) VIRTUAL"],
        "nokey.db": ["CREATE TABLE t2 AS SELECT * FROM trials", "DROP TABLE trials",
                     "CREATE TABLE trials (dataset TEXT, model TEXT, status TEXT)",
                     "INSERT INTO trials SELECT dataset, model, status FROM t2",
                     "DROP TABLE t2"],
        "text.db": ["UPDATE scores SET value = 'not a number' WHERE rowid = 1"],
        # SQLite's json_valid accepts it; Python's readers end in a RecursionError
        "deep.db": ["UPDATE scores SET details = '" + "[" * 1500 + "]" * 1500
                    + "' WHERE rowid = 1"],
    }
    expected = {"virtual.db": "table scores has generated or hidden column(s) (shadow)",
                "nokey.db": "table trials has no key column",
                "text.db": "1 scores row(s) whose value is not a finite number",
                "deep.db": "1 scores row(s) whose details nests deeper than 64 levels"}
    for name, statements in cases.items():
        bad = tmp_path / name
        copy_db(a, bad)
        conn = sqlite3.connect(bad)
        for sql in statements:
            conn.execute(sql)
        conn.commit()
        conn.close()
        res = run("merge", bad, "--db", c)
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and f"{bad}: {expected[name]}" in lines[0], res.output
        assert dump(c) == before


def test_an_ok_trial_replacing_a_stored_failed_one_is_reported(two, tmp_path):
    a, _ = two
    failed = tmp_path / "failed.db"
    with another_run(a, failed) as conn:
        (key,) = conn.execute("SELECT key FROM trials WHERE status = 'ok' LIMIT 1").fetchone()
        conn.execute("UPDATE trials SET status = 'failed', error = 'x' WHERE key = ?", (key,))
    c = tmp_path / "c.db"
    assert run("merge", failed, "--db", c).exit_code == 0
    res = run("merge", a, "--db", c)
    assert "1 stored failed trial(s) replaced by this source's ok one(s)" in res.output
    assert "0 trial(s) copied" in res.output
