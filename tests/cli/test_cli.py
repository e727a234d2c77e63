"""The CLI end to end through click's runner on a tiny configuration."""

import hashlib
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from robench.cli import cli


@pytest.fixture
def runner():
    return CliRunner()


def run(runner, *args):
    return runner.invoke(cli, list(args), catch_exceptions=False)


TINY = ["-d", "tiny", "-m", "centroid", "-c", "kmeans", "-k", "3", "-r", "2",
        "--executor", "local", "--metric", "rho", "--metric", "lost-test"]


def test_run_results_query_leaderboard(runner, tiny_registry, tmp_path):
    db = str(tmp_path / "r.db")
    res = run(runner, "run", *TINY, "--db", db, "-v")
    assert res.exit_code == 0, res.output
    assert "tiny - sources by kmeans: ranked by rho" in res.output
    assert "6 trials planned" in res.output and "centroid" in res.output

    res = run(runner, "run", *TINY, "--db", db)
    assert res.exit_code == 0
    assert "training nothing" in res.output and "0 run" in res.output

    res = run(runner, "results", "--db", db, "--format", "json")
    data = json.loads(res.output)
    assert {"dataset", "model", "clusterer", "metric", "value", "ci_low", "ci_high", "n"} <= set(data[0])
    rho = [d for d in data if d["score"] == "rho"][0]
    assert rho["dataset"] == "tiny" and rho["n"] == 2 and 0 < rho["value"] <= 1.5

    res = run(runner, "results", "--db", db, "--format", "csv", "--metric", "rho")
    assert res.output.splitlines()[0].startswith("dataset,model,clusterer,metric,score,value")
    assert "tiny" in run(runner, "results", "--db", db).output

    res = run(runner, "query", "select count(*) as n from trials", "--db", db, "--format", "json")
    assert json.loads(res.output) == [{"n": 6}]

    out = tmp_path / "site"
    res = run(runner, "leaderboard", "--db", db, "--out", str(out))
    assert res.exit_code == 0 and (out / "index.html").exists()
    assert "centroid" in "".join(p.read_text() for p in out.rglob("*.html"))


def test_query_refuses_writes_and_changes_nothing(runner, tiny_registry, tmp_path):
    db = tmp_path / "r.db"
    run(runner, "run", *TINY, "--db", str(db))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for sql in ["delete from trials", "drop table scores", "update scores set value = 1",
                "insert into runs (status) values ('x')"]:
        res = runner.invoke(cli, ["query", sql, "--db", str(db)])
        assert res.exit_code == 2, sql
        assert "read-only" in res.output
        assert "Traceback" not in res.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    res = run(runner, "query", "select count(*) from trials", "--db", str(db))
    assert "6" in res.output


def test_unknown_names_exit_2_with_known_names_and_closest_match(runner, tiny_registry, tmp_path):
    db = tmp_path / "r.db"
    res = runner.invoke(cli, ["run", "-d", "digts", "--db", str(db)])
    assert res.exit_code == 2
    assert "unknown dataset 'digts'" in res.output and "Did you mean 'digits'?" in res.output
    assert "mnist-5k" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["run", "--all", "--metric", "rh", "--db", str(db)])
    assert res.exit_code == 2 and "Did you mean 'rho'?" in res.output
    res = runner.invoke(cli, ["run", "--all", "--executor", "slurm", "--db", str(db)])
    assert res.exit_code == 2 and "local" in res.output and "process" in res.output
    assert not db.exists(), "bad input is refused before anything is opened or written"


def test_oracle_by_name_on_data_without_sources_is_a_clear_error(runner, tiny_registry, tmp_path):
    res = runner.invoke(cli, ["run", "-d", "tiny-nosrc", "-c", "oracle", "-m", "centroid",
                              "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 2
    assert "clusterer 'oracle' cannot run" in res.output and "has none" in res.output


def test_all_lists_skipped_combinations_and_does_not_fail_on_them(runner, tiny_registry, tmp_path):
    res = run(runner, "run", "-d", "tiny-nosrc", "-m", "centroid", "-k", "3", "-r", "1",
              "--executor", "local", "--db", str(tmp_path / "r.db"))
    assert res.exit_code == 0, res.output
    assert "3 combination(s) skipped as not applicable (-v lists why)" in " ".join(
        res.stdout.split())
    assert "Skipped (not applicable" not in res.output  # the list is behind -v
    res = run(runner, "run", "-d", "tiny-nosrc", "-m", "centroid", "-k", "3", "-r", "1",
              "--executor", "local", "--db", str(tmp_path / "r.db"), "--verbose")
    assert res.exit_code == 0, res.output
    assert "Skipped (not applicable" in res.output and "oracle" in res.output
    opt_in = [l for l in res.output.splitlines() if l.startswith("Opt-in, not run")]
    assert opt_in and "multicut" in opt_in[0] and "metrics:" not in opt_in[0]


def test_failed_trials_give_exit_code_1_and_are_listed(runner, tiny_registry, tmp_path):
    res = runner.invoke(cli, ["run", "-d", "tiny", "-m", "boom", "-m", "centroid", "-c", "kmeans",
                              "-k", "3", "-r", "1", "--executor", "local",
                              "--metric", "rho", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 1
    assert "3 trial(s) failed" in res.output and "boom: this model always fails" in res.output
    assert "centroid" in res.output
    # one line per model and error, with the count and the trials, not one per trial
    failed = [l for l in res.output.splitlines() if "this model always fails" in l]
    assert len(failed) == 1, failed
    assert failed[0].startswith("  tiny/boom: 3 trial(s) (kmeans exclusive #0; "
                                "kmeans inclusive #0; random #0): RuntimeError: boom")


def test_failures_are_grouped_by_where_and_error_most_first():
    from robench.cli.run import failure_groups

    rows = [{"dataset": "d", "model": m, "clusterer": "kmeans", "kind": k, "repeat": r,
             "error": e} for m, k, r, e in [
                 ("a", "inclusive", 0, "ValueError: x\ntraceback"), ("a", "exclusive", 1,
                                                                     "ValueError: x\nother"),
                 ("b", "inclusive", 0, "KeyError: y"), ("a", "random", 0, "KeyError: y")]]
    groups = failure_groups(rows)
    assert [(w, e, len(t)) for w, e, t in groups] == [
        ("d/a", "ValueError: x", 2), ("d/a", "KeyError: y", 1), ("d/b", "KeyError: y", 1)]


def test_list_says_opt_in_once_and_warns_about_plugins_that_failed(runner, monkeypatch):
    import importlib.metadata

    from robench.plugins import set_registry

    res = runner.invoke(cli, ["list", "models"])
    assert res.exit_code == 0
    assert "(opt-in: slow) (opt-in)" not in res.output and "(opt-in: slow)" in res.output

    class Broken:
        name, dist = "broken-plugin", None

        def load(self):
            raise ImportError("No module named 'missing_dep'")

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [Broken()] if group == "robench" else [])
    monkeypatch.delattr("sys._robench_called_from_test")
    set_registry(None)
    try:
        res = runner.invoke(cli, ["list", "models"])
    finally:
        set_registry(None)
    assert res.exit_code == 0
    assert "warning: plugin 'broken-plugin' failed to load" in res.output
    assert "missing_dep" in res.output and "mlp" in res.output


def test_run_needs_a_selection(runner, tiny_registry, tmp_path):
    res = runner.invoke(cli, ["run", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 2 and "--all" in res.output


def test_results_without_a_database_is_a_clear_error(runner, tmp_path):
    res = runner.invoke(cli, ["results", "--db", str(tmp_path / "none.db")])
    assert res.exit_code == 2 and "robench run" in res.output
    assert not (tmp_path / "none.db").exists()


def test_list_and_plugins(runner, tiny_registry):
    res = run(runner, "list", "models")
    assert "cnn-2" in res.output and "centroid" in res.output
    res = run(runner, "list")
    for kind in ("datasets:", "models:", "clusterers:", "metrics:", "executors:"):
        assert kind in res.output
    res = run(runner, "plugins")
    assert "robench.builtin.models" in res.output and "tests.plugins.tiny" in res.output
    assert "models: svm, mlp, cnn-1, cnn-2, cnn-3" in res.output


def test_help_has_examples_for_every_command(runner):
    for cmd in ["run", "results", "query", "leaderboard", "list", "plugins"]:
        res = run(runner, cmd, "--help")
        assert "Example" in res.output, cmd


def test_cli_start_up_does_not_import_heavy_libraries():
    code = ("import sys; from click.testing import CliRunner; from robench.cli import cli; "
            "r = CliRunner().invoke(cli, ['list']); assert r.exit_code == 0, r.output; "
            "heavy = [m for m in ('torch', 'sklearn', 'scipy', 'ot', 'timm') if m in sys.modules]; "
            "print(heavy); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_skips_are_grouped_by_reason_naming_what_the_reason_does_not(capsys):
    from robench.cli.common import print_skips as _print_skips

    reason_ds = "clusterer 'oracle' needs true source ids and data set 'digits' has none"
    reason_m = "metric 'coverage' needs a learned feature space and model 'svm' declares none"
    _print_skips([
        {"metric": "rho", "dataset": "digits", "model": "mlp", "reason": reason_ds},
        {"metric": "rho", "dataset": "digits", "model": "svm", "reason": reason_ds},
        {"metric": "coverage", "dataset": "digits", "model": "svm", "reason": reason_m},
        {"metric": "coverage", "dataset": "mnist-5k", "model": "svm", "reason": reason_m},
    ])
    out = capsys.readouterr().out.splitlines()
    assert out[2] == f"  rho: {reason_ds} (models: mlp, svm)"
    assert out[3] == f"  coverage: {reason_m} (data sets: digits, mnist-5k)"


def test_until_decided_prints_the_level_and_why_each_table_stopped(runner, tiny_registry,
                                                                   tmp_path):
    db = str(tmp_path / "r.db")
    args = ["-d", "tiny", "-m", "centroid", "-m", "spy", "-c", "kmeans", "-k", "3", "-r", "12",
            "--executor", "local", "--db", db, "--metric", "rho"]
    res = runner.invoke(cli, ["run", *args, "--until", "decided", "--precision", "1e-9", "-v"])
    assert res.exit_code == 0, res.output
    from robench.stats.sequential import look_alphas

    level = 1 - look_alphas([6, 9, 12], 12, 0.05, "pocock")[0]  # the first look's
    said = " ".join(res.output.split())  # wrapped
    assert ("adaptive repeats (--until decided, alpha spent across a look at every complete "
            f"cycle (pocock), the stopping look's alpha {1 - level:.4f}), R = repeats used"
            ) in said
    assert ("a look at 6, 9, 12 repeats, alpha 0.05 spent across them (pocock); each table's "
            "tests and intervals above at the level of the look it stopped at") in said
    # one label for the interval, the stopping look's level, in the report and the summary
    assert res.output.count(f"{100 * level:.3g}% CI") == 2
    # centroid and spy are one model under two names: equivalent at the first look (30
    # trials: 6 exclusive, 6 inclusive, 3 random-split a model)
    assert ("tiny / kmeans: every pair equivalent within the precision (level "
            f"{100 * level:.3g}%); repeats of at most 12: centroid 6, spy 6 (30 trials)"
            ) in res.output
    assert "centroid ~ spy   (> ordered, ~ equivalent, ? undecided)" in res.output
    assert "rank intervals: centroid 1-2, spy 1-2" in res.output
    bad = runner.invoke(cli, ["run", *args, "--precision", "0.1"])
    assert bad.exit_code == 2 and "--precision goes with --until decided" in bad.output
    bad = runner.invoke(cli, ["run", *args, "--until", "decided", "--precision", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_version_lists_robench_and_every_installed_plugin_with_its_version(tiny_registry):
    from click.testing import CliRunner

    from robench import __version__
    from robench.cli import cli

    out = CliRunner().invoke(cli, ["--version"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == f"robench {__version__}"
    assert any(line.strip().startswith("tests.plugins.tiny ") for line in lines[1:]), out.output
    assert not any("robench.builtin" in line for line in lines), "built-ins are robench itself"


@pytest.mark.parametrize("typed, meant", [
    ("db", ["query", "results", "migrate"]), ("reslts", ["results"]), ("sql", ["query"]),
    ("leaderbord", ["leaderboard"]), ("lst", ["list"]),
])
def test_an_unknown_command_is_answered_with_the_closest_names(runner, typed, meant):
    res = runner.invoke(cli, [typed])
    assert res.exit_code == 2 and "Traceback" not in res.output
    error = next(line for line in res.output.splitlines() if line.startswith("Error:"))
    said = error.split("Did you mean ", 1)[1].split("?")[0]
    assert [n.strip("' ,") for n in said.replace(" or ", ", ").split(", ")][:len(meant)] == meant
    assert "Commands: " in error and "run" in error.split("Commands: ")[1]


def test_an_unknown_command_with_nothing_close_lists_the_commands(runner):
    res = runner.invoke(cli, ["xyzzy"])
    assert res.exit_code == 2 and "Did you mean" not in res.output
    assert "No such command 'xyzzy'. Commands: " in res.output


def test_query_help_names_every_table_and_view_of_the_database(runner, tmp_path):
    """The help's list is the schema's: the tables and views a new database really has."""
    import re
    import sqlite3

    from robench.storage.store import Store

    Store(tmp_path / "r.db").close()
    conn = sqlite3.connect(tmp_path / "r.db")
    real = {kind: sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%'", (kind,)))
        for kind in ("table", "view")}
    conn.close()
    text = " ".join(runner.invoke(cli, ["query", "--help"]).output.split())
    found = re.search(r"Tables: (.*?); views: (.*?)\. ", text)
    assert found, text
    assert sorted(found.group(1).split(", ")) == real["table"]
    assert sorted(found.group(2).split(", ")) == real["view"]
    assert len(real["table"]) + len(real["view"]) >= 15


def test_the_run_help_names_no_metric_but_those_the_registry_says_race(tiny_registry):
    """The run command's own text names no metric family (issue 48); which metrics race is
    read from the registered metrics (those that declare a paired comparison)."""
    import re

    from robench.run.adaptive import racing_metrics

    res = CliRunner().invoke(cli, ["run", "--help"], terminal_width=100)
    assert res.exit_code == 0, res.output
    own, _, rest = res.output.partition("What each profile changes from")
    families = re.compile(r"\b(rho|purity|coverage|shifted|adequacy|lost-test|mce)\b", re.I)
    assert not families.findall(own), families.findall(own)
    racing = " ".join(rest.split("Metrics that race (--until decided, --budget):")[1].split())
    # each with the equivalence margin its metric module declares (PairedComparison.margin)
    assert racing == ", ".join(
        f"{m} (equivalence margin {tiny_registry.get('metrics', m).paired.margin:g})"
        for m in racing_metrics(tiny_registry))
    assert "rho" in racing_metrics(tiny_registry)
