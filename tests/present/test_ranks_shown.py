"""Where ranks are shown (the site, `robench results --format json`, the metric report), they
are the paired rule's, the rule and its correction are stated, a model at chance has none and
says why, and an interval without bounds or with a bound below 0 says so."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.families.source_aware.rho import VERSION
from robench.families.source_aware.rho import aggregate as aggregate_rho
from robench.plugins import get_registry
from robench.present.site import build_site
from robench.run.ranking import refresh_ranks
from tests.helpers import save_scores
from robench.storage.store import Store


def trials(x, i, classes=10):
    out = []
    for kind, accs in (("exclusive", x), ("inclusive", i), ("random", i)):
        for r, acc in enumerate(accs):
            balanced = kind == "exclusive"  # protocol 2: held out in rotation, cycles of 5
            out.append({"kind": kind, "repeat": r, "accuracy": float(acc), "status": "ok",
                        "clusterer": "" if kind == "random" else "kmeans",
                        "params": {"k": 3, **({"held_out": "balanced"} if balanced else {})},
                        "extra": {"cycle": 5} if balanced else {},
                        "per_class": [float(acc)] * classes})
    return out


@pytest.fixture
def db(tmp_path):
    """Three models on one data set, scored by the real rho aggregate: a and b share a large
    partition effect and b is 0.01 below a in every repeat (marginal intervals overlap, the
    paired difference does not); "random" is at chance (E[AccI] ~10% of 10 classes, rho ~1)."""
    rng = np.random.default_rng(3)
    z = 0.05 * rng.standard_normal(10)
    models = {
        "a": (0.80 + z + 0.002 * rng.standard_normal(10), 0.95 + 0.005 * rng.standard_normal(10)),
        "b": (0.79 + z + 0.002 * rng.standard_normal(10), 0.95 + 0.005 * rng.standard_normal(10)),
        "random": (0.10 + 0.01 * np.tile([1, -1], 5), 0.10 + 0.01 * np.tile([-1, 1], 5)),
    }
    scores = []
    for name, (x, i) in models.items():
        scores += aggregate_rho({"dataset": "d", "model": name, "clusterer": "kmeans"},
                                trials(x, i))
    path = tmp_path / "r.db"
    store = Store(path)
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    save_scores(store, scores, run_id, {"rho": (VERSION, "rho")})
    refresh_ranks(store, get_registry())  # as a run does once its scores are stored
    store.finish_run(run_id, "ok", n_ok=1)
    store.close()
    return path


def test_results_json_carries_each_rank_the_rule_and_why_not(db):
    res = CliRunner().invoke(cli, ["results", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["model"]: r for r in json.loads(res.output) if r["score"] == "rho"}
    assert rows["a"]["ranking"]["rank"] == 1 and rows["b"]["ranking"]["rank"] == 2
    assert rows["a"]["ranking"]["rank_interval"] == "1"
    assert rows["b"]["ranking"]["rank_interval"] == "2"
    assert (rows["b"]["ranking"]["rank_best"], rows["b"]["ranking"]["rank_worst"]) == (2, 2)
    rule = rows["a"]["ranking"]["rule"]
    assert "paired difference" in rule and "rank intervals from all 1 pair" in rule
    assert "Holm-corrected" in rule and "complete cycles" in rule
    assert rows["a"]["ranking"]["pairs"] == [{"pair": ["a", "b"], "status": "ordered",
                                              "above": "a", "difference": pytest.approx(0.01, abs=0.005),
                                              "n": 10, "margin": 0.05, "degraded_repeat": None,
                                              "verdict": "ordered"}]
    chance = rows["random"]["ranking"]
    assert chance["rank"] is None and chance["unranked"].startswith("at chance: E[AccI] 10.0%")
    # the rank is the table's, also when --model shows one model
    res = CliRunner().invoke(cli, ["results", "--db", str(db), "--format", "json", "-m", "b"])
    one = [r for r in json.loads(res.output) if r["score"] == "rho"]
    assert [r["ranking"]["rank_interval"] for r in one] == ["2"]
    acc = next(r for r in json.loads(res.output) if r["score"] == "acc_exclusive")
    assert acc["ranking"] is None  # only the ranked score carries a rank


def test_metric_report_states_the_rule_and_the_chance_model(db):
    res = CliRunner().invoke(cli, ["results", "--db", str(db), "--metric", "rho"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    head = next(i for i, t in enumerate(lines) if "ranked by rho" in t)
    rule = next(i for i, t in enumerate(lines) if t.startswith("  ranks: "))
    said = " ".join(" ".join(lines[rule:]).split())  # the rule under the table, wrapped
    assert rule > head and "Holm-corrected" in said
    assert "no rank where E[AccI] is not shown above chance plus the margin" in said
    assert next(t for t in lines if " random " in t).lstrip().startswith("-  - random")
    assert any(t.strip().startswith("random: at chance") for t in lines)


def test_site_shows_paired_ranks_the_rule_and_at_chance(db, tmp_path):
    store = Store(db, readonly=True)
    site = tmp_path / "site"
    build_site(store, site)
    page = (site / "datasets" / "d.html").read_text()
    assert "rank intervals from all 1 pair" in page and "Holm-corrected" in page
    assert "Rank (# est.)" in page and 'title="position by the estimate' in page
    assert 'class="unranked"' in page and ">at chance<" in page
    assert "random: at chance: E[AccI]" in page.replace('<a href="../models/random.html">random</a>',
                                                        "random")
    index = (site / "index.html").read_text()
    assert ">at chance<" in index and "Holm-corrected" in index


def test_results_csv_carries_the_rank_interval(db):
    import csv
    import io

    res = CliRunner().invoke(cli, ["results", "--db", str(db), "--format", "csv"])
    assert res.exit_code == 0, res.output
    rows = [r for r in csv.DictReader(io.StringIO(res.output)) if r["score"] == "rho"]
    got = {r["model"]: (r["rank_interval"], r["rank_estimate"], r["unranked"][:9]) for r in rows}
    assert got == {"a": ("1", "1", ""), "b": ("2", "2", ""), "random": ("", "", "at chance")}
