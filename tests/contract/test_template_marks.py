"""The template plugin marks what a copy changes (issue 51, point 4): its version line, and a
README that describes the plugin a user makes from it, not how to copy the template."""

import re
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "plugins" / "robench-template"


def test_the_version_line_is_marked_to_change():
    lines = (TEMPLATE / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    version, = [line for line in lines if re.match(r"\s*version\s*=", line)]
    assert "CHANGE" in version, version


def test_the_readme_describes_the_plugin_and_the_how_to_is_apart():
    readme = (TEMPLATE / "README.md").read_text(encoding="utf-8")
    # the copy's own README: its title is the distribution, marked to change; it says what the
    # plugin registers and how to install, test and run it; copying the template is elsewhere
    title = next(line for line in readme.splitlines() if line.startswith("# "))
    assert title == "# robench-template"
    assert readme.count("CHANGE") >= 3 and "`template-cnn`" in readme
    assert "cp -r" not in readme and "template" not in title.replace("robench-template", "")
    assert "## Install" in readme and "## Test it" in readme and "robench run" in readme
    how = (TEMPLATE / "TEMPLATE.md").read_text(encoding="utf-8")
    assert "cp -r plugins/robench-template" in how and "rm TEMPLATE.md" in how
