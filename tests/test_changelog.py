"""CHANGELOG.md lists every change that alters stored results, and only those: the intentional
changes of the key-stability fixture, each as a row (component, from -> to, or a chain of rows)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "pre_open_core.json"
NONE = "(none)"


def changelog_rows(text: str) -> list[dict]:
    """Return the rows of every 'Results that change' table: kind, component, from, to, ..."""
    rows, header, inside = [], None, False
    for line in text.splitlines():
        if line.startswith("### "):
            inside = line.strip() == "### Results that change"
            header = None
            continue
        if not inside or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells)))
    return rows


def _plain(cell: str) -> str:
    return cell.strip("`").strip('"')


def required(about: dict) -> list[tuple[str, str, object, object]]:
    """Return (kind, component, from, to) for every intentional change of the fixture."""
    out = []
    for c in about.get("intentional", []):
        path = c["path"]
        if path == "versions.protocol":
            out.append(("protocol", c["protocol"], c["from"], c["to"]))
        elif path.startswith("params."):  # params.analysis.KEY or params.KEY: a knob
            out.append(("knob", f"{c['protocol']}.{path.rpartition('.')[2]}", None, c["to"]))
        elif path.startswith("versions.corruptions."):
            out.append(("corruption", path.rpartition(".")[2], c["from"], c["to"]))
        elif path == "versions.model":
            out.append(("model", c["model"], c["from"], c["to"]))
        elif path == "versions.dataset_content":
            out.append(("data", path, None, None))  # one row: the values are per data set
        else:
            raise AssertionError(f"test_changelog does not know how to read {path!r}")
    out += [("metric", m["metric"], m["from"], m["to"]) for m in about.get("intentional_metrics", [])]
    out += [("score identity", f"schema {s['schema']}", None, None)
            for s in about.get("intentional_scores", [])]
    out += [("column", f"{c['table']}.{c['column']}", None, None)
            for c in about.get("intentional_columns", [])]
    return out


def covered(change, rows) -> bool:
    """A versioned change is covered by a chain of rows from its old to its new version."""
    kind, component, old, new = change
    mine = [r for r in rows if r["kind"] == kind and _plain(r["component"]) == component]
    if new is None:
        return bool(mine)
    if old is None:  # a new knob: its row gives the default
        return any(_plain(r["to"]) == json.dumps(new).strip('"') for r in mine)
    steps = {_plain(r["from"]): _plain(r["to"]) for r in mine}
    version, seen = str(old), set()
    while version in steps and version not in seen:
        seen.add(version)
        version = steps[version]
        if version == str(new):
            return True
    return False


def missing_and_extra(about: dict, text: str) -> tuple[list, list]:
    rows = changelog_rows(text)
    changes = required(about)
    missing = [c for c in changes if not covered(c, rows)]
    known = {(k, comp) for k, comp, _, _ in changes}
    extra = [r for r in rows if (r["kind"], _plain(r["component"])) not in known]
    return missing, extra


def test_every_intentional_result_change_has_a_changelog_row_and_no_row_is_invented():
    about = json.loads(FIXTURE.read_text())
    missing, extra = missing_and_extra(about, (ROOT / "CHANGELOG.md").read_text())
    assert not missing, (
        "tests/fixtures/pre_open_core.json lists result-changing changes that CHANGELOG.md's "
        "'Results that change' table lacks; add a row (kind | component | from | to | what "
        f"recomputes | why) for each: {missing}")
    assert not extra, f"CHANGELOG.md rows with no intentional change in the fixture: {extra}"


@pytest.mark.parametrize("edit", ["drop a row", "break a chain", "invent a row"])
def test_the_check_fails_when_the_changelog_is_wrong(edit):
    about = json.loads(FIXTURE.read_text())
    text = (ROOT / "CHANGELOG.md").read_text()
    if edit == "drop a row":
        text = re.sub(r"\n\| metric \| `rho` \|[^\n]*", "", text)
    elif edit == "break a chain":
        text = re.sub(r"(\n\| metric \| `coverage` \| 4 \| )5", r"\g<1>6", text)
    else:
        text = text.replace("\n| corruption |", "\n| metric | `made-up` | 1 | 2 | x | y |\n| corruption |")
    missing, extra = missing_and_extra(about, text)
    assert missing or extra
