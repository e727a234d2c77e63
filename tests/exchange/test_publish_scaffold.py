"""A leaderboard repository runs itself (robench.exchange.publish.scaffold): `robench
init-leaderboard` writes it from its templates (package data; the workflow passes real linters and
refuses a pull request outside contributions/ before installing), `robench publish` accepts an
honest contribution and rejects a tampered one, offline, with the reason; a failed init leaves
nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from robench.exchange import publish
from tests.exchange.boards import git


def robench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "robench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def example_board(tmp_path_factory):
    """A repository from `robench init-leaderboard` with its example contribution, published."""
    path = tmp_path_factory.mktemp("board") / "board"
    out = robench("init-leaderboard", path, "--title", "Test board", "--requirement", "robench",
                  "--allow-editable")
    assert out.returncode == 0, out.stderr
    for name in ("README.md", "leaderboard.json", "requirements.txt", ".gitignore",
                 ".github/workflows/leaderboard.yml", "published/robench.db",
                 "contributions/example.db"):
        assert (path / name).is_file(), name
    out = robench("publish", "run", path)
    assert out.returncode == 0, out.stdout + out.stderr
    return path


def test_init_leaderboard_passes_the_pipeline_on_its_own_example(example_board):
    assert (example_board / "site" / "index.html").is_file()
    assert [r["contributor"] for r in publish.accepted(example_board).values()] == ["example"]
    assert publish.pending(example_board) == []
    report = (example_board / ".staging" / "report.md").read_text()
    for step in ("validate: passed", "verify: passed", "diff: passed", "merge: passed",
                 "build: passed"):
        assert step in report
    workflow = (example_board / ".github" / "workflows" / "leaderboard.yml").read_text()
    for step in ("check", "run"):
        assert f"robench publish {step} ." in workflow  # every CI step is one command
    assert "actions/deploy-pages@" in workflow and "GITHUB_STEP_SUMMARY" in workflow
    assert workflow == publish.template("workflow.yml")  # package data, written as is
    again = robench("publish", "check", example_board)  # nothing pending: nothing to reject
    assert again.returncode == 0, again.stdout


def test_an_honest_contribution_is_accepted_and_a_tampered_one_rejected_with_the_reason(
        example_board, tmp_path):
    honest = example_board / "contributions" / "alice.db"
    out = robench("run", "-d", "digits", "-m", "svm", "--metric", "rho", "-r", "2", "--seed", "1",
                  "--db", honest, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    tampered = example_board / "contributions" / "mallory.db"
    shutil.copyfile(honest, tampered)
    conn = sqlite3.connect(tampered)  # better numbers than the trials really gave
    with conn:
        conn.execute("UPDATE trials SET accuracy = min(1.0, accuracy + 0.05)")
        conn.execute("UPDATE scores SET value = value + 0.05")
    conn.close()
    check = robench("publish", "check", example_board)
    assert check.returncode == 1
    report = (example_board / ".staging" / "report.md").read_text()
    assert "`mallory.db`: rejected." in report and "`alice.db`: rejected" not in report
    reason = report.split("`mallory.db`: rejected.**", 1)[1].splitlines()[0]
    assert "contradicts itself" in reason or "conflict" in reason or "recompute" in reason \
        or "reproduce" in reason, reason

    tampered.unlink()  # the maintainer drops it; alice's goes through
    run = robench("publish", "run", example_board)
    assert run.returncode == 0, run.stdout + run.stderr
    contributors = sorted(r["contributor"] for r in publish.accepted(example_board).values())
    assert contributors == ["alice", "example"]
    page = (example_board / "site" / "models.html").read_text()
    assert "alice (alice.db" in page  # provenance is the file name the maintainer accepted


def test_templates_are_package_data_and_the_repository_is_what_they_say(tmp_path):
    repo = tmp_path / "board"
    written = publish.init_repository(repo, title="Robust digits", requirement="robench",
                                      allow_editable=True)
    assert ".github/workflows/leaderboard.yml" in written
    workflow = (repo / ".github" / "workflows" / "leaderboard.yml").read_text()
    assert workflow == publish.template("workflow.yml") and "{{{{" not in workflow
    assert (repo / "README.md").read_text().startswith("# Robust digits\n")
    ignore = (repo / ".gitignore").read_text().split()
    assert {"*.db-shm", "*.db-wal", ".staging/", "site/"} <= set(ignore)
    # the published database is left in rollback-journal mode: reading it leaves no -shm/-wal
    db = repo / "published" / "robench.db"
    assert robench("results", "--db", db).returncode in (0, 1)
    assert sorted(p.name for p in db.parent.iterdir()) == ["accepted.json", "robench.db"]
    requirements = (repo / "requirements.txt").read_text().splitlines()
    import torch

    assert f"--extra-index-url {publish.TORCH_CPU_INDEX}" in requirements
    assert f"torch=={torch.__version__.partition('+')[0]}" in requirements
    assert "robench" in requirements
    import importlib.metadata as metadata

    for ep in metadata.entry_points(group="robench"):  # every installed plugin, versioned
        assert f"# plugin {ep.name} {ep.dist.version}" in requirements


def test_the_generated_workflow_passes_zizmor_and_the_workflow_schema(tmp_path):
    """Real linters on the workflow as written (zizmor and check-jsonschema: the test extra)."""
    zizmor, schema = shutil.which("zizmor"), shutil.which("check-jsonschema")
    assert zizmor and schema, "pip install -e '.[test]' installs zizmor and check-jsonschema"
    repo = tmp_path / "board"
    publish.init_repository(repo, requirement="robench", allow_editable=True)
    workflow = repo / ".github" / "workflows" / "leaderboard.yml"
    out = subprocess.run([zizmor, "--offline", "--min-severity", "low", "--format", "json",
                          str(workflow)], capture_output=True, text=True, timeout=120)
    findings = json.loads(out.stdout or "[]")
    assert findings == [], json.dumps(findings, indent=1)[:3000]
    out = subprocess.run([schema, "--builtin-schema", "vendor.github-workflows", str(workflow)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    text = workflow.read_text()
    assert "pull_request_target" not in text and "gh pr comment" not in text
    assert text.count("persist-credentials: false") == text.count("actions/checkout@")


@pytest.mark.parametrize("branch, refused", [("settings", True), ("honest", False)])
def test_the_workflow_refuses_a_pull_request_outside_contributions_before_installing(
        pull_requests, branch, refused):
    """The generated workflow's own step, run by bash on each pull request's checkout."""
    import subprocess

    import yaml

    board = pull_requests
    workflow = yaml.safe_load((board / ".github" / "workflows" / "leaderboard.yml").read_text())
    steps = workflow["jobs"]["check"]["steps"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    guard = next(i for i, n in enumerate(names) if n.startswith("Refuse a pull request"))
    assert guard < next(i for i, n in enumerate(names) if n.startswith("Install robench"))
    git(board, "checkout", "-q", branch)
    out = subprocess.run(["bash", "-e", "-c", steps[guard]["run"]], cwd=board, text=True,
                         capture_output=True, env={**os.environ,
                                                   "BASE_SHA": git(board, "rev-parse", "main")})
    assert (out.returncode != 0) == refused, out.stdout + out.stderr
    assert ("leaderboard.json" in out.stdout) == refused


def test_a_failed_init_leaderboard_leaves_nothing_and_can_be_retried(tmp_path):
    target = tmp_path / "board"

    def boom(folder):
        assert (folder / "leaderboard.json").is_file()
        raise RuntimeError("the example run failed")

    with pytest.raises(RuntimeError):
        publish.init_repository(target, requirement="robench", then=boom, allow_editable=True)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    publish.init_repository(target, requirement="robench", allow_editable=True)
    assert (target / "leaderboard.json").is_file()


def test_every_job_of_the_generated_workflow_has_a_time_limit(tmp_path):
    """Issue 51, 6: no `timeout-minutes`, so six slow contributions held a CI job for hours."""
    import yaml

    repo = tmp_path / "board"
    publish.init_repository(repo, requirement="robench", allow_editable=True)
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "leaderboard.yml").read_text())
    limits = {name: job.get("timeout-minutes") for name, job in workflow["jobs"].items()}
    assert set(limits) == {"check", "publish", "deploy"}
    assert all(isinstance(v, int) and 0 < v <= 120 for v in limits.values()), limits
    # the check's limit leaves room for the default verify budget (seconds) and the install
    assert limits["check"] * 60 > publish.DEFAULT_SETTINGS["verify_budget"]


class FakeDistribution:
    """An installed distribution as importlib.metadata gives it: a name, a version and how it
    was installed (direct_url.json)."""

    def __init__(self, name, version, direct_url):
        self.metadata = {"Name": name}
        self.version = version
        self._direct_url = direct_url

    def read_text(self, name):
        return json.dumps(self._direct_url) if name == "direct_url.json" else None


def fake_plugins(monkeypatch, source, editable: bool) -> None:
    """Make robench-my-model (entry point my-model) the one installed plugin."""
    from robench.exchange.publish import scaffold

    info = {"url": f"file://{source}", "dir_info": {"editable": True}} if editable else {}
    dist = FakeDistribution("robench-my-model", "0.1.0", info)
    monkeypatch.setattr(scaffold, "plugin_distributions", lambda: [
        {"plugin": "my-model", "name": "robench-my-model", "version": "0.1.0",
         "editable": str(source) if editable else None, "dist": dist}])


def test_init_leaderboard_lists_the_plugins_it_pins_and_how_to_add_one(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from robench.cli import cli

    fake_plugins(monkeypatch, tmp_path / "src", editable=False)
    board = tmp_path / "board"
    res = CliRunner().invoke(cli, ["init-leaderboard", str(board), "--no-example",
                                   "--requirement", "robench"])
    assert res.exit_code == 0, res.output
    assert "requirements.txt pins 1 plugin(s) for the runner:" in res.output
    assert "  my-model 0.1.0: robench-my-model==0.1.0" in res.output.splitlines()
    assert "To add a plugin later:" in res.output and "push that to main" in res.output
    lines = (board / "requirements.txt").read_text().splitlines()
    assert lines[-2:] == ["# plugin my-model 0.1.0", "robench-my-model==0.1.0"]
    assert publish.scaffold.pinned_plugins(board) == [
        ("my-model", "0.1.0", "robench-my-model==0.1.0")]


def test_init_leaderboard_refuses_an_editable_plugin_unless_asked(tmp_path, monkeypatch):
    """Issue 51, 1: every installed plugin was copied in, a developer's editable one included,
    without a word."""
    from click.testing import CliRunner

    from robench.cli import cli

    source = tmp_path / "robench-my-model"  # a working tree (no pyproject.toml: no wheel built)
    source.mkdir()
    fake_plugins(monkeypatch, source, editable=True)
    board = tmp_path / "board"
    res = CliRunner().invoke(cli, ["init-leaderboard", str(board), "--no-example",
                                   "--requirement", "robench"])
    assert res.exit_code == 2, res.output
    message = res.output.strip().splitlines()
    assert len(message) == 1 and "editable mode" in message[0], res.output
    assert "my-model (robench-my-model 0.1.0 from" in message[0]
    assert "--allow-editable" in message[0]
    assert not board.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "robench-my-model"]  # nothing left behind
    res = CliRunner().invoke(cli, ["init-leaderboard", str(board), "--no-example",
                                   "--requirement", "robench", "--allow-editable"])
    assert res.exit_code == 0, res.output
    assert "  my-model 0.1.0: robench-my-model==0.1.0" in res.output.splitlines()
