"""One ranking everywhere: the SQL ``leaderboard`` view, ``robench results --format json``, the
site's tables and its badges give each model the same rank (rank intervals ``1-2``); helper models are
never in the view; a metric without an interval ranks nobody."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from robench.cli import cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "docs.db"
#: The caption of each ranked metric's table on a data set page (the clusterer follows rho's).
CAPTIONS = {"rho": "by rho, sources by clusterer", "purity-ratio": "purity combined",
            "coverage": "by coverage-guided accuracy"}


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """tests/fixtures/docs.db migrated (its ranks stored), and its site."""
    tmp = tmp_path_factory.mktemp("ranks")
    db = tmp / "docs.db"
    shutil.copyfile(FIXTURE, db)
    run = CliRunner().invoke
    res = run(cli, ["migrate", "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = run(cli, ["leaderboard", "--db", str(db), "--out", str(tmp / "site")])
    assert res.exit_code == 0, res.output
    return db, tmp / "site"


def site_ranks(page: str) -> dict:
    """Return {(table caption, model): rank text} of every ranked table on a data set page."""
    out = {}
    for caption, body in re.findall(r"<caption>(.*?)</caption>(.*?)</tbody>", page, re.S):
        # the rank shown: a rank interval (then the estimate's position, #1, in a span) or a
        # rank with a tie mark; an unranked model's "—" carries its marker (at chance, ...)
        for m in re.finditer(r'<td class="rank"[^>]*>([^<]*)(<span class="tie"[^>]*>=</span>)?'
                             r'(?:\s*<span class="ci"[^>]*>[^<]*</span>)?'
                             r'(?:\s*<span class="unranked"[^>]*>[^<]*</span>)?</td>'
                             r'\s*<th scope="row" class="model">(?:<a [^>]*>)?([^<]*)', body):
            text = m.group(1).strip() + ("=" if m.group(2) else "")
            out[(re.sub(r"<[^>]+>", "", caption).strip(), m.group(3).strip())] = text
    return out


def test_select_from_leaderboard_agrees_with_the_site(docs):
    db, site = docs
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        view = [dict(r) for r in conn.execute("SELECT * FROM leaderboard")]
    assert view, "the view ranks the fixture's tables"
    page = (site / "datasets" / "digits.html").read_text()
    shown = site_ranks(page)
    checked = 0
    for row in view:
        assert row["dataset"] == "digits"
        table = CAPTIONS[row["metric"]] + (f" {row['clusterer']}" if row["clusterer"] else "")
        mine = {text for (caption, model), text in shown.items()
                if model == row["model"] and table in caption}
        want = row["rank_text"] if row["rank_text"] is not None else "—"
        assert want in mine, (row["metric"], row["model"], want, shown)
        checked += 1
    assert checked == len(view)
    # undecided pairs are shown as rank intervals in both: the fixture's two rho models can
    # each hold rank 1 or 2
    rho = {r["model"]: r["rank_text"] for r in view if r["metric"] == "rho"}
    assert set(rho.values()) == {"1-2"}


def test_results_json_and_badges_give_the_views_ranks(docs):
    db, site = docs
    with sqlite3.connect(db) as conn:
        view = {(m, metric, c or ""): (rank, text, n) for m, metric, c, rank, text, n in
                conn.execute("SELECT model, metric, clusterer, rank, rank_text, n_ranked "
                             "FROM leaderboard")}
    res = CliRunner().invoke(cli, ["results", "--db", str(db), "--format", "json"])
    rows = json.loads(res.output)
    for r in rows:
        key = (r["model"], r["metric"], r.get("clusterer") or "")
        if r["score"] == r["metric"] and key in view:
            assert (r.get("ranking") or {}).get("rank") == view[key][0], key
    checked = 0
    for (model, metric, clusterer), (rank, text, n) in view.items():
        badge = site / "badges" / f"{model}--digits--{metric}.svg"
        if badge.is_file() and rank is not None:
            assert f"rank {text} of {n} · " in badge.read_text(), badge
            checked += 1
    assert checked


def test_helpers_and_metrics_without_an_interval_take_no_rank_in_the_view(docs):
    db, _ = docs
    with sqlite3.connect(db) as conn:
        models = {m for (m,) in conn.execute("SELECT DISTINCT model FROM leaderboard")}
        purity = conn.execute("SELECT model, rank, unranked FROM leaderboard "
                              "WHERE metric = 'purity-ratio'").fetchall()
        helpers = {m for (m,) in conn.execute(
            "SELECT DISTINCT model FROM scores WHERE dataset = 'digits' AND model NOT IN "
            "(SELECT model FROM score_groups WHERE dataset = 'digits') AND model IN "
            "(SELECT model FROM trials)")}
    assert not models & helpers
    # purity-ratio stores no interval in the fixture (one reference model): listed, unranked
    assert purity and all(rank is None and "no interval" in why for _, rank, why in purity)


# ---------------------------------------------------------------- a tiny run, every view

TINY = ["-d", "tiny", "-m", "centroid", "-m", "spy", "-m", "shuffled", "-c", "kmeans",
        "-k", "3", "--executor", "local", "--metric", "rho", "-r", "3"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny run (two equal models and one at chance) and the output of its summary."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    tmp = tmp_path_factory.mktemp("tiny")
    db = str(tmp / "r.db")
    try:
        res = CliRunner().invoke(cli, ["run", *TINY, "--db", db])
        assert res.exit_code == 0, res.output
        yield db, res.output, tmp
    finally:
        set_registry(None)


def every_view(db: str, out: Path) -> dict:
    """Return {view: {model: rank text}} of the rho table from every view of ``db``."""
    from robench.present.summary import rank_text

    run = CliRunner().invoke
    views = {}
    res = run(cli, ["results", "--db", db, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.output) if r["score"] == "rho"]
    views["json"] = {r["model"]: rank_text(r["ranking"]).replace("-", "—") if
                     r["ranking"].get("rank") is None else rank_text(r["ranking"]) for r in rows}
    views["json verdicts"] = {r["model"]: json.dumps(r["ranking"].get("pairs"), sort_keys=True)
                              for r in rows}
    res = run(cli, ["results", "--db", db, "--format", "csv"])
    assert res.exit_code == 0, res.output
    import csv
    import io

    rows = [r for r in csv.DictReader(io.StringIO(res.output)) if r["score"] == "rho"]
    views["csv"] = {r["model"]: r["rank_interval"] or "—" for r in rows}
    res = run(cli, ["query", "select model, rank_text from leaderboard where metric = 'rho'",
                    "--db", db, "--format", "json"])
    assert res.exit_code == 0, res.output
    views["sql"] = {r["model"]: r["rank_text"] or "—" for r in json.loads(res.output)}
    res = run(cli, ["leaderboard", "--db", db, "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = (out / "datasets" / "tiny.html").read_text()
    views["site"] = {model: text for (caption, model), text in site_ranks(page).items()
                     if CAPTIONS["rho"] + " kmeans" in caption}
    views["badges"] = {}
    for model in ("centroid", "spy", "shuffled"):
        badge = out / "badges" / f"{model}--tiny--rho.svg"
        found = re.search(r"rank (\S+) of \d+ · ", badge.read_text()) if badge.is_file() else None
        views["badges"][model] = found.group(1) if found else "—"
    return views


def summary_ranks(output: str) -> dict:
    """Return {model: rank text} of the run summary's tiny table."""
    out = {}
    for line in output.splitlines():
        m = re.match(r"\s+(\S+) (centroid|spy|svm|shuffled)\s", line)
        if m:
            out[m.group(2)] = "—" if m.group(1) == "-" else m.group(1)
    return out


def test_every_view_of_a_run_gives_the_same_rank_and_verdicts(tiny_run):
    db, summary, tmp = tiny_run
    views = every_view(db, tmp / "site")
    views["summary"] = summary_ranks(summary)
    # two equal models: neither shown better, each can hold rank 1 or 2; one at chance
    want = {"centroid": "1-2", "spy": "1-2", "shuffled": "—"}
    for name in ("json", "csv", "sql", "site", "summary"):
        assert views[name] == want, (name, views)
    assert views["badges"] == {"centroid": "1-2", "spy": "1-2", "shuffled": "—"}
    # the pair verdicts are the stored ones, the same for both models of the pair
    pairs = {json.dumps(p, sort_keys=True) for v in views["json verdicts"].values()
             for p in json.loads(v) or []}
    assert len(pairs) == 1, views["json verdicts"]


def test_no_view_calls_a_sections_ranks(tiny_run):
    """After the run every view reads the stored ranks: a section's ``ranks`` that raises
    changes nothing any of them shows."""
    from robench.plugins import get_registry

    db, summary, tmp = tiny_run
    before = every_view(db, tmp / "before")
    calls = []

    def refuse(rows):
        calls.append(len(rows))
        raise AssertionError("a view ranked again")

    sections = {s.leaderboard: s.leaderboard.ranks for s in get_registry().all("metrics")
                if s.leaderboard is not None and s.leaderboard.ranks is not None}
    try:
        for section in sections:  # a frozen dataclass: set behind its back, put back below
            object.__setattr__(section, "ranks", refuse)
        after = every_view(db, tmp / "after")
    finally:
        for section, ranks in sections.items():
            object.__setattr__(section, "ranks", ranks)
    assert sections and after == before
    assert not calls


def test_ranks_are_stored_for_every_configuration(tiny_run):
    """A second configuration (another repeat count) gets its own stored ranks, which
    `results --config` shows; the ranks table holds both."""
    db, _, _ = tiny_run
    run = CliRunner().invoke
    res = run(cli, ["run", *TINY[:-2], "-r", "2", "--db", db])
    assert res.exit_code == 0, res.output
    with sqlite3.connect(db) as conn:
        configurations = {c for (c,) in conn.execute(
            "SELECT DISTINCT configuration FROM ranks WHERE metric = 'rho'")}
        stored = {(c, m): json.loads(r) for c, m, r in conn.execute(
            "SELECT configuration, model, ranking FROM ranks WHERE metric = 'rho'")}
    assert len(configurations) == 2
    for configuration in configurations:
        res = run(cli, ["results", "--db", db, "--format", "json", "--config", configuration])
        rows = [r for r in json.loads(res.output) if r["score"] == "rho"]
        assert {r["model"] for r in rows} == {"centroid", "spy", "shuffled"}
        for r in rows:
            assert r["ranking"] == stored[(configuration, r["model"])]


def test_the_site_legend_is_written_from_the_stored_rule(tiny_run):
    """One legend text, from the rule the ranks were decided by (not the old adjacent '=')."""
    import html

    from robench.present.leaderboard import rank_legend

    db, _, tmp = tiny_run
    with sqlite3.connect(db) as conn:
        rules = {r for (r,) in conn.execute("SELECT DISTINCT rule FROM ranks") if r}
    assert len(rules) == 1
    res = CliRunner().invoke(cli, ["leaderboard", "--db", db, "--out", str(tmp / "legend")])
    assert res.exit_code == 0, res.output
    legend = rank_legend(rules)
    assert rules.pop().rstrip(".") in legend
    for page in ("index.html", "datasets/tiny.html"):
        text = html.unescape(re.sub(r"\s+", " ", (tmp / "legend" / page).read_text()))
        assert legend in text, page
        assert "adjacent" not in text, page


def test_no_view_runs_the_ranking(tiny_run, monkeypatch):
    """The ranking code (rank_models) refusing to run anywhere but where ranks are stored
    (robench.run.ranking.compute_ranks): every view, the tables of `robench results` and the
    summary of a rerun show the same ranks as before."""
    import contextlib

    import robench.present.leaderboard as board
    import robench.run.ranking as ranking

    db, summary, tmp = tiny_run
    before = every_view(db, tmp / "before-models")
    table = CliRunner().invoke(cli, ["results", "--db", db, "--metric", "rho"]).output
    assert "1-2" in table
    storing, rank_models, computing = [], board.rank_models, ranking.computing_ranks

    @contextlib.contextmanager
    def marked():
        storing.append(True)
        try:
            with computing():
                yield
        finally:
            storing.pop()

    def refuse(*args, **kwargs):
        assert storing, "a view ranked again"
        return rank_models(*args, **kwargs)

    monkeypatch.setattr(ranking, "computing_ranks", marked)
    monkeypatch.setattr(board, "rank_models", refuse)
    # a rerun stores its ranks (nothing changed), then prints the summary from them
    rerun = CliRunner().invoke(cli, ["run", *TINY, "--db", db])
    assert rerun.exit_code == 0, rerun.output
    assert summary_ranks(rerun.output) == summary_ranks(summary) == before["sql"]
    assert every_view(db, tmp / "after-models") == before
    assert CliRunner().invoke(cli, ["results", "--db", db, "--metric", "rho"]).output == table


def test_every_view_of_a_raced_run_gives_the_stopping_looks_ranks(tmp_path):
    """The same views after `--until decided` (looks at every cycle, alpha spent): the ranks
    the race decided at the look it stopped at, in every view, and one interval label."""
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    try:
        db = str(tmp_path / "race.db")
        args = ["-d", "tiny", "-m", "centroid", "-m", "svm", "-m", "shuffled", "-c", "kmeans",
                "-k", "3", "--executor", "local", "--metric", "rho", "-r", "24",
                "--until", "decided", "--precision", "0.001", "--db", db]
        res = CliRunner().invoke(cli, ["run", *args])
        assert res.exit_code == 0, res.output
        views = every_view(db, tmp_path / "site")
        views["summary"] = summary_ranks(res.output)
    finally:
        set_registry(None)
    want = {"centroid": "1", "svm": "2", "shuffled": "—"}
    for name in ("json", "csv", "sql", "site", "summary"):
        assert views[name] == want, (name, views)
    badge = (tmp_path / "site" / "badges" / "svm--tiny--rho.svg").read_text()
    assert views["badges"]["centroid"] == "1" and "rank 2 of 2 · " in badge
    label = re.search(r"\[(\d+(?:\.\d+)?% CI)\]", res.output).group(1)
    assert label != "95% CI", "the stopping look's level, not the fixed one"
    page = (tmp_path / "site" / "datasets" / "tiny.html").read_text()
    assert f"[{label}]" in page
