"""The size of the house: lines per room, cyclomatic complexity and repeated code of robench/.

Measures two commits side by side (default: the baseline 4e263f3 and HEAD) from git alone (each
tree is read with ``git archive``, so the working tree does not matter) and prints a Markdown
block stamped with both commits and the machine; ``--write docs/architecture.md`` replaces the
block between ``<!-- house:begin -->`` and ``<!-- house:end -->`` there.

Figures per tree:

* lines per room (every line of every ``.py`` file below ``robench/<room>``; the top-level
  modules count as rooms of their own: ``ground`` for errors/specs/hookspecs/escaping,
  ``plugins`` for the registry, ``api`` for api.py), and in all;
* the same lines by kind: code, docstrings (a module's, class's or function's first string),
  comments, blank, so a change in size says whether code or prose moved;
* functions and methods with cyclomatic complexity >= 21 and the highest one (radon, in the
  ``bench`` extra: ``pip install -e '.[bench]'``);
* pairs of places sharing six or more lines, from the ``duplicates`` command where it is on
  the PATH (a tool of the developers' machines; "not measured" elsewhere): in all, and in
  the code alone (every docstring line blanked first, so numpydoc sections that public
  functions share do not count: issue 48 excepts docstring-only pairs).

Usage::

    python benchmarks/house.py                       # 4e263f3 vs HEAD, printed
    python benchmarks/house.py --old 4e263f3 --new HEAD --write docs/architecture.md
"""

from __future__ import annotations

import argparse
import ast
import io
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- house:begin -->", "<!-- house:end -->"
#: Top-level modules and the room they belong to (docs/architecture.md's room table).
TOP_LEVEL = {"__init__.py": "ground", "__main__.py": "cli", "errors.py": "ground",
             "escaping.py": "ground", "specs.py": "ground", "hookspecs.py": "ground",
             "plugins.py": "plugins", "plugin_probe.py": "plugins", "api.py": "api"}
CC_LIMIT = 21


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def tree(rev: str, into: Path) -> Path:
    """Extract robench/ at ``rev`` into ``into``; return the package folder."""
    data = subprocess.run(["git", "archive", rev, "robench"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "robench"


def room(path: Path, package: Path) -> str:
    parts = path.relative_to(package).parts
    return parts[0] if len(parts) > 1 else TOP_LEVEL.get(parts[0], "ground")


def lines_per_room(package: Path) -> Counter:
    rooms: Counter = Counter()
    for path in package.rglob("*.py"):
        rooms[room(path, package)] += len(path.read_text(encoding="utf-8").splitlines())
    return rooms


KINDS = ("code", "docstrings", "comments", "blank")


def docstring_lines(source: str) -> set:
    """Return the numbers of the lines of a module that belong to a docstring."""
    doc: set = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    return doc


def line_kinds(source: str) -> Counter:
    """Count the lines of one module by kind (a line of a docstring is a docstring line)."""
    doc = docstring_lines(source)
    kinds: Counter = Counter({kind: 0 for kind in KINDS})
    for number, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        kinds["docstrings" if number in doc else "blank" if not text
              else "comments" if text.startswith("#") else "code"] += 1
    return kinds


def lines_by_kind(package: Path) -> Counter:
    kinds: Counter = Counter()
    for path in package.rglob("*.py"):
        kinds.update(line_kinds(path.read_text(encoding="utf-8")))
    return kinds


def complexity(package: Path) -> tuple:
    """Return (functions with CC >= CC_LIMIT, the highest CC and where), or None without radon."""
    try:
        from radon.complexity import cc_visit
    except ImportError:
        return None
    high, worst = 0, (0, "")
    for path in sorted(package.rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if getattr(block, "letter", "F") == "C":  # a class: its methods are blocks too
                continue
            name = f"{path.relative_to(package.parent)}:{block.name}"
            high += block.complexity >= CC_LIMIT
            worst = max(worst, (block.complexity, name))
    return high, worst


def duplicate_pairs(package: Path):
    """Return the pairs the ``duplicates`` command counts in ``package``, or None."""
    exe = shutil.which("duplicates")
    if exe is None:
        return None
    out = subprocess.run([exe, "--repo", str(package), "--most", "1", "--seconds", "120"],
                         capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else ""
    if first.startswith("no duplicates"):
        return 0
    found = re.match(r"(\d+) pairs?", first)
    return int(found.group(1)) if found else None


def blank_docstrings(source: str) -> str:
    """Return the module with every docstring line emptied (line numbers kept)."""
    doc = docstring_lines(source)
    return "".join("\n" if number in doc else line
                   for number, line in enumerate(source.splitlines(keepends=True), 1))


def code_duplicate_pairs(package: Path):
    """Return :func:`duplicate_pairs` of a copy of ``package`` without its docstrings."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "robench"
        shutil.copytree(package, copy)
        for path in copy.rglob("*.py"):
            path.write_text(blank_docstrings(path.read_text(encoding="utf-8")), encoding="utf-8")
        return duplicate_pairs(copy)


def measure(rev: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        package = tree(rev, Path(tmp))
        subprocess.run(["git", "init", "-q", tmp], check=True)  # duplicates reads a checkout
        subprocess.run(["git", "-C", tmp, "add", "-A"], check=True)
        return {"rev": git("rev-parse", "--short", rev), "rooms": lines_per_room(package),
                "kinds": lines_by_kind(package), "cc": complexity(package),
                "dup": duplicate_pairs(package), "dup_code": code_duplicate_pairs(package)}


def table(old: dict, new: dict) -> list:
    rooms = sorted(set(old["rooms"]) | set(new["rooms"]),
                   key=lambda r: -max(old["rooms"][r], new["rooms"][r]))
    total_old, total_new = sum(old["rooms"].values()), sum(new["rooms"].values())

    def change(a, b):
        return f"{(b - a) / a:+.0%}" if a else "new"

    lines = [f"| room | lines at {old['rev']} | lines at {new['rev']} | change |",
             "|---|---:|---:|---:|"]
    lines += [f"| {r} | {old['rooms'][r]:,} | {new['rooms'][r]:,} | "
              f"{change(old['rooms'][r], new['rooms'][r])} |" for r in rooms]
    lines.append(f"| **robench/ in all** | **{total_old:,}** | **{total_new:,}** | "
                 f"**{change(total_old, total_new)}** |")
    lines.append("")
    lines += [f"| kind of line | at {old['rev']} | at {new['rev']} | change |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {old['kinds'][k]:,} | {new['kinds'][k]:,} | "
              f"{change(old['kinds'][k], new['kinds'][k])} |" for k in KINDS]
    lines.append("")

    def cc(m):
        if m["cc"] is None:
            return "not measured (radon not installed)", "not measured"
        high, (worst, where) = m["cc"]
        return str(high), f"{worst} ({where})"

    def dup(m, key="dup"):
        return "not measured (no `duplicates` command)" if m[key] is None else str(m[key])

    (h_old, w_old), (h_new, w_new) = cc(old), cc(new)
    lines += [f"| figure | {old['rev']} | {new['rev']} |", "|---|---|---|",
              f"| functions with cyclomatic complexity >= {CC_LIMIT} | {h_old} | {h_new} |",
              f"| highest cyclomatic complexity | {w_old} | {w_new} |",
              f"| pairs of places sharing >= 6 lines (duplicates) | {dup(old)} | {dup(new)} |",
              f"| the same, docstrings blanked (code and templates) | {dup(old, 'dup_code')} | "
              f"{dup(new, 'dup_code')} |"]
    return lines


def block(old_rev: str, new_rev: str) -> str:
    old, new = measure(old_rev), measure(new_rev)
    stamp = (f"Generated by `python benchmarks/house.py --old {old_rev} --new {new_rev}` "
             f"(commits {old['rev']} and {new['rev']}; machine {platform.machine()} "
             f"{platform.system()}, Python {platform.python_version()}).")
    return "\n".join([BEGIN, stamp, "", *table(old, new), END])


def write(path: Path, text: str) -> None:
    doc = path.read_text(encoding="utf-8")
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + text + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(doc, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="4e263f3", help="baseline commit (default 4e263f3)")
    parser.add_argument("--new", default="HEAD", help="commit to measure (default HEAD)")
    parser.add_argument("--write", type=Path, help="replace the house block in this file")
    args = parser.parse_args(argv)
    text = block(args.old, args.new)
    if args.write:
        write(args.write, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
