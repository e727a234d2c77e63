"""Meta-tests (after datasette's): every hook is documented, and every hook has a test."""

import ast
import re
from pathlib import Path

import pytest

from robench import hookspecs

ROOT = Path(__file__).resolve().parents[2]
HOOK_DOCS = ROOT / "docs" / "plugin-hooks.md"
TESTS = Path(__file__).resolve().parents[1]

HOOKS = sorted(name for name, fn in vars(hookspecs).items() if hasattr(fn, "robench_spec"))


def test_hookspecs_are_found():
    assert "register_models" in HOOKS and len(HOOKS) >= 4


def _headings() -> set:
    """Return the names of the hook headings of the docs: ``### `name(args)` ``."""
    heads = re.findall(r"^#{2,4}\s+`?([a-z_]+)\(", HOOK_DOCS.read_text(), flags=re.MULTILINE)
    return set(heads)


def _test_function_names() -> set:
    names = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
    return names


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook):
    assert hook in _headings(), f"docs/plugin-hooks.md needs a heading '### `{hook}(...)`'"


def test_documented_hooks_exist():
    extra = _headings() - set(HOOKS)
    assert not extra, f"docs/plugin-hooks.md documents hooks robench does not define: {extra}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test(hook):
    names = _test_function_names()
    assert any(n == f"test_{hook}" or n.startswith(f"test_{hook}_") for n in names), (
        f"no test named test_{hook}... in tests/"
    )
