"""The layout rules of docs/architecture.md, enforced on the source (ast; imports inside
functions count as much as those at the top of a module; imports under ``if TYPE_CHECKING:``
are annotations, not dependencies, and do not count).

1. No import cycles between robench's modules. A package's ``__init__`` re-exporting its own
   descendants (``robench.evaluate``, ``robench.data.SourceExclusiveSplit``) is not an edge: it
   adds no dependency of the package's code, only a shorter name.
2. The core (everything outside ``robench/families``) imports no family.
3. No family imports another family.
4. No private name (``_x``) is imported from another module, in robench and plugins/.
5. Every module is named in docs/architecture.md (by its path below ``robench/``).
6. The rooms form an order (:data:`ROOMS`, bottom first) and no module imports a module of a
   room above its own.
7. Every import of a robench module names a module that exists (robench 0.1's flat paths are
   gone: ``import robench.cache`` is refused here, not forwarded).
8. Imports sit at the top of a module. An import inside a function is allowed only where it
   defers a heavy library (:data:`HEAVY`) or a robench module that loads one when imported (so
   ``robench --help``, the runner and the store start without them), or where :data:`DEFERRED`
   names the reason; of other libraries only the slow or optional ones (:data:`DEFERRABLE`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "robench"
FAMILIES = "robench.families"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_nodes(tree: ast.AST):
    """Yield every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, name: str, known: set) -> list[tuple[str, list[str]]]:
    """Return [(imported module, [imported names])] for every import statement in the file."""
    return imports_of_tree(ast.parse(path.read_text(), str(path)), path, name, known)


def imports_of_tree(tree: ast.AST, path: Path, name: str, known: set) -> list:
    """Return [(imported module, [imported names])] for every import statement in ``tree``."""
    is_package = path.name == "__init__.py"
    found = []
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = [alias.name for alias in node.names]
            found.append((target, names))
            # `from robench.data import sklearn_splitters` imports a module, not a name
            found += [(f"{target}.{n}", []) for n in names if f"{target}.{n}" in known]
    return found


def scan(root: Path, top: str = "robench") -> dict[str, list[tuple[str, list[str]]]]:
    """Return {module: [(imported module, names)]} for every module under ``root/top``."""
    paths = {module_name(p, root): p for p in (root / top).rglob("*.py")}
    known = set(paths)
    return {name: imports_of(path, name, known) for name, path in sorted(paths.items())}


def graph(modules: dict) -> dict[str, set]:
    """Return the internal import graph, package re-export edges left out (rule 1)."""
    known = set(modules)
    edges = {}
    for name, imported in modules.items():
        targets = set()
        for target, _ in imported:
            while target and target not in known:  # `robench.x.Name` -> robench.x
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            if target.startswith(name + "."):  # a package re-exporting its own descendant
                continue
            targets.add(target)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set]) -> list[list[str]]:
    """Return the strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def family_of(module: str):
    if module.startswith(FAMILIES + "."):
        return module.split(".")[2]
    return None


def forbidden_family_imports(edges: dict[str, set]) -> list[str]:
    """Return 'a -> b' for every core-to-family and family-to-family import (rules 2 and 3)."""
    bad = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            own, theirs = family_of(source), family_of(target)
            if theirs is not None and own != theirs and source != FAMILIES:
                bad.append(f"{source} -> {target}")
    return bad


#: The rooms, bottom first: a module may import its own room and the rooms below it, never a
#: room above it. A module belongs to the room of its longest matching prefix.
ROOMS = (
    ("ground", ("robench", "robench.errors", "robench.escaping", "robench.specs",
                "robench.metric_kit", "robench.hookspecs", "robench.stats", "robench.process")),
    ("data", ("robench.data",)),
    ("learn", ("robench.learn",)),
    ("plugins", ("robench.plugins", "robench.plugin_probe")),
    ("storage", ("robench.storage",)),
    ("run", ("robench.run",)),
    ("present", ("robench.present",)),
    ("exchange", ("robench.exchange",)),
    ("plugins that ship with robench", ("robench.builtin", "robench.families")),
    ("api", ("robench.api", "robench.testing")),
    ("cli", ("robench.cli", "robench.__main__")),
)


def room_of(module: str, rooms=ROOMS):
    """Return the index in ``rooms`` of ``module``'s room (longest prefix), or None."""
    best, length = None, -1
    for index, (_, prefixes) in enumerate(rooms):
        for prefix in prefixes:
            inside = module == prefix or ("." in prefix and module.startswith(prefix + "."))
            if inside and len(prefix) > length:  # the top package itself is no prefix
                best, length = index, len(prefix)
    return best


def unplaced_modules(edges: dict[str, set], rooms=ROOMS) -> list[str]:
    """Return the modules that belong to no room."""
    return sorted(m for m in edges if room_of(m, rooms) is None)


def upward_imports(edges: dict[str, set], rooms=ROOMS) -> list[str]:
    """Return 'a (room) -> b (room)' for every import of a room above the importer's own."""
    bad = []
    for source, targets in sorted(edges.items()):
        own = room_of(source, rooms)
        for target in sorted(targets):
            theirs = room_of(target, rooms)
            if own is not None and theirs is not None and theirs > own:
                bad.append(f"{source} ({rooms[own][0]}) -> {target} ({rooms[theirs][0]})")
    return bad


def missing_modules(modules: dict, known=None, top: str = "robench") -> list[str]:
    """Return 'module: import X' for every import of a ``top`` module that does not exist.

    ``from robench.a import b`` is fine when ``robench.a`` is a module (``b`` may be a name in
    it); ``import robench.a.b`` and ``from robench.a.b import c`` need ``robench.a.b``.
    """
    known = set(modules) if known is None else set(known)
    bad = []
    for name, imported in sorted(modules.items()):
        for target, names in imported:
            if target and (target == top or target.startswith(top + ".")) and target not in known:
                bad.append(f"{name}: import {target}")
    return sorted(set(bad))


#: Libraries that take seconds to import (torch ~2.5 s, POT ~5 s): imported inside the functions
#: that need them, never at the top of a module the CLI, the runner or the store loads.
HEAVY = frozenset({"torch", "torchvision", "sklearn", "scipy", "ot", "timm", "jinja2",
                   "markupsafe", "matplotlib", "pandas", "dask", "distributed", "imagecorruptions",
                   "art", "bayesian_torch", "mlxtend", "numba", "skimage", "bioimage_cpp",
                   "playwright"})

#: Function-level imports of light robench modules kept on purpose: {(module, target): why}.
DEFERRED = {
    ("robench", "robench.api"): "robench.evaluate is imported on first use: `import robench` "
                                "(every plugin does it) stays cheap",
}


def top_level_imports(path: Path, name: str, known: set) -> list[str]:
    """Return the modules ``path`` imports when it is imported (not inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    body, stack = [], list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack[:0] = node.orelse
        elif isinstance(node, (ast.If, ast.Try)):
            stack[:0] = node.body + node.orelse + list(getattr(node, "finalbody", [])) + [
                s for h in getattr(node, "handlers", ()) for s in h.body]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            body.append(node)
    return [t for t, _ in imports_of_tree(ast.Module(body=body, type_ignores=[]), path, name,
                                          known)]


def heavy_modules(root: Path, top: str = "robench", heavy=HEAVY) -> set:
    """Return the ``top`` modules whose import loads a heavy library (directly, or through the
    top-level imports of the robench modules and packages they import)."""
    paths = {module_name(p, root): p for p in (root / top).rglob("*.py")}
    known = set(paths)
    tops = {m: top_level_imports(p, m, known) for m, p in paths.items()}

    def resolve(target):
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target

    out, changed = set(), True
    while changed:  # a fixed point over the import graph
        changed = False
        for m in sorted(known - out):
            parts = m.split(".")
            loads = [t for pkg in (".".join(parts[:i]) for i in range(1, len(parts) + 1))
                     if pkg in tops for t in tops[pkg]]
            if any(t.split(".")[0] in heavy or resolve(t) in out for t in loads):
                out.add(m)
                changed = True
    return out


def needless_deferred_imports(root: Path, top: str = "robench", deferred=None) -> list[str]:
    """Return 'module: import target' for every function-level import of a light module."""
    deferred = DEFERRED if deferred is None else deferred
    paths = {module_name(p, root): p for p in (root / top).rglob("*.py")}
    known = set(paths)
    heavy = heavy_modules(root, top)
    bad = []
    for name, path in sorted(paths.items()):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                found = imports_of_tree(ast.Module(body=[node], type_ignores=[]), path, name,
                                        known)
                # `from robench.run import runner` loads the module runner (and its package)
                modules = [t for t, names in found[1:]] if isinstance(
                    node, ast.ImportFrom) and len(found) > 1 else [t for t, _ in found]
                for target in modules:
                    if not target or not target.startswith(top):
                        continue
                    resolved = target
                    while resolved and resolved not in known:
                        resolved = resolved.rpartition(".")[0]
                    if resolved in heavy or resolved == name or (name, resolved) in deferred:
                        continue
                    bad.append(f"{name}: import {target}")
    return sorted(set(bad))


#: Libraries a function may import where it needs them besides :data:`HEAVY`: slow ones
#: (``python -X importtime``: cv2 ~0.3 s, PIL.Image ~0.04 s and neither needed by the CLI) and
#: those robench does not require (the test extra's pytest; huggingface_hub, safetensors and
#: threadpoolctl arrive with timm or scikit-learn; psutil with the bench extra).
DEFERRABLE = HEAVY | {"cv2", "PIL", "pytest", "huggingface_hub", "safetensors", "threadpoolctl",
                      "psutil"}

#: Files (below robench/) whose function-level imports of light libraries are not hoisted yet
#: (none since 2026-12-07; a file added here must say why).
NOT_YET_HOISTED: frozenset = frozenset()


def light_imports_in_functions(root: Path, top: str = "robench", skip=NOT_YET_HOISTED) -> list:
    """Return 'path:line import X' for every import inside a function of a library outside
    :data:`DEFERRABLE` (the standard library, numpy, click...): those belong at the top."""
    found = []
    for path in sorted((root / top).rglob("*.py")):
        rel = path.relative_to(root / top).as_posix()
        if rel in skip:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] not in DEFERRABLE | {top}:
                        found.append(f"{rel}:{node.lineno} import {name}")
    return sorted(set(found))


def private_imports(modules: dict) -> list[str]:
    """Return 'module: from X import _name' for every private name taken from another module."""
    bad = []
    for name, imported in sorted(modules.items()):
        for target, names in imported:
            for n in names:
                if n.startswith("_") and not n.startswith("__") and target != name:
                    bad.append(f"{name}: from {target} import {n}")
    return bad


# ------------------------------------------------------------------ the rules, on the tree


@pytest.fixture(scope="module")
def tree():
    return scan(ROOT)


def test_no_import_cycles(tree):
    assert cycles(graph(tree)) == []


def test_the_core_imports_no_family_and_no_family_imports_another(tree):
    assert forbidden_family_imports(graph(tree)) == []


def test_every_module_has_a_room(tree):
    assert unplaced_modules(graph(tree)) == []


def test_no_room_imports_a_room_above_it(tree):
    assert upward_imports(graph(tree)) == []


def test_imports_inside_functions_defer_only_heavy_libraries():
    assert needless_deferred_imports(ROOT) == []


def test_imports_inside_functions_are_heavy_or_optional_libraries():
    assert light_imports_in_functions(ROOT) == []


def test_a_light_library_imported_inside_a_function_is_found(tmp_path):
    (tmp_path / "robench" / "run").mkdir(parents=True)
    (tmp_path / "robench" / "m.py").write_text(
        "import json\n\ndef f():\n    import re\n    import torch\n    from robench import x\n"
        "    from . import y\n\nclass C:\n    def g(self):\n        from collections import Counter\n"
        "        import numpy as np\n        import cv2\n")
    (tmp_path / "robench" / "run" / "later.py").write_text("def f():\n    import os\n")
    assert light_imports_in_functions(tmp_path, skip={"run/later.py"}) == [
        "m.py:11 import collections", "m.py:12 import numpy", "m.py:4 import re"]
    assert light_imports_in_functions(tmp_path, skip=set())[-1] == "run/later.py:2 import os"


def test_the_cli_the_runner_and_the_store_start_without_heavy_libraries():
    code = ("import sys, robench.cli, robench.run.runner, robench.storage.store; "
            f"print([m for m in {sorted(HEAVY)!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    # pandas is loaded by sqlite-utils itself (its optional pandas support), not by robench
    assert [m for m in eval(out.stdout) if m != "pandas"] == []


def test_every_import_names_a_module_that_exists(tree):
    assert missing_modules(tree) == []


def test_the_tests_and_benchmarks_import_no_old_module_path(tree):
    known = set(tree)
    bad = []
    for folder in ("tests", "benchmarks", "docs", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            bad += missing_modules({name: imports_of(path, name, known)}, known)
    assert bad == []


def test_no_private_name_is_imported_across_modules(tree):
    bad = private_imports(tree)
    for plugin in sorted((ROOT / "plugins").glob("*/")):
        for package in plugin.iterdir():
            if (package / "__init__.py").exists():
                bad += private_imports(scan(plugin, package.name))
    assert bad == []


def test_every_module_is_named_in_the_architecture_document(tree):
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))
               if p.name != "__init__.py" and str(p.relative_to(PACKAGE)) not in text]
    packages = [f"{p.relative_to(PACKAGE)}/" for p in sorted(PACKAGE.rglob("__init__.py"))
                if p.parent != PACKAGE and f"{p.parent.relative_to(PACKAGE)}/" not in text]
    assert missing + packages == []


def test_the_top_of_the_package_holds_at_most_twelve_modules():
    assert len(list(PACKAGE.glob("*.py"))) <= 12


# --------------------------------------------- the checks catch what they are meant to catch


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "robench"
    (pkg / "run").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def evaluate():\n    from robench.run.a import f\n")
    (pkg / "run" / "__init__.py").write_text("")
    (pkg / "run" / "a.py").write_text("from robench.run import b\n")
    (pkg / "run" / "b.py").write_text("def g():\n    from robench.run.a import f\n")
    assert cycles(graph(scan(tmp_path))) == [["robench.run.a", "robench.run.b"]]


def test_a_package_re_exporting_its_children_is_not_a_cycle(tmp_path):
    pkg = tmp_path / "robench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def __getattr__(n):\n    from robench.api import evaluate\n")
    (pkg / "api.py").write_text("import robench\nfrom robench import plugins\n")
    (pkg / "plugins.py").write_text("from robench import __version__\n")
    assert cycles(graph(scan(tmp_path))) == []


def test_core_to_family_and_family_to_family_imports_are_found(tmp_path):
    pkg = tmp_path / "robench"
    for folder in ("run", "families/a", "families/b"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "families" / "__init__.py").write_text("")
    (pkg / "run" / "runner.py").write_text("def f():\n    from robench.families.a import x\n")
    (pkg / "families" / "a" / "x.py").write_text("from robench.families.a import y\n")
    (pkg / "families" / "a" / "y.py").write_text("from robench.run import runner\n")
    (pkg / "families" / "b" / "z.py").write_text("from robench.families.a.x import thing\n")
    assert forbidden_family_imports(graph(scan(tmp_path))) == [
        "robench.families.b.z -> robench.families.a.x",
        "robench.run.runner -> robench.families.a",
        "robench.run.runner -> robench.families.a.x",
    ]


def test_private_imports_are_found(tmp_path):
    pkg = tmp_path / "robench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_x = 1\n")
    (pkg / "b.py").write_text("from robench.a import _x\nfrom robench.a import y as _y\n")
    assert private_imports(scan(tmp_path)) == ["robench.b: from robench.a import _x"]


def test_upward_imports_are_found(tmp_path):
    pkg = tmp_path / "robench"
    for folder in ("stats", "data", "learn", "run", "storage", "present", "cli"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "stats" / "ranks.py").write_text("from robench.present.formatting import is_finite\n")
    (pkg / "present" / "formatting.py").write_text("from robench.stats import ranks\n")
    (pkg / "run" / "runner.py").write_text("def f():\n    from robench.cli import common\n")
    (pkg / "cli" / "common.py").write_text("from robench.run import runner\n")
    # a lower room reaching up at function level, and the data room importing learn
    (pkg / "storage" / "store.py").write_text("def g():\n    from robench.run.runner import f\n")
    (pkg / "data" / "corruptions.py").write_text("from robench.learn import boundary\n")
    (pkg / "learn" / "boundary.py").write_text("from robench.data import corruptions\n"
                                              "if False:\n    pass\n")
    # an annotation-only import is not a dependency
    (pkg / "learn" / "train.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from robench.run import runner\n")
    assert upward_imports(graph(scan(tmp_path))) == [
        "robench.data.corruptions (data) -> robench.learn (learn)",
        "robench.data.corruptions (data) -> robench.learn.boundary (learn)",
        "robench.run.runner (run) -> robench.cli (cli)",
        "robench.run.runner (run) -> robench.cli.common (cli)",
        "robench.stats.ranks (ground) -> robench.present.formatting (present)",
        "robench.storage.store (storage) -> robench.run.runner (run)",
    ]


def test_a_module_outside_every_room_is_found(tmp_path):
    pkg = tmp_path / "robench"
    (pkg / "misc").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "misc" / "__init__.py").write_text("")
    (pkg / "misc" / "helpers.py").write_text("")
    assert unplaced_modules(graph(scan(tmp_path))) == ["robench.misc", "robench.misc.helpers"]


def test_an_import_of_an_old_or_missing_module_path_is_found(tmp_path):
    pkg = tmp_path / "robench"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "__init__.py").write_text("")
    (pkg / "data" / "cache.py").write_text("x = 1\n")
    (pkg / "api.py").write_text("import robench.cache\nfrom robench.data.cache import x\n"
                                "from robench.data import cache\n"
                                "def f():\n    from robench.trials import make_spec\n")
    assert missing_modules(scan(tmp_path)) == [
        "robench.api: import robench.cache", "robench.api: import robench.trials"]


# --- one shape per family ------------------------------------------------------------------


FAMILY_DIR = ROOT / "robench" / "families"


def test_every_family_metric_module_owns_its_name_version_definition_and_aggregate():
    """A metric's name, version, definition and aggregate come from one module, its own."""
    import importlib

    from robench.plugins import get_registry

    checked = 0
    for spec in get_registry().all("metrics"):
        module_name = spec.aggregate.__module__
        if not module_name.startswith("robench.families."):
            continue
        module = importlib.import_module(module_name)
        assert (module.METRIC, module.VERSION, module.DEFINITION, spec.aggregate) == (
            spec.name, spec.version, spec.definition, module.aggregate), module_name
        checked += 1
    assert checked >= 6  # rho, adequacy, lost-test, coverage, purity-ratio, shifted-cv


def _version_literals(path: Path) -> list:
    """Return the lines of ``version=`` keywords given a literal in a module's calls."""
    return [kw.value.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) for kw in node.keywords
            if kw.arg == "version" and isinstance(kw.value, ast.Constant)]


def test_a_family_init_only_wires_no_version_literal():
    offenders = {str(p.relative_to(ROOT)): lines for p in sorted(FAMILY_DIR.glob("*/__init__.py"))
                 if (lines := _version_literals(p))}
    assert offenders == {}


def test_a_version_literal_in_a_family_init_is_found(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("register(MetricSpec(name=metric.METRIC,\n    version='3'))\n")
    assert _version_literals(init) == [2]


def _literals(path: Path) -> list:
    """Return the lines of the literals of a module other than its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and id(node) not in docstrings)


#: Family ``__init__`` files: the core's families and the corruption plugin's (its shape).
FAMILY_INITS = (sorted(FAMILY_DIR.glob("*/__init__.py"))
                + [ROOT / "plugins" / "robench-corruption" / "robench_corruption" / "__init__.py"])


def test_a_family_init_only_wires_no_literal():
    """Names, versions, descriptions, references and section titles live in the family's
    modules (MetricSpec.from_module, ProtocolSpec.from_module): ``__init__`` only wires."""
    offenders = {str(p.relative_to(ROOT)): lines for p in FAMILY_INITS
                 if (lines := _literals(p))}
    assert offenders == {}


def test_a_literal_in_a_family_init_is_found(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text('"""Doc."""\n\ndef f(register):\n    """Doc."""\n'
                    '    register(MetricSpec.from_module(m, protocol="source-aware",\n'
                    '                                    display_order=10))\n')
    assert _literals(init) == [5, 6]


def test_a_needless_import_inside_a_function_is_found(tmp_path):
    pkg = tmp_path / "robench"
    (pkg / "run").mkdir(parents=True)
    (pkg / "__init__.py").write_text("def __getattr__(n):\n    from robench.api import evaluate\n")
    (pkg / "api.py").write_text("")
    (pkg / "run" / "__init__.py").write_text("")
    (pkg / "run" / "light.py").write_text("import json\n")
    (pkg / "run" / "heavy.py").write_text("import torch\n")
    (pkg / "run" / "uses_heavy.py").write_text("from robench.run import heavy\n")
    (pkg / "run" / "runner.py").write_text(
        "def a():\n    from robench.run.light import x\n"      # light: belongs at the top
        "def b():\n    from robench.run.heavy import y\n"      # imports torch at its top
        "def c():\n    from robench.run import uses_heavy\n"   # ... through another module
        "def d():\n    import torch\n")
    assert needless_deferred_imports(tmp_path, deferred={}) == [
        "robench.run.runner: import robench.run.light", "robench: import robench.api"]
    assert needless_deferred_imports(tmp_path, deferred={("robench", "robench.api"): "why"}) == [
        "robench.run.runner: import robench.run.light"]


def _statement(node, alias) -> str:
    if isinstance(node, ast.Import):
        head = f"import {alias.name}"
    else:
        head = f"from {'.' * node.level}{node.module or ''} import {alias.name}"
    return head + (f" as {alias.asname}" if alias.asname else "")


def redundant_reimports(root: Path, top: str = "robench") -> list[str]:
    """Return 'path:line statement' for every import inside a function that its module already
    makes at the top."""
    found = []
    for path in sorted((root / top).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        at_top = {_statement(n, a) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}
        inner = {(n.lineno, _statement(n, a)) for fn in ast.walk(tree)
                 if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
                 for a in n.names}
        found += [f"{path.relative_to(root)}:{line} {st}" for line, st in sorted(inner)
                  if st in at_top]
    return found


def test_no_module_re_imports_inside_a_function_what_it_imports_at_the_top():
    assert redundant_reimports(ROOT) == []


def test_a_redundant_re_import_is_found(tmp_path):
    (tmp_path / "robench").mkdir()
    (tmp_path / "robench" / "m.py").write_text(
        "import json\nfrom os import path\n\ndef f():\n    import json\n    import os\n"
        "    from os import path as p\n")
    assert redundant_reimports(tmp_path) == ["robench/m.py:5 import json"]



# -- tests sit under the room they test ----------------------------------------------------------

#: Test folders that are not rooms: guarantees across rooms (reliability), the plugin author's
#: contract, the benchmarks' own tests, and support files.
CROSS_CUTTING = {"reliability", "contract", "benchmarks", "fixtures", "plugins"}


def robench_rooms_imported(path: Path) -> set:
    """Return the rooms (second name of robench.X...; families.NAME for a family) ``path``
    imports, at any level."""
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if "." in node.module else [
                f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "robench" and len(parts) > 1:
                rooms.add(parts[1])
                if parts[1] == "families" and len(parts) > 2:
                    rooms.add(f"families.{parts[2]}")
    return rooms


def misplaced_tests(tests: Path) -> list[str]:
    """Return each test file under tests/ROOM/ (tests/families/NAME/) that imports nothing of
    robench.ROOM (robench.families.NAME): it tests another room, and belongs there."""
    bad = []
    for path in sorted(tests.rglob("test_*.py")):
        parts = path.relative_to(tests).parts
        if len(parts) < 2 or parts[0] in CROSS_CUTTING:
            continue
        room = f"families.{parts[1]}" if parts[0] == "families" and len(parts) > 2 else parts[0]
        if room not in robench_rooms_imported(path):
            bad.append(f"{path.relative_to(tests)} imports nothing of robench.{room}")
    return bad


def test_every_test_file_sits_under_the_room_it_imports():
    assert misplaced_tests(ROOT / "tests") == []


def test_a_test_file_under_another_room_is_found(tmp_path):
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "test_a.py").write_text("from robench.cli import cli\n")
    (tmp_path / "storage" / "test_b.py").write_text("from robench.storage import store\n")
    (tmp_path / "families" / "coverage").mkdir(parents=True)
    (tmp_path / "families" / "coverage" / "test_c.py").write_text(
        "import robench.families.purity_ratio.metric\n")
    (tmp_path / "reliability").mkdir()
    (tmp_path / "reliability" / "test_d.py").write_text("from robench.cli import cli\n")
    assert misplaced_tests(tmp_path) == [
        "families/coverage/test_c.py imports nothing of robench.families.coverage",
        "storage/test_a.py imports nothing of robench.storage"]
