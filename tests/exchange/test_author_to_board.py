"""A plugin author's path, as CONTRIBUTING.md tells it, end to end (issue 51): the template copied
and renamed, the walk-through's files written, the plugin released as a wheel and installed,
a run, a pull request a board without the plugin refuses at validate in one line naming the
plugin and the remedy, the maintainer adding the wheel, then the local check and the published
page that shows the model.

Every robench command runs as a separate process, as a user runs it, so installed plugins are
found by their entry points (the test processes never load them). "Installed" is the wheel
unpacked into a folder on the path of those processes: what pip does with a pure-Python wheel,
offline. The run is shrunk (rho only, 2 repeats, 2 epochs, one clusterer) to keep it minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from robench.exchange.publish.scaffold import pinned_plugins
from tests.contract.test_contributing import snippets
from tests.exchange.boards import report_text
from tests.reliability.cli import ROOT, run

TEMPLATE = ROOT / "plugins" / "robench-template"
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
RUN = ["run", "-d", "digits", "-m", "my-model", "--metric", "rho", "-c", "kmeans", "-r", "2",
       "--set", "train.max_epochs=2"]


def _bash_blocks(section: str) -> str:
    """Return the text of CONTRIBUTING.md's section ``section`` (to the next ## heading)."""
    start = CONTRIBUTING.index(f"## {section}")
    end = CONTRIBUTING.find("\n## ", start + 3)
    return CONTRIBUTING[start:end if end > 0 else None]


def copy_and_rename(folder: Path) -> Path:
    """Step 1 of "Contribute a model plugin" (its commands, and the lines marked CHANGE)."""
    steps = _bash_blocks("Contribute a model plugin")
    for command in ("cp -r plugins/robench-template plugins/robench-my-model",
                    "mv robench_template robench_my_model",
                    "mv tests/test_template.py tests/test_my_model.py", "rm TEMPLATE.md"):
        assert command in steps, command
    plugin = folder / "robench-my-model"
    shutil.copytree(TEMPLATE, plugin, ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info", "build", "dist"))
    (plugin / "robench_template").rename(plugin / "robench_my_model")
    (plugin / "tests" / "test_template.py").rename(plugin / "tests" / "test_my_model.py")
    (plugin / "TEMPLATE.md").unlink()
    project = plugin / "pyproject.toml"
    text = project.read_text(encoding="utf-8")
    for pattern, line in ((r'^name = .*CHANGE.*$', 'name = "robench-my-model"'),
                          (r'^version = .*CHANGE.*$', 'version = "0.1.0"'),
                          (r'^template = "robench_template".*CHANGE.*$',
                           'my-model = "robench_my_model"'),
                          (r'^include = \["robench_template\*"\].*CHANGE.*$',
                           'include = ["robench_my_model*"]')):
        text, n = re.subn(pattern, line, text, flags=re.M)
        assert n == 1, f"the template's pyproject.toml has no line to change for {line!r}"
    project.write_text(text, encoding="utf-8")
    # step 2: net.py replaces cnn.py; the package's __init__.py as the walk-through writes it
    (plugin / "robench_my_model" / "cnn.py").unlink()
    for path, code in snippets().items():
        (plugin / path).write_text(code, encoding="utf-8")
    return plugin


def release(plugin: Path, folder: Path) -> Path:
    """"Release the plugin" as a wheel (what ``python -m build`` writes; built offline)."""
    dist = folder / "dist"
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                          "--no-build-isolation", "--no-index", "-q", "-w", str(dist),
                          str(plugin)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel, = dist.glob("*.whl")
    assert wheel.name == "robench_my_model-0.1.0-py3-none-any.whl"  # the name the docs give
    assert f"dist/{wheel.name}" in CONTRIBUTING
    return wheel


def install(wheel: Path, site: Path) -> dict:
    """``pip install WHEEL``: unpacked into ``site``; return the environment that has it."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return {"PYTHONPATH": os.pathsep.join(
        p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH")) if p)}


@pytest.mark.slow(reason="a plugin built and installed, a run, a board's check with re-runs and "
                  "its site: ~2-4 min on 2 busy cores")
def test_a_plugin_author_following_contributing_reaches_a_published_page(tmp_path, board):
    plugin = copy_and_rename(tmp_path)
    wheel = release(plugin, tmp_path)
    installed = install(wheel, tmp_path / "site-packages")

    # "robench plugins" sees it by its entry point (step 4)
    out = run(["plugins"], tmp_path, env=installed)
    assert out.returncode == 0 and re.search(r"my-model\s+0\.1\.0", out.stdout), out.stdout

    # step 2 of "From a plugin to a leaderboard": run with the release installed
    board_steps = _bash_blocks("From a plugin to a leaderboard")
    assert "robench run -d digits -m my-model --db alice.db" in board_steps
    out = run([*RUN, "--db", tmp_path / "alice.db"], tmp_path, env=installed, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]

    # step 5: the pull request; a runner without the plugin refuses it at validate, one line
    shutil.copyfile(tmp_path / "alice.db", board / "contributions" / "alice.db")
    out = run(["publish", "check", board], tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "validate: FAILED" in out.stdout and "verify:" not in out.stdout
    refusal = next(line for line in report_text(board).splitlines() if "rejected" in line)
    quoted = re.search(r"`cannot load \(not installed here\): (.*?)`\.", board_steps, re.S)
    assert quoted, "CONTRIBUTING.md quotes the refusal"
    head = " ".join(quoted[1].split()).split(" ...")[0].split(";")[0]
    assert head in refusal.replace("\\", ""), (head, refusal)  # the words the docs quote
    assert "wheels/" in refusal and "requirements.txt" in refusal
    # the distribution to install, as the run recorded it from the plugin's entry point
    assert "distribution 'robench-my-model'" in refusal.replace("\\", ""), refusal

    # step 4: the maintainer adds the wheel and its line (a push to main); the runner has it
    (board / "wheels").mkdir(exist_ok=True)
    shutil.copyfile(wheel, board / "wheels" / wheel.name)
    line = f"./wheels/{wheel.name}"
    assert line in board_steps
    with (board / "requirements.txt").open("a", encoding="utf-8") as f:
        f.write(f"# plugin my-model 0.1.0\n{line}\n")
    assert ("my-model", "0.1.0", line) in pinned_plugins(board)  # as init-leaderboard pins

    # "Check it locally first", as the runner will
    for command in ("robench publish check .", "robench publish run ."):
        assert command in board_steps, command
    out = run(["publish", "check", "."], board, env=installed, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    out = run(["publish", "run", "."], board, env=installed, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    page = (board / "site" / "models" / "my-model.html").read_text(encoding="utf-8")
    assert "<h1>Model: my-model</h1>" in page
    assert "My MLP: two ReLU hidden layers of 64" in page  # its ModelSpec's description
    assert "verified" in page.lower()
    assert 'href="models/my-model.html"' in (board / "site" / "index.html").read_text()
