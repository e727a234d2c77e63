"""`robench run` ends with its answer, short: the headline summary (-v: the full reports)."""

import io
import os

import pytest
from click.testing import CliRunner

from robench.cli import cli

RUN = ["run", "-d", "tiny", "-d", "tiny-nosrc", "-m", "centroid", "-m", "spy", "-c", "kmeans",
       "-k", "3", "-r", "2", "--executor", "local"]


@pytest.fixture
def ran(tiny_registry, tmp_path):
    """A small run of every metric on two data sets: (its result, its database)."""
    db = str(tmp_path / "r.db")
    res = CliRunner().invoke(cli, [*RUN, "--db", db], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res, db


def _summary(stdout: str) -> list:
    """Return stdout's lines after the last progress line (the summary)."""
    lines = stdout.splitlines()
    last = max((i for i, line in enumerate(lines) if line.startswith("[")), default=-1)
    return lines[last + 1:]


def test_the_run_ends_with_a_short_summary_no_wider_than_100_columns(ran):
    res, db = ran
    summary = _summary(res.stdout)
    assert len(summary) <= 30, "\n".join(summary)
    # stdout is not a terminal here: 100 columns
    assert max(len(line) for line in res.stdout.splitlines()) <= 100, res.stdout
    text = "\n".join(summary)
    assert "tiny - sources by kmeans: ranked by rho" not in text  # the full report: -v
    heads = [i for i, line in enumerate(summary) if line.startswith("  ")
             and "rho (kmeans)" in line]
    # each table: the data set's name, then a header naming every column, the rank's too
    assert [summary[i - 1] for i in heads] == ["tiny", "tiny-nosrc"]
    assert all(summary[i].split()[:2] == ["rank", "model"] for i in heads)
    text = " ".join(text.split())  # the lines after the tables are wrapped
    assert "Decided by rho (kmeans): " in text and "--until decided" in text
    assert "0 failed" in text and "combination(s) skipped as not applicable" in text
    assert f"robench results -d tiny --metric rho --db {db}" in text
    assert "robench leaderboard" in text
    assert "Not in the tables above: " in text and "lost-test" in text


def test_the_summary_ranks_are_the_rho_tables_ranks(ran, tiny_registry):
    from robench.families.source_aware.leaderboard import rho_tables
    from robench.present.summary import rank_text
    from robench.storage.store import Store

    res, db = ran
    with Store(db, readonly=True) as store:
        rows = store.scores(metric="rho")
    summary = _summary(res.stdout)
    for dataset in ("tiny", "tiny-nosrc"):
        table, = rho_tables([r for r in rows if r["dataset"] == dataset])
        start = next(i for i, line in enumerate(summary) if line.split()[:1] == [dataset])
        shown = [line.split()[:3] for line in summary[start + 2:start + 2 + len(table["rows"])]]
        want = [[rank_text(r), r["model"], f"{r['value']:.3f}"] for r in table["rows"]]
        assert shown == want, (summary, want)


def test_verbose_prints_the_full_reports_then_the_summary(ran, tiny_registry):
    _, db = ran
    res = CliRunner().invoke(cli, [*RUN, "--db", db, "-v"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "tiny - sources by kmeans: ranked by rho" in out
    assert "tiny - lost-test: " in out and "tiny-nosrc - lost-test: " in out
    assert out.index("tiny - lost-test") < out.index("Decided by rho (kmeans)")  # answer last
    assert "robench leaderboard" in " ".join(_summary(out)[-3:])


def test_finding_sources_is_said_once_per_data_set_and_clusterer(ran):
    res, _ = ran
    said = [line for line in res.stderr.splitlines() if line.startswith("finding sources:")]
    assert sorted(said) == ["finding sources: tiny / kmeans",
                            "finding sources: tiny-nosrc / kmeans"], said


def test_the_summary_fits_a_narrow_terminal(ran, monkeypatch):
    """On a terminal the width is the terminal's: long model names are abbreviated and the
    columns that do not fit are left out, counted on the header line."""
    import shutil

    from robench.present import summary
    from robench.present.leaderboard import registered_sections
    from robench.storage.store import Store

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(shutil, "get_terminal_size",
                        lambda fallback=None: os.terminal_size((52, 20)))
    assert summary.output_width(Tty()) == 52
    assert summary.output_width(io.StringIO()) == 100
    _, db = ran
    with Store(db, readonly=True) as store:
        rows = store.scores()
    for r in rows:
        if r["model"] == "spy":
            r["model"] = "spy-with-a-name-far-longer-than-any-column-could-hold"
    from robench.plugins import get_registry

    out = summary.summary_lines(rows, registered_sections(get_registry()), width=52)
    assert out["lines"] and max(len(line) for line in out["lines"]) <= 52, out["lines"]
    assert any("~" in line for line in out["lines"])  # the long name, abbreviated
    wide = summary.summary_lines(rows, registered_sections(get_registry()), width=200)
    assert len(wide["lines"][1].split("  ")) > len(out["lines"][1].split("  "))  # headers


def test_the_next_looks_line_gives_the_repeats_for_80_percent_power():
    """What the summary says of a raced table's open pairs: the most repeats any needs for 80%
    power at its observed difference, or that some are beyond the planner's cap (its figure
    from robench.stats.sequential, not a second copy)."""
    from robench.cli.run import power_text
    from robench.stats.sequential import REPEATS_CAP

    def table(*needs):
        return {"pairs": [{"status": "undecided", "outlook": {"repeats_80": n}} for n in needs]
                + [{"status": "ordered", "outlook": {"repeats_80": 9999}}]}

    assert power_text(table(120, 235)) == "; 80% power for its open pairs at ~235 repeats"
    assert f"more than {REPEATS_CAP:,} repeats" in power_text(table(120, None))
    assert power_text({"pairs": [{"status": "ordered"}]}) == ""
