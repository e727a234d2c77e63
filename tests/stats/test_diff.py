"""robench diff A B: shared scores, the change with its interval, a decision, exit 0/1/2."""

import json
import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.stats.diff import compare, diff_scores

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "8", "--executor", "local",
        "--metric", "rho", "-m", "centroid", "-m", "spy"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def copy_db(src, dst):
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


@pytest.fixture
def two_copies(tiny_registry, tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert run("run", *TINY, "--db", a).exit_code == 0
    copy_db(a, b)
    return a, b


def test_two_copies_of_one_database_are_unchanged_and_exit_0(two_copies):
    a, b = two_copies
    res = run("diff", a, b)
    assert res.exit_code == 0, res.output
    n = sqlite3.connect(a).execute("SELECT count(*) FROM scores WHERE value IS NOT NULL") \
        .fetchone()[0]
    assert f"{n} unchanged" in res.output and "0 worse" in res.output


def test_a_score_edited_down_is_worse_and_exits_1_in_every_format(two_copies):
    a, b = two_copies
    conn = sqlite3.connect(b)
    (value, low, high) = conn.execute("SELECT value, ci_low, ci_high FROM scores WHERE "
                                      "model = 'centroid' AND score = 'rho'").fetchone()
    conn.execute("UPDATE scores SET value = value - 0.5, ci_low = ci_low - 0.5, "
                 "ci_high = ci_high - 0.5 WHERE model = 'centroid' AND score = 'rho'")
    conn.commit()
    conn.close()
    res = run("diff", a, b, "--metric", "rho")
    assert res.exit_code == 1, res.output
    assert "tiny centroid kmeans rho rho: " in res.output and "worse" in res.output
    half = (high - low)  # both intervals as wide: sqrt(2) * half-width ~ 0.71 * width
    out = json.loads(run("diff", a, b, "--format", "json").output)
    (worse,) = [c for c in out["scores"] if c["decision"] == "worse"]
    assert worse["change"] == pytest.approx(-0.5)
    assert worse["high"] == pytest.approx(-0.5 + (2 * (half / 2) ** 2) ** 0.5)
    assert out["counts"]["worse"] == 1
    md = run("diff", a, b, "--format", "markdown")
    assert md.exit_code == 1 and "| `tiny` | `centroid` | `kmeans` | `rho` | `rho` |" in md.output
    # the other way round it got better, which is no failure
    assert run("diff", b, a, "--metric", "rho").exit_code == 0


def test_decisions_by_hand():
    base = dict(dataset="d", model="m", clusterer="", metric="rho", score="rho",
                configuration="c", metric_version="1", higher_is_better=True)
    a = dict(base, value=0.80, ci_low=0.75, ci_high=0.85)
    # half-widths 0.05 and 0.05: the change's interval is +-0.0707
    assert compare(a, dict(base, value=0.86, ci_low=0.81, ci_high=0.91))["decision"] == \
        "unchanged"
    assert compare(a, dict(base, value=0.90, ci_low=0.85, ci_high=0.95))["decision"] == "better"
    assert compare(a, dict(base, value=0.70, ci_low=0.65, ci_high=0.75))["decision"] == "worse"
    lower = dict(base, higher_is_better=False)
    assert compare(dict(lower, value=1.0), dict(lower, value=0.9))["decision"] == "better"
    # no interval on either side: any change beyond rounding counts
    assert compare(dict(base, value=0.5), dict(base, value=0.5 + 1e-12))["decision"] == \
        "unchanged"
    assert compare(dict(base, value=0.5), dict(base, value=0.499))["decision"] == "worse"
    # another metric version, model version or data: not comparable, with the reason
    c = compare(a, dict(a, metric_version="2"))
    assert c["decision"] == "not comparable" and "metric version 1 vs 2" in c["reason"]
    va = {"components": {"model": "0.1.0/1", "dataset_content": "x"}}
    vb = {"components": {"model": "0.2.0/1", "dataset_content": "x"}}  # plugin upgrade only
    assert compare(dict(a, versions=va), dict(a, versions=vb))["decision"] == "unchanged"
    vc = {"components": {"model": "0.2.0/2", "dataset_content": "y"}}
    c = compare(dict(a, versions=va), dict(a, versions=vc))
    assert c["decision"] == "not comparable" and "model 1 vs 2" in c["reason"] \
        and "dataset_content x vs y" in c["reason"]
    # the same score in another configuration only
    (row,) = diff_scores([a], [dict(a, configuration="other")])
    assert row["decision"] == "not comparable" and "configuration differs" in row["reason"]


def test_bad_input_is_refused_with_one_line(two_copies, tmp_path):
    a, _ = two_copies
    res = run("diff", a, tmp_path / "missing.db")
    assert res.exit_code == 2 and "no results database at" in res.output
    res = run("diff", a, a, "--metric", "nope")
    assert res.exit_code == 2 and "neither database has a score of metric 'nope'" in res.output
    assert "Traceback" not in res.output
