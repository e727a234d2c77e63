"""A new leaderboard repository (``robench init-leaderboard``): its files from the templates in
``robench/exchange/templates/`` (package data), and requirements.txt, what its runner installs."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

from robench.errors import MergeError
from robench.exchange.publish.common import (DEFAULT_SETTINGS, PUBLISHED, SETTINGS,
                                             TORCH_CPU_INDEX, WHEELS, WORKFLOW, journal_delete)
from robench.storage.store import Store
import robench

def template(name: str) -> str:
    """Return the text of one template of ``robench/exchange/templates/`` (package data)."""
    return resources.files("robench.exchange").joinpath("templates", name).read_text("utf-8")


def _direct_url(dist) -> dict:
    """Return how ``dist`` was installed (its ``direct_url.json``, PEP 610), or {}."""
    try:
        info = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        return {}
    return info if isinstance(info, dict) else {}


def plugin_distributions() -> list[dict]:
    """Return the installed plugin distributions: {plugin, name, version, editable, dist}."""
    out, seen = [], set()
    for ep in metadata.entry_points(group="robench"):
        dist = getattr(ep, "dist", None)
        if dist is None or dist.metadata["Name"] in seen:
            continue
        seen.add(dist.metadata["Name"])
        info = _direct_url(dist)
        url = str(info.get("url") or "")
        editable = (url.removeprefix("file://") or "?") if (
            info.get("dir_info") or {}).get("editable") else None
        out.append({"plugin": ep.name, "name": dist.metadata["Name"], "version": dist.version,
                    "editable": editable, "dist": dist})
    return out


def pinned_plugins(repo) -> list[tuple[str, str, str]]:
    """Return [(plugin, version, requirement line)] a board's requirements.txt pins."""
    lines = (Path(repo) / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [(words[2], words[3], nxt) for line, nxt in zip(lines, lines[1:])
            if len(words := line.split()) == 4 and words[:2] == ["#", "plugin"]]


#: How a maintainer adds a plugin to a board after init-leaderboard (the command says it).
ADD_PLUGIN_LATER = ("To add a plugin later: put its requirement line (NAME==VERSION, a git URL "
                    "at a commit, or its wheel in wheels/ as ./wheels/FILE.whl) in "
                    "requirements.txt and push that to main; a pull request cannot change it.")


def _distribution_requirement(dist, source: Optional[Path], wheels: Path) -> str:
    """Return a requirement line installing exactly ``dist`` on a fresh runner."""
    name, version = dist.metadata["Name"], dist.version
    info = _direct_url(dist)
    url = str(info.get("url") or "")
    if source is None and "dir_info" in info and url.startswith("file://"):
        source = Path(url[len("file://"):])
    if source is not None and (source / "pyproject.toml").is_file():
        return _build_wheel(source, wheels)
    if "vcs_info" in info:
        return f"{name} @ {info['vcs_info'].get('vcs', 'git')}+{url}@" \
               f"{info['vcs_info'].get('commit_id')}"
    if "archive_info" in info and url.startswith("file://") and url.endswith(".whl"):
        wheel = Path(url[len("file://"):])
        if wheel.is_file():
            wheels.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(wheel, wheels / wheel.name)
            return f"./{WHEELS}/{wheel.name}"
    if url and not url.startswith("file://"):
        return f"{name} @ {url}"
    return f"{name}=={version}"


def _build_wheel(source: Path, wheels: Path) -> str:
    wheels.mkdir(parents=True, exist_ok=True)
    before = set(wheels.glob("*.whl"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--no-index", "-q", "-w", str(wheels),
                           str(source)], capture_output=True, text=True)
    built = sorted(set(wheels.glob("*.whl")) - before) or sorted(wheels.glob("*.whl"))
    if proc.returncode != 0 or not built:
        tail = (proc.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise MergeError(f"could not build a wheel of {source} for the runner ({tail}); "
                         "pass --requirement with what the runner should install")
    return f"./{WHEELS}/{built[-1].name}"


def requirements(repo, requirement: Optional[str] = None, allow_editable: bool = False) -> str:
    """Return requirements.txt: robench, torch's CPU build and the plugins, each pinned."""
    plugins = plugin_distributions()
    editable = [p for p in plugins if p["editable"]]
    if editable and not allow_editable:
        raise MergeError(
            "plugin(s) installed in editable mode: " + ", ".join(
                f"{p['plugin']} ({p['name']} {p['version']} from {p['editable']})"
                for p in editable)
            + "; a board pins what its runner installs: install a release of each (pip "
            "install NAME==VERSION, or its wheel), or pass --allow-editable to pin a wheel "
            "built from the working tree as it is now")
    wheels = Path(repo) / WHEELS
    lines = ["# What the leaderboard's runner installs (written by robench init-leaderboard).",
             "# torch's CPU build: a CPU runner needs none of the CUDA libraries.",
             f"--extra-index-url {TORCH_CPU_INDEX}"]
    try:
        import torch

        lines.append(f"torch=={torch.__version__.partition('+')[0]}")
    except ImportError:
        lines.append("torch")
    if requirement:
        lines.append(requirement)
    else:
        here = Path(robench.__file__).resolve().parents[1]
        source = here if (here / "pyproject.toml").is_file() else None
        try:
            dist = metadata.distribution("robench")
        except metadata.PackageNotFoundError:
            dist = None
        if dist is None and source is None:
            raise MergeError("cannot tell where a runner gets this robench from (no "
                             "installed distribution, no source tree): pass --requirement")
        lines.append(_build_wheel(source, wheels) if dist is None
                     else _distribution_requirement(dist, source, wheels))
    for p in plugins:
        lines.append(f"# plugin {p['plugin']} {p['version']}")
        lines.append(_distribution_requirement(p["dist"], None, wheels))
    return "\n".join(lines) + "\n"


def init_repository(path, title: str = DEFAULT_SETTINGS["title"],
                    requirement: Optional[str] = None,
                    then: Optional[Callable[[Path], None]] = None,
                    allow_editable: bool = False) -> list:
    """Write a leaderboard repository at ``path``, built beside it; return the files written."""
    final = Path(path)
    if os.path.lexists(final) and (not final.is_dir() or final.is_symlink()
                                   or any(final.iterdir())):
        raise MergeError(f"{final} is not empty; pick a new folder for the leaderboard")
    final.absolute().parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.absolute().parent))
    try:
        written = _write_repository(work, title, requirement, allow_editable)
        if then is not None:
            then(work)
        if os.path.lexists(final):
            final.rmdir()  # empty (checked above); an entry added since makes this fail
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return written


def _write_repository(path: Path, title: str, requirement: Optional[str],
                      allow_editable: bool) -> list:
    files = {
        "README.md": string.Template(template("README.md")).safe_substitute(title=title),
        SETTINGS: json.dumps({**DEFAULT_SETTINGS, "title": title}, indent=2) + "\n",
        "requirements.txt": requirements(path, requirement, allow_editable),
        ".gitignore": template("gitignore"),
        str(WORKFLOW): template("workflow.yml"),
        "contributions/.gitkeep": "",
        "published/accepted.json": "{}\n",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    Store(path / PUBLISHED).close()
    journal_delete(path / PUBLISHED)
    wheels = sorted(str(p.relative_to(path)) for p in (path / WHEELS).glob("*.whl"))
    return sorted(files) + [str(PUBLISHED)] + wheels
