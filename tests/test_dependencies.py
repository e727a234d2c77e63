"""Every third-party module the code, the tests and the benchmarks import is declared.

A module that happens to be installed (by this machine's image, or as a dependency of a
dependency) makes the suite pass here and fail on a stranger's machine, at collection. This
test reads every import (``import x``, ``from x import y``, ``pytest.importorskip("x")``,
``importlib.import_module("x")``) under robench/, tests/, benchmarks/, docs/ and each
plugins/NAME/, keeps the third-party ones, maps each to the distribution that provides it
and asserts that distribution is named in the right pyproject.toml: robench's own (main
dependencies or any extra) for robench, its tests, benchmarks and docs; the plugin's own for
a plugin's code and tests. An import inside ``try: ... except ImportError`` is optional by
design and is not required.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")

ROOT = Path(__file__).resolve().parents[1]

#: Import name -> distribution, for modules whose distribution may not be installed where
#: this runs (packages_distributions() only knows installed ones) or is not named like them.
KNOWN = {
    "PIL": "pillow", "cv2": "opencv-python", "skimage": "scikit-image",
    "sklearn": "scikit-learn", "ot": "pot", "art": "adversarial-robustness-toolbox",
    "bioimage_cpp": "bioimage-cpp", "yaml": "pyyaml", "_pytest": "pytest",
    "imagecorruptions": "imagecorruptions-imaug", "axe_playwright_python": "axe-playwright-python",
    "huggingface_hub": "huggingface-hub", "bayesian_torch": "bayesian-torch",
    "sqlite_utils": "sqlite-utils",
}  # fmt: skip


def normalize(name: str) -> str:
    """Return a distribution name in PEP 503 normal form."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, list[str]]:
    """Return (normalized name, extras) of a PEP 508 requirement string."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", text)
    assert match, f"not a requirement: {text!r}"
    extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
    return normalize(match.group(1)), extras


def declared(pyproject: Path) -> set[str]:
    """Return every distribution a pyproject.toml declares (main dependencies and all extras),
    with what a declared extra (``dask[distributed]``) brings where that is installed."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    names = set()
    for text in requirements:
        name, extras = _requirement(text)
        names.add(name)
        try:
            brought = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for req in brought:
            marker = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
            if marker and marker.group(1) in extras:
                names.add(_requirement(req)[0])
    return names


def _guarded(tree: ast.AST) -> set[int]:
    """Return the ids of import nodes inside a ``try`` that catches ImportError."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {k.id for k in kinds if isinstance(k, ast.Name)}
        if caught & {"ImportError", "ModuleNotFoundError"}:
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports(path: Path) -> set[str]:
    """Return the top-level module names ``path`` imports unconditionally (absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    optional = _guarded(tree)
    names = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("importorskip", "import_module") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return {name.split(".")[0] for name in names}


def local_names(folder: Path) -> set[str]:
    """Return the module names a folder's own files provide (scripts and packages in it, at
    any depth: benchmarks import each other, tests import a benchmark by its file name)."""
    names = {p.stem for p in folder.rglob("*.py")}
    names |= {p.parent.name for p in folder.rglob("__init__.py")}
    return names


def undeclared(files, pyproject: Path, own: set[str], root: Path = ROOT) -> dict[str, list[str]]:
    """Return {distribution or module: [files importing it]} for what ``pyproject`` lacks."""
    found = declared(pyproject)
    providers = importlib.metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for path in files:
        for name in imports(path) - own:
            if name in sys.stdlib_module_names or name == "__future__":
                continue
            dists = {normalize(d) for d in providers.get(name, [])}
            if name in KNOWN:
                dists.add(normalize(KNOWN[name]))
            if not dists:  # not installed and not known: its import name is our best guess
                dists = {normalize(name)}
            if not dists & found:
                key = "/".join(sorted(dists))
                missing.setdefault(key, []).append(str(path.relative_to(root)))
    return missing


def _report(missing: dict, pyproject: Path) -> str:
    return (f"imported but not declared in {pyproject.relative_to(ROOT)} (dependencies or an "
            "extra): " + "; ".join(f"{d} (by {', '.join(sorted(set(f))[:3])})"
                                   for d, f in sorted(missing.items())))


PLUGINS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def test_robench_tests_benchmarks_and_docs_import_only_what_robench_declares():
    folders = [ROOT / d for d in ("robench", "tests", "benchmarks", "docs")]
    files = [p for folder in folders for p in folder.rglob("*.py")]
    assert len(files) > 100  # the walk found the code
    own = {"robench", "tests"} | local_names(ROOT / "benchmarks") | local_names(ROOT / "tests")
    # the first-party plugins' packages: tests/contract imports the template it checks
    own |= {name for plugin in PLUGINS for name in local_names(plugin)}
    missing = undeclared(files, ROOT / "pyproject.toml", own)
    assert not missing, _report(missing, ROOT / "pyproject.toml")


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_each_plugin_declares_what_it_imports(plugin):
    files = sorted(plugin.rglob("*.py"))
    assert files
    # robench itself is not "own" here: the plugin must declare it like any dependency
    missing = undeclared(files, plugin / "pyproject.toml", local_names(plugin) - {"robench"})
    assert not missing, _report(missing, plugin / "pyproject.toml")


def test_the_check_catches_an_undeclared_import(tmp_path):
    """The control: a file importing a package no pyproject declares is reported; the same
    import guarded by ``except ImportError`` is not."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["numpy>=1"]\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\n', encoding="utf-8")
    code = tmp_path / "mod.py"
    code.write_text("import numpy\nimport pytest\nimport hypothesis\nfrom PIL import Image\n"
                    "import json\n", encoding="utf-8")
    found = imports(code)
    assert found == {"numpy", "pytest", "hypothesis", "PIL", "json"}
    missing = undeclared([code], tmp_path / "pyproject.toml", set(), root=tmp_path)
    assert set(missing) == {"hypothesis", "pillow"}, missing
    code.write_text("try:\n    import hypothesis\nexcept ImportError:\n    hypothesis = None\n"
                    "import numpy\n", encoding="utf-8")
    assert undeclared([code], tmp_path / "pyproject.toml", set(), root=tmp_path) == {}


def test_ci_runs_the_readme_test_command_in_a_fresh_environment_of_its_own():
    """`.ci/run` runs the README's test command verbatim, inside a virtual environment it
    creates without the system's site-packages (where an undeclared package would be found)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    command, = [b.strip() for b in blocks if b.strip().endswith("python -m pytest")]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in script.splitlines()]
    assert "set -euo pipefail" in lines
    venv = [line for line in lines if re.search(r"-m venv\b", line)]
    assert venv and not any("system-site-packages" in line for line in venv), venv
    assert any(line.startswith(". ") and "bin/activate" in line for line in lines)
    steps = [i for i, line in enumerate(lines) if line == command]
    assert steps, f"the README's test command is not a line of .ci/run: {command}"
    assert lines.index(venv[0]) < steps[0]  # ... and it runs inside the new environment
