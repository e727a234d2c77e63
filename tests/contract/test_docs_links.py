"""Every relative link in README.md, CONTRIBUTING.md and docs/ resolves: the file exists and,
for a Markdown target with an anchor, a heading of that file gives the anchor (GitHub's
slugs). The README stays a front door: short, with the two commands CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: [text](target) and ![alt](target), not inside code: the target up to a space or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(page: Path) -> list:
    """Return the link targets of a Markdown page, code blocks and code spans left out."""
    text = CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def slug(heading: str) -> str:
    """Return GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M)}


def test_the_link_finder_sees_links_and_not_code():
    assert LINK.findall("see [a](docs/a.md) and ![b](b.png \"t\")") == ["docs/a.md", "b.png"]
    assert slug("`register_models(register)`") == "register_modelsregister"
    assert slug("Contribute a model plugin in 10 minutes") == \
        "contribute-a-model-plugin-in-10-minutes"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading gives #{anchor}")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def test_the_readme_is_a_front_door_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert f"```bash\n{ci}\n```" in text  # the test command, byte for byte as CI runs it
    run = ("pip install torch==2.14.1 torchvision==0.29.1 -e . -e plugins/robench-corruption"
           " && robench run --all")
    assert f"```bash\n{run}\n```" in text
    assert "(docs/index.md)" in text and (ROOT / "docs" / "index.md").exists()
    # every page of docs/ is reachable from the index
    index = set(links(ROOT / "docs" / "index.md"))
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md"))
               if p.name != "index.md" and p.name not in index]
    assert missing == []
