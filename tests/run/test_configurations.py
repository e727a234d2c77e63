"""Score identity includes the configuration; one configuration per table; the old fixture."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from robench.run import configurations
from robench.cli import cli
from robench.run.config import RunConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: written by `robench run -d digits -m mlp -m svm -c kmeans --metric rho -r 2 -k 3
#: --executor local --set train.max_epochs=1` at commit 0a81169, before configurations
OLD_MAIN = FIXTURES / "main_0a81169.db"

TINY = ["-d", "tiny", "-m", "centroid", "-c", "kmeans", "-k", "3", "--executor", "local",
        "--metric", "rho"]


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _cfg(reg, **kw):
    base = dict(datasets=["tiny"], models=["centroid"], clusterers=["kmeans"], metrics=["rho"])
    base.update(kw)
    return RunConfig(**base).resolve(reg)


def test_fingerprint_covers_what_enters_the_trials(tiny_registry):
    reg = tiny_registry
    rho = reg.get("metrics", "rho")
    base = configurations.fingerprint(configurations.describe(_cfg(reg), rho, reg))
    assert base == configurations.fingerprint(configurations.describe(_cfg(reg), rho, reg))
    for change in ({"repeats": 2}, {"k": 3}, {"seed": 1}, {"profile": "standard"},
                   {"settings": {"train": {"max_epochs": 1}}}):
        other = configurations.describe(_cfg(reg, **change), rho, reg)
        assert configurations.fingerprint(other) != base, change
    # a knob of a section rho's protocol does not read leaves its configuration alone
    coverage = {"coverage": {"repeats": 1}}
    same = configurations.describe(_cfg(reg, settings=coverage), rho, reg)
    assert configurations.fingerprint(same) == base
    label = configurations.label(configurations.describe(
        _cfg(reg, repeats=2, settings={"train": {"max_epochs": 1}}), rho, reg))
    assert label == "quick R=2 k=5 seed=0 (train.max_epochs=1)"


def _row(model, config, run_id, clusterer="kmeans"):
    return {"dataset": "d", "metric": "rho", "model": model, "clusterer": clusterer,
            "configuration": config, "run_id": run_id}


def test_choose_takes_the_most_complete_then_the_latest():
    labels = {"a": "A", "b": "B", "c": "C"}
    rows = [_row("m1", "a", 1), _row("m2", "a", 1), _row("m1", "b", 2), _row("m1", "c", 3)]
    (choice,) = configurations.choose(rows, labels).values()
    assert (choice.configuration, choice.covered) == ("a", 2)
    assert [o[0] for o in choice.others] == ["c", "b"]  # then by coverage and recency
    rows.append(_row("m2", "b", 2))
    (choice,) = configurations.choose(rows, labels).values()
    assert choice.configuration == "b"  # a tie at 2 combinations goes to the latest run
    (choice,) = configurations.choose(rows, labels, "c").values()
    assert choice.configuration == "c"
    assert configurations.choose(rows, labels, "zzz") == {}
    shown = configurations.chosen_rows(rows, configurations.choose(rows, labels))
    assert {r["configuration"] for r in shown} == {"b"} and len(shown) == 2


def test_resolve_names_the_known_configurations():
    known = {"abcdef0123": "quick R=3 k=5 seed=0", "legacy": "legacy"}
    assert configurations.resolve("abcd", known) == "abcdef0123"
    assert configurations.resolve("quick R=3 k=5 seed=0", known) == "abcdef0123"
    assert configurations.resolve("all", known) == "all"
    with pytest.raises(configurations.ConfigurationError, match="did you mean 'legacy'"):
        configurations.resolve("legcy", known)


def test_two_runs_with_different_repeats_keep_both_scores(tiny_registry, tmp_path):
    db = str(tmp_path / "r.db")
    assert run("run", *TINY, "-r", "3", "--db", db).exit_code == 0
    assert run("run", *TINY, "-r", "2", "--db", db).exit_code == 0
    conn = sqlite3.connect(db)
    rho = conn.execute("SELECT s.n, c.repeats, c.label FROM scores s JOIN configurations c "
                       "ON c.id = s.configuration WHERE score = 'rho' ORDER BY n").fetchall()
    assert [(n, r) for n, r, _ in rho] == [(2, 2), (3, 3)]
    out = json.loads(run("results", "--db", db, "--format", "json", "--config", "all").output)
    assert sorted(r["n"] for r in out if r["score"] == "rho") == [2, 3]
    # the default shows one configuration: a tie in coverage goes to the latest run (R=2)
    res = run("results", "--db", db, "--metric", "rho")
    assert "tiny / rho: configuration quick R=2 k=3 seed=0" in res.output
    assert "1 other configuration(s) not shown: quick R=3" in res.output
    chosen = json.loads(run("results", "--db", db, "--format", "json").output)
    assert {r["n"] for r in chosen if r["score"] == "rho"} == {2}
    r3 = [lab for _, _, lab in rho if "R=3" in lab][0]
    picked = json.loads(run("results", "--db", db, "--format", "json", "--config", r3).output)
    assert {r["n"] for r in picked if r["score"] == "rho"} == {3}
    assert {r["configuration_label"] for r in picked} == {r3}
    site = tmp_path / "site"
    assert run("leaderboard", "--db", db, "--out", str(site)).exit_code == 0
    assert "rho: <code>configuration quick R=2 k=3 seed=0" in (site / "index.html").read_text()


def test_unknown_config_is_exit_2_with_the_known_ones(tiny_registry, tmp_path):
    db = str(tmp_path / "r.db")
    run("run", *TINY, "-r", "2", "--db", db)
    res = CliRunner().invoke(cli, ["results", "--db", db, "--config", "nosuch"])
    assert res.exit_code == 2 and "unknown configuration 'nosuch'" in res.output
    assert "quick R=2 k=3 seed=0" in res.output and "Traceback" not in res.output


def test_a_database_from_before_configurations_migrates_and_shows_its_scores(tmp_path):
    from robench.storage.migrations import APPLICATION_ID, CURRENT
    from robench.storage.store import Store

    db = tmp_path / "old.db"
    shutil.copyfile(OLD_MAIN, db)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    before = conn.execute("SELECT key, model, score, value FROM scores ORDER BY key").fetchall()
    conn.close()
    assert len(before) == 8
    Store(db).close()  # opening to write migrates in place
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == CURRENT
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    after = conn.execute("SELECT key, model, score, value FROM scores ORDER BY key").fetchall()
    assert after == before  # same keys and values: the legacy scores are kept as they were
    assert {c for (c,) in conn.execute("SELECT configuration FROM scores")} == {"legacy"}
    conn.close()
    out = json.loads(run("results", "--db", str(db), "--format", "json").output)
    assert {(r.get("ranking") or {}).get("unranked") for r in out if r["score"] == "rho"} == {
        "ranks not computed: run `robench migrate`"}  # none stored yet
    assert "up to date" in run("migrate", "--db", str(db)).output  # ... which stores them
    out = json.loads(run("results", "--db", str(db), "--format", "json").output)
    assert {(r["model"], r["score"]) for r in out} == {(m, s) for _, m, s, _ in before}
    assert any((r.get("ranking") or {}).get("rank_interval") for r in out)
    assert {r["configuration"] for r in out} == {"legacy"}
    rho = run("results", "--db", str(db), "--metric", "rho").output
    assert "digits / rho: configuration legacy" in rho and "svm" in rho and "0.811" in rho
