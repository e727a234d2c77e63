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
