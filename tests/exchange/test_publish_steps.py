"""The publish steps as functions (robench.exchange.publish.steps), on tiny contributions: true
reasons, an all-or-nothing merge, and the pipeline's verification in the published database and
on the site; the sample seed the check draws, its own verification record, exact comparison
when the board asks, trials that cannot be re-run, hostile names in the report."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.errors import MergeError
from robench.exchange import publish
from robench.exchange.publish.common import append_report
from robench.storage.verification import PIPELINE
from tests.exchange.boards import edit, report_text
from tests.reliability.cli import run

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "2", "--metric", "rho",
        "--set", "train.max_epochs=2", "--set", "train.batch_size=16"]


@pytest.fixture(scope="module")
def tiny_db(tmp_path_factory):
    """A tiny contribution run in worker processes (they record how they ran)."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    try:
        db = tmp_path_factory.mktemp("steps") / "alice.db"
        res = CliRunner().invoke(cli, ["run", *TINY, "-m", "centroid", "-m", "mlp",
                                       "--executor", "process", "-j", "2", "--db", str(db)])
        assert res.exit_code == 0, res.output
    finally:
        set_registry(None)
    return db


@pytest.fixture
def tiny_board(tmp_path, tiny_registry):
    """An empty board, with the tiny plugin installed process-wide."""
    repo = tmp_path / "board"
    publish.init_repository(repo, requirement="robench", allow_editable=True)
    return repo


def published_bytes(repo) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((repo / "published").iterdir())}


def check(repo) -> list:
    return [publish.validate(repo), publish.verify(repo), publish.diff(repo)]


def test_trials_record_how_they_ran(tiny_db):
    import json

    with sqlite3.connect(tiny_db) as conn:
        found = {json.loads(r[0]) == {"threads": 1, "executor": "process"}
                 for r in conn.execute("SELECT execution FROM trials")}
    assert found == {True}


def test_an_honest_contribution_is_published_with_the_pipelines_verification(tiny_board, tiny_db):
    shutil.copyfile(tiny_db, tiny_board / "contributions" / "alice.db")
    assert all(step.ok for step in check(tiny_board)), (tiny_board / ".staging" / "report.md").read_text()
    assert publish.merge(tiny_board).ok
    assert publish.build(tiny_board).ok
    with sqlite3.connect(tiny_board / "published" / "robench.db") as conn:
        (n, where, contributor), = conn.execute(
            "SELECT n_matched, recorded_in, contributor FROM verifications").fetchall()
    assert n == 10 and contributor == "alice"
    assert where == f"{PIPELINE}: publish verify of alice.db"
    page = (tiny_board / "site" / "models" / "mlp.html").read_text().replace("&#39;", "'")
    assert "sampled trials on " in page and f"(recorded in {where})" in page
    assert [r["contributor"] for r in publish.accepted(tiny_board).values()] == ["alice"]
    # the published file is one self-contained database: reading it leaves nothing beside it
    assert sorted(p.name for p in (tiny_board / "published").iterdir()) == [
        "accepted.json", "robench.db"]


def test_an_edited_score_is_rejected_because_its_trials_give_another(tiny_board, tiny_db):
    mallory = tiny_board / "contributions" / "mallory.db"
    shutil.copyfile(tiny_db, mallory)
    edit(mallory, "UPDATE scores SET value = value + 0.05 WHERE metric = 'rho'")
    result = publish.validate(tiny_board)
    assert not result.ok
    reason = result.rejected["mallory.db"]
    assert "not what robench recomputes from the contribution's own trials" in reason, reason
    assert "claimed" in reason and "recomputed" in reason
    assert "conflict" not in reason  # nothing is published or pending that it could clash with


def test_merge_alone_publishes_nothing_that_was_not_verified_here(tiny_board, tiny_db):
    shutil.copyfile(tiny_db, tiny_board / "contributions" / "alice.db")
    before = published_bytes(tiny_board)
    result = publish.merge(tiny_board)  # no check ran: alice's trials were not re-run here
    assert not result.ok and "not verified here" in result.rejected["alice.db"]
    assert published_bytes(tiny_board) == before and publish.accepted(tiny_board) == {}


def test_merge_is_all_or_nothing(tiny_board, tiny_db):
    shutil.copyfile(tiny_db, tiny_board / "contributions" / "alice.db")
    check(tiny_board)
    # a second contribution arrives after the check: it was not verified, so neither merges
    bob = tiny_board / "contributions" / "bob.db"
    shutil.copyfile(tiny_db, bob)
    edit(bob, "UPDATE runs SET command = 'bob'")  # other bytes, same results
    before = published_bytes(tiny_board)
    result = publish.merge(tiny_board)
    assert not result.ok and set(result.rejected) == {"bob.db"}
    assert published_bytes(tiny_board) == before and publish.accepted(tiny_board) == {}
    check(tiny_board)
    assert publish.merge(tiny_board).ok
    assert sorted(r["contributor"] for r in publish.accepted(tiny_board).values()) == [
        "alice", "bob"]


def test_the_diff_report_lists_only_what_changes(tiny_board, tiny_db):
    shutil.copyfile(tiny_db, tiny_board / "contributions" / "alice.db")
    check(tiny_board)
    assert publish.merge(tiny_board).ok
    again = tiny_board / "contributions" / "alice-again.db"
    shutil.copyfile(tiny_db, again)
    edit(again, "UPDATE runs SET command = 'again'")
    steps = check(tiny_board)
    assert [s.ok for s in steps] == [True, True, True]
    lines = steps[2].lines
    assert lines[0].startswith("- ") and " 0 changed, 0 new" in lines[0]
    assert not any(line.startswith("| ") for line in lines)  # no table of unchanged scores


# ------------------------------------------------ on an honest digits run (issue 40's cases)


def test_the_report_stays_under_the_comment_limit(tmp_path):
    repo = tmp_path / "board"
    publish.init_repository(repo, requirement="robench", allow_editable=True)
    for i in range(3):
        step = publish.StepResult(f"step{i}")
        step.lines = [f"| row {n} | " + "x" * 200 + " |" for n in range(400)]
        append_report(repo, step)
    text = (repo / ".staging" / "report.md").read_text()
    assert len(text) < 65_536 and "report cut at 65,000 characters" in text


def test_the_sample_seed_is_drawn_by_the_check_not_read_from_the_repository(board, honest):
    shutil.copyfile(honest, board / "contributions" / "alice.db")
    conf = json.loads((board / "leaderboard.json").read_text())
    (board / "leaderboard.json").write_text(json.dumps({**conf, "verify_seed": 0}))
    assert publish.validate(board).ok
    seeds = set()
    for _ in range(2):
        result = publish.verify(board)
        assert result.ok, result.lines
        seeds.add(result.lines[0])
        assert "verified 6 of 6 sampled trial(s) of 6" in "\n".join(result.lines)
    assert len(seeds) == 2  # 2^-32 to fail by chance


def test_the_check_reads_its_own_verification_never_the_contributions(board, honest):
    """A contribution that carries a record claiming every trial matched (dated 2099, id
    999999) and a trial that does not reproduce: the check goes by its own re-run."""
    forged = board / "contributions" / "mallory.db"
    shutil.copyfile(honest, forged)
    with sqlite3.connect(forged) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM trials")]
        conn.execute("UPDATE trials SET n_train = n_train + 1")  # no longer what a re-run gives
        trials = json.dumps([{"key": k, "dataset": "digits", "model": "svm", "outcome": "match"}
                             for k in keys])
        conn.execute("INSERT INTO verifications (id, started_at, finished_at, host, n_sampled, "
                      "n_matched, n_mismatched, n_refused, trials, fingerprint) VALUES (999999, "
                      "'2099-12-31', '2099-12-31', 'ci', ?, ?, 0, 0, ?, 'forged')",
                      (len(keys), len(keys), trials))
    conn.close()
    result = publish.verify(board, seed=3)
    assert not result.ok and "do not reproduce here" in result.rejected["mallory.db"]
    assert "n_train" in result.rejected["mallory.db"]


def test_a_contributor_who_names_another_cpu_is_compared_exactly_when_the_board_says_so(
        board, honest):
    """Which comparison a re-run gets (exact, or within the tolerance) follows the device,
    torch and CPU the contribution's own run records: a forger who names another CPU gets the
    tolerance (three standard errors), inside which an edit passes. ``verify_exact`` compares
    every re-run exactly whatever the run says."""
    forged = board / "contributions" / "mallory.db"
    shutil.copyfile(honest, forged)
    with sqlite3.connect(forged) as conn:
        conn.execute("UPDATE runs SET platform = 'Linux; CPU: Another CPU, avx2'")
        conn.execute("UPDATE trials SET train_accuracy = min(1.0, train_accuracy + 0.01)")
    conn.close()
    conf = {**json.loads((board / "leaderboard.json").read_text()), "verify_sample": 1}
    (board / "leaderboard.json").write_text(json.dumps(conf))  # one trial per stratum: 3
    loose = publish.verify(board, seed=2)
    assert loose.ok, loose.lines  # inside the tolerance: passes
    assert "0 compared exactly, 3 within the tolerance" in "\n".join(loose.lines)
    (board / "leaderboard.json").write_text(json.dumps({**conf, "verify_exact": True}))
    strict = publish.verify(board, seed=2)
    assert not strict.ok and "do not reproduce here" in strict.rejected["mallory.db"]
    assert "train_accuracy" in strict.rejected["mallory.db"]
    (board / "leaderboard.json").write_text(json.dumps({**conf, "verify_exact": 1}))
    with pytest.raises(MergeError, match="verify_exact must be bool"):
        publish.settings(board)


def test_trials_that_cannot_be_rerun_count_against_the_contribution(board, tmp_path):
    """Issue 40, 3: trials on a private CSV, deleted afterwards, with made-up accuracies."""
    import numpy as np

    rng = np.random.default_rng(0)
    table = tmp_path / "private.csv"
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    table.write_text("a,b,c,label\n" + "\n".join(
        f"{a:.4f},{b:.4f},{c:.4f},{'yes' if t else 'no'}" for (a, b, c), t in zip(X, y)))
    db = board / "contributions" / "carol.db"
    out = run(["run", "-d", f"csv:{table}?target=label", "-m", "svm", "--metric", "rho", "-r",
               "2", "-k", "2", "--db", db], tmp_path)
    assert out.returncode == 0, out.stderr
    table.unlink()
    assert publish.validate(board).ok
    result = publish.verify(board, seed=1)
    assert not result.ok and "carol.db" in result.rejected
    assert "cannot be re-run here" in result.rejected["carol.db"]
    # the maintainer can allow that data set by name
    with sqlite3.connect(db) as conn:
        name = conn.execute("SELECT dataset FROM trials LIMIT 1").fetchone()[0]
    conn.close()
    conf = json.loads((board / "leaderboard.json").read_text())
    conf["verify_allow"] = {"datasets": [name], "models": []}
    (board / "leaderboard.json").write_text(json.dumps(conf))
    result = publish.verify(board, seed=1)
    assert "allowed by verify_allow" in "\n".join(result.lines)


def test_the_report_shows_hostile_file_names_as_code(board, honest):
    """Issue 40, 6: `alice<!--.db` hid every later line; a newline forged a heading."""
    for name in ("alice<!--.db", "x\n### validate: passed\n![](https:e.vil) @bob.db"):
        shutil.copyfile(honest, board / "contributions" / name)
    with sqlite3.connect(board / "contributions" / "alice<!--.db") as conn:
        conn.execute("UPDATE trials SET accuracy = 0.123")  # rejected: its reason is shown
    conn.close()
    publish.validate(board)
    report = report_text(board)
    headings = [line for line in report.splitlines() if line.startswith("#")]
    assert headings == ["## robench leaderboard check", "### validate: failed"]
    assert "`alice<!--.db`: rejected." in report
    for line in report.splitlines():
        outside = "".join(line.split("`")[0::2])  # the text outside code spans
        assert "<!--" not in outside and "![" not in outside
        assert "@bob" not in outside


def test_a_board_lacking_the_plugin_refuses_the_contribution_before_any_rerun(board, tiny_db,
                                                                              monkeypatch):
    """Issue 51, 1: a board whose runner lacks the model's plugin said "ok" at validate and
    refused only at verify, after re-running the other trials, naming neither the
    distribution nor the remedy. ``board``'s robench has the built-ins only: no 'tiny' data
    set, no 'centroid' model (tests/plugins/tiny.py, which the contribution's run loaded)."""
    from robench.exchange.publish import steps

    shutil.copyfile(tiny_db, board / "contributions" / "alice.db")
    result = publish.validate(board)
    assert not result.ok
    why = result.rejected["alice.db"]
    assert "\n" not in why, why
    # each component named with the plugin its run recorded for it (by version), and the remedy
    assert ("not installed here): dataset 'tiny', model 'centroid' from plugin "
            "'tests.plugins.tiny' (no version), by its run's record") in why, why
    assert "wheels/" in why and "requirements.txt" in why and "maintainer" in why
    assert "a pull request cannot" in why
    assert "model 'mlp'" not in why  # a built-in: installed here
    # a board that pins the plugin (at another version) names the requirement it has
    (board / "requirements.txt").write_text(
        "robench\n# plugin tests.plugins.tiny 0.0.1\nrobench-tiny==0.0.1\n")
    why = publish.validate(board).rejected["alice.db"]
    assert "(requirements.txt pins it at 0.0.1: robench-tiny==0.0.1)" in why, why

    def no_rerun(*args, **kwargs):
        raise AssertionError("a trial was re-run")

    monkeypatch.setattr(steps, "verify_trials", no_rerun)
    res = CliRunner().invoke(cli, ["publish", "check", str(board)])
    assert res.exit_code == 1, res.output
    assert "validate: FAILED" in res.output and "verify:" not in res.output
    # a maintainer who allows the data set and model by name lets it through validate
    conf = json.loads((board / "leaderboard.json").read_text())
    conf["verify_allow"] = {"datasets": ["tiny"], "models": ["centroid"]}
    (board / "leaderboard.json").write_text(json.dumps(conf))
    assert publish.steps.unloadable(board / "contributions" / "alice.db",
                                    publish_registry(), conf["verify_allow"]) is None


def test_the_refusal_names_the_distribution_its_run_recorded(board, tiny_db):
    """Issue 51, 1: the refusal named the plugin by its entry-point name only (the distribution
    to install appeared only when the board's requirements.txt already pinned it). A run now
    records the distribution of each plugin it loaded (runs.plugin_distributions), so the
    refusal says what to install; a stored name that is not a distribution name is not
    repeated (it would reach a pip command in the report)."""
    db = board / "contributions" / "alice.db"
    shutil.copyfile(tiny_db, db)

    def recorded(distribution):
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE runs SET plugin_versions = ?, plugin_distributions = ?",
                         (json.dumps({"tests.plugins.tiny": "0.3.0"}),
                          json.dumps({"tests.plugins.tiny": distribution})))
        return publish.validate(board).rejected["alice.db"]

    why = recorded("robench-tiny")
    assert ("from plugin 'tests.plugins.tiny' 0.3.0 (distribution 'robench-tiny': pip install "
            "'robench-tiny==0.3.0'), by its run's record") in why, why
    for hostile in ("x; rm -rf ~", "robench tiny", "-e .", "a" * 200):
        why = recorded(hostile)
        assert "distribution '" not in why and "pip install" not in why, why
        assert "plugin 'tests.plugins.tiny' 0.3.0, by its run's record" in why, why


def test_a_run_records_the_distribution_of_each_plugin_it_loaded(tmp_path):
    """What the refusal above reads: an entry point's distribution name, per loaded plugin."""
    from robench.plugins import PluginInfo, make_registry
    from robench.storage.store import Store

    registry = make_registry(load_entrypoints=False)
    registry.infos["corruption"] = PluginInfo("corruption", "0.1.0", source="entry point",
                                              distribution="robench-corruption")
    registry.infos["broken"] = PluginInfo("broken", "1.0", status="failed",
                                          distribution="robench-broken")
    assert registry.plugin_distributions() == {"corruption": "robench-corruption"}
    with Store(tmp_path / "r.db") as store:
        store.start_run(command="robench run", seed=0, config={},
                        plugin_versions=registry.plugin_versions(),
                        plugin_distributions=registry.plugin_distributions())
        assert store.runs()[0]["plugin_distributions"] == {"corruption": "robench-corruption"}


def publish_registry():
    from robench.plugins import make_registry

    return make_registry(load_entrypoints=False)


def test_verify_names_the_plugin_and_the_remedy_of_a_trial_it_cannot_re_run(tiny_db, tmp_path):
    """Issue 51, 1: ``robench verify`` without the contribution's plugin said "model 'x' is not
    installed here" per trial; it names the plugin the trial's run recorded and the remedy."""
    from robench.exchange.verify import missing, provider
    from robench.storage.store import Store

    db = tmp_path / "alice.db"
    shutil.copyfile(tiny_db, db)
    res = CliRunner().invoke(cli, ["verify", "--db", str(db), "--sample", "2"])
    assert res.exit_code == 2, res.output
    assert ("dataset 'tiny' is not installed here (from plugin 'tests.plugins.tiny' (no "
            "version), by its run's record); install the distribution that provides it here"
            in res.output), res.output
    assert "requirements.txt" in res.output and "Traceback" not in res.output
    registry = publish_registry()
    with Store(db, readonly=True) as store:
        plugins = store.runs()[0]["plugin_versions"]
        spec = next(t["spec"] for t in store.trials() if t["model"] == "centroid")
    # the plugin is told by the version its trial recorded, among those missing here
    assert provider("2.0/1", {**plugins, "other": "2.0"}, registry) == (
        "from plugin 'other' 2.0, by its run's record")
    assert provider("9.9/1", {"a": "1.0", "b": "2.0"}, registry) == (
        "from plugin 'a' 1.0 or plugin 'b' 2.0, by its run's record")
    assert provider("/1", {"robench.builtin.models": "0"}, registry) == (
        "no plugin its run recorded is missing here")
    assert missing(spec, registry) == "dataset 'tiny' is not installed here"  # no run known
