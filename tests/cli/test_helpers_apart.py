"""Helper models (trained by a metric for its own scores) are stored and shown apart, never
ranked or contributed; a run says which helper trials it adds and why before it starts."""

import json
import sqlite3

from click.testing import CliRunner

from robench.cli import cli


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_a_run_says_which_helper_trials_it_adds_before_it_starts(helped):
    res = run("run", "-d", "tiny", "-m", "spy", "--metric", "helped", "--executor", "local",
              "--db", helped)
    assert res.exit_code == 0, res.output
    said = ("+ 1 helper trial(s) (1 to run) of 1 model(s) you did not ask for: centroid. "
            "Metric 'helped' (protocol 'helped') trains them for its own scores")
    out = " ".join(res.output.split())  # progress lines are wrapped to the width
    assert said in out
    assert out.index(said) < out.index("trials planned")
    again = run("run", "-d", "tiny", "-m", "spy", "--metric", "helped", "--executor", "local",
                "--db", helped)
    assert "+ 1 helper trial(s) (0 to run)" in again.output


def test_helpers_are_shown_apart_never_ranked_or_contributed(helped, tmp_path):
    assert run("run", "-d", "tiny", "-m", "spy", "--metric", "helped", "--executor", "local",
               "--db", helped).exit_code == 0
    rows = json.loads(run("results", "--db", helped, "--format", "json").output)
    assert {(r["model"], r["helper"]) for r in rows} == {("spy", False), ("centroid", True)}
    text = run("results", "--db", helped).output
    table = text.split("helper models")[0]
    assert "spy" in table and "centroid" not in table
    assert "  tiny: centroid (for helped)" in text
    # the site, from a merged database: the helper is neither ranked nor "contributed"
    merged = tmp_path / "all.db"
    assert run("merge", helped, "--contributor", "carol", "--db", merged).exit_code == 0
    site = tmp_path / "site"
    assert run("leaderboard", "--db", merged, "--out", site).exit_code == 0
    index = (site / "index.html").read_text()
    assert "models/spy.html" in index and "models/centroid.html" not in index
    models = (site / "models.html").read_text()
    table, helpers = models.split('<h2 id="helpers">')
    assert "carol" in table and "centroid" not in table
    assert "models/centroid.html" in helpers and "carol" not in helpers
    page = (site / "models/centroid.html").read_text()
    assert "Helper model</dt><dd>trained by helped on tiny" in page
    assert "Contributed by" not in page
    dataset = (site / "datasets/tiny.html").read_text()
    assert 'id="helpers"' in dataset and "(for helped)" in dataset
    # once someone asks for it, it is an ordinary model
    assert run("run", "-d", "tiny", "-m", "centroid", "--metric", "helped", "--executor",
               "local", "--db", helped).exit_code == 0
    rows = json.loads(run("results", "--db", helped, "--format", "json").output)
    assert not any(r["helper"] for r in rows)


def test_a_model_asked_for_is_no_helper_even_where_another_metric_trains_it(helped):
    from robench.storage.store import Store

    assert run("run", "-d", "tiny", "-m", "spy", "-m", "centroid", "--metric", "helped",
               "--executor", "local", "--db", helped).exit_code == 0
    with Store(helped, readonly=True) as store:
        assert store.helper_models() == {}
    conn = sqlite3.connect(helped)
    assert conn.execute("SELECT count(DISTINCT model) FROM score_groups").fetchone()[0] == 2
    # a data set's own scores (model '') are no helper either, whatever trials they rest on
    conn.execute("UPDATE trials SET model = '' WHERE model = 'centroid'")
    conn.execute("UPDATE scores SET model = '' WHERE model = 'centroid'")
    conn.execute("DELETE FROM score_groups WHERE model = 'centroid'")
    conn.commit()
    conn.close()
    with Store(helped, readonly=True) as store:
        assert store.helper_models() == {}

