"""robench installs like a package: the built wheel, installed the ordinary way (not editable) in
a fresh virtual environment, runs the main job, builds the site and lists its plugins.

The environment reuses the packages of the environment the tests run in (torch is gigabytes;
nothing may be downloaded here): a ``.pth`` file puts that environment's site-packages after the
new one's (``--system-site-packages`` would give the base interpreter's, which need not hold
them: in a virtual environment like `.ci/run`'s it does not), and ``pip install --no-index`` so
a dependency that is not already installed fails instead of downloading. Python 3.11's venv
bundles an old setuptools that would shadow the installed one (torch needs >= 77), so it is
removed from the new environment. The wheel's robench must be the one that runs, not the
editable checkout (a path line of a ``.pth`` file adds the folder only: the editable install's
own ``.pth`` hooks in that folder are not run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, cwd, env, timeout=900):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the wheel, install it in a fresh venv; return (venv bin, clean env, work dir)."""
    tmp = tmp_path_factory.mktemp("package")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["ROBENCH_CACHE_DIR"] = str(tmp / "cache")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(tmp / "dist"), str(ROOT)], cwd=tmp, env=env)
    wheel, = (tmp / "dist").glob("robench-*.whl")
    _run([sys.executable, "-m", "venv", str(tmp / "venv")], tmp, env)
    bin_ = tmp / "venv" / "bin"
    new_site = _run([bin_ / "python", "-c",
                     "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).strip()
    here = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    Path(new_site, "robench_test_reuse.pth").write_text("".join(f"{p}\n" for p in here))
    subprocess.run([bin_ / "pip", "uninstall", "-y", "-q", "setuptools"], cwd=tmp, env=env,
                   capture_output=True)  # absent on Python >= 3.12: nothing to remove
    _run([bin_ / "pip", "install", "--no-index", "-q", str(wheel)], tmp, env)
    work = tmp / "work"
    work.mkdir()
    return bin_, env, work


def test_the_installed_wheel_is_the_robench_that_runs(installed):
    bin_, env, work = installed
    where = _run([bin_ / "python", "-c", "import robench; print(robench.__file__)"], work, env)
    assert str(bin_.parent) in where and str(ROOT) not in where, where


def test_the_wheel_runs_the_main_job_builds_the_site_and_lists_plugins(installed):
    bin_, env, work = installed
    out = _run([bin_ / "robench", "run", "-d", "digits", "-m", "mlp", "-r", "2"], work, env)
    assert " 0 failed" in out, out[-2000:]
    _run([bin_ / "robench", "leaderboard"], work, env)
    site = work / "leaderboard"
    for name in ("index.html", "style.css", "sort.js", "datasets/digits.html", "models/mlp.html"):
        assert (site / name).is_file(), name  # templates and static files are package data
    # the reference durations are package data too: a dry run elsewhere projects from them
    fresh = work / "fresh"
    fresh.mkdir()
    plan = _run([bin_ / "robench", "run", "--all", "--dry-run"], fresh, env)
    assert "robench's reference durations (" in " ".join(plan.split()), plan[-1500:]
    plugins = _run([bin_ / "robench", "plugins"], work, env)
    assert "robench.families.source_aware" in plugins and "robench.builtin.models" in plugins
    assert "failed" not in plugins.split("[builtin]")[0]


def _venv(where: Path, env) -> Path:
    """Make a venv that sees this environment's packages (see the module docstring)."""
    _run([sys.executable, "-m", "venv", str(where)], where.parent, env)
    bin_ = where / "bin"
    inner = _run([bin_ / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                 where.parent, env).strip()
    outer = sysconfig.get_paths()["purelib"]
    Path(inner, "zz_outer_site.pth").write_text(f"import site; site.addsitedir({outer!r})\n")
    subprocess.run([bin_ / "pip", "uninstall", "-y", "-q", "setuptools"], cwd=where.parent,
                   env=env, capture_output=True)
    return bin_


def test_the_leaderboards_install_step_installs_the_robench_that_wrote_it(installed):
    """init-leaderboard, run from the installed wheel, names that wheel (copied beside the
    workflow) in requirements.txt; the workflow's install step, offline (--no-index), installs
    it and the plugins in a fresh venv, where that robench runs and finds its templates."""
    bin_, env, work = installed
    board = work / "board"
    # the test environment's plugins are editable installs: pinned as wheels of their trees
    _run([bin_ / "robench", "init-leaderboard", str(board), "--no-example", "--allow-editable"],
         work, env)
    requirements = (board / "requirements.txt").read_text()
    wheel, = (board / "wheels").glob("robench-*.whl")
    assert f"./wheels/{wheel.name}" in requirements.splitlines(), requirements
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    workflow = (board / ".github" / "workflows" / "leaderboard.yml").read_text()
    step = "pip install -r requirements.txt"
    assert workflow.count(f"run: {step}") == 2
    runner = _venv(work / "runner", env)
    _run([runner / "python", "-m", *step.split()[:2], "--no-index", "-q",
          *step.split()[2:]], board, env)
    where = _run([runner / "python", "-c", "import robench; print(robench.__file__)"], board, env)
    assert str(work / "runner") in where, where
    out = _run([runner / "robench", "publish", "check", "."], board, env)
    assert "validate: ok" in out
