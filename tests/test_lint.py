"""The linter runs with the tests: `python -m pytest` (the README's test command) fails on a
ruff finding in robench/, tests/, plugins/ or benchmarks/ (rules in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["robench", "tests", "plugins", "benchmarks"]


def _ruff() -> list:
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists():
        pytest.fail("ruff is not installed: it is in the test extra (pip install -e '.[test]')")
    return [exe]


def test_ruff_finds_nothing():
    res = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", *TREES],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_would_catch_the_undefined_name_that_broke_the_sqlite_error_path(tmp_path):
    # the regression this linter was added for: a name used after the line that set it was gone
    bad = tmp_path / "bad.py"
    bad.write_text("def f(db):\n    if db:\n        if reason:\n            return reason\n")
    res = subprocess.run([*_ruff(), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                          str(bad)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "F821" in res.stdout
