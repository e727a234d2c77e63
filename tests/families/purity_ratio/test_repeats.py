"""Purity-ratio with uncertainty (issue 42, point 4): repeats of the reference model, an
interval over them, ranks by the paired rule of every table (rank intervals), the chance guard.
"""

import math

import numpy as np
import pytest

from robench.families.purity_ratio import leaderboard as lb
from robench.families.purity_ratio import metric as pm
from robench.families.purity_ratio import protocol as cl
from robench.learn.reference_model import reference_seed, reference_split


def per_repeat_values(rows: list) -> dict:
    """Return {dataset: {model: {repeat: {name: value}}}} from the headline scores'
    ``details["per_repeat"]`` (what the validation reads per repeat); a repeat that is not a
    whole number (a damaged row) pairs nothing."""
    out: dict = {}
    for r in rows:
        head = (r.get("metric"), r.get("score")) == (pm.METRIC, pm.METRIC)
        if not head or r.get("model") == pm.ZOO_MODEL:
            continue
        per = (r.get("details") or {}).get("per_repeat")
        if not isinstance(per, dict) or not isinstance(per.get("repeats"), list):
            continue
        model = out.setdefault(r["dataset"], {}).setdefault(r["model"], {})
        for j, rep in enumerate(per["repeats"]):
            if isinstance(rep, int) and not isinstance(rep, bool):
                model[rep] = {name: vals[j] if j < len(vals) else None
                              for name, vals in (per.get("values") or {}).items()}
    return out


# --- repeats: own key, own seed, shared across models -----------------------------------------


def test_reference_seed_is_the_run_seed_at_repeat_0_and_coverages_seed_after():
    from robench.families.coverage.protocol import repeat_seed

    assert reference_seed(7, 0) == 7
    seeds = [reference_seed(7, r) for r in range(6)]
    assert len(set(seeds)) == 6
    # the coverage protocol's repeat r trains the same reference model (one training)
    assert seeds == [repeat_seed(7, r) for r in range(6)]


@pytest.fixture
def clus_registry():
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["tests.plugins.tiny_clusterability", "tests.plugins.tiny"],
                        load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)


def _config(models, zoo, repeats, **knobs):
    from tests.helpers import run_config

    return run_config(
        datasets=["tiny-images"], models=models, clusterers=["kmeans"],
        metrics=["purity-ratio"], executor="local", repeats=repeats,
        train={"max_epochs": 15, "patience": 15, "lr": 0.01, "batch_size": 32},
        clusterability={"zoo": zoo, "corruptions": ["gaussian-noise"], "corruption_cap": 12,
                        "attack_cap": 12, "attacks": ["fgsm"], "epsilons": [0.1],
                        "scale": "none", **knobs})


def test_every_repeat_is_planned_under_its_own_key(clus_registry):
    from robench.run.trials import Combo

    cfg = _config(["feat-centroid"], ["mlp", "feat-centroid"], repeats=4)
    combo = Combo(clus_registry.get("datasets", "tiny-images"),
                  clus_registry.get("models", "feat-centroid"), None)
    specs = cl.plan(combo, cfg, clus_registry)
    by_model: dict = {}
    for s in specs:
        by_model.setdefault(s["model"], []).append(s)
    assert sorted(by_model) == ["feat-centroid", "mlp"]
    for model, mine in by_model.items():
        assert [s["repeat"] for s in mine] == [0, 1, 2, 3]
        assert all(s["seed"] == cfg.seed and s["versions"]["protocol"] == cl.VERSION
                   for s in mine)
    keys = [s["key"] for s in specs]
    assert len(set(keys)) == len(keys) == 8
    # one more repeat adds one trial per model and keeps every earlier key
    more = cl.plan(combo, _config(["feat-centroid"], ["mlp", "feat-centroid"], repeats=5),
                   clus_registry)
    assert set(keys) < {s["key"] for s in more} and len(more) == 10


def test_each_repeat_trains_on_its_own_seed_and_split(clus_registry, tmp_path, monkeypatch):
    from robench.run.trials import TrialEnv

    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cfg = _config(["mlp"], [], repeats=2, attacks=[], corruptions=[])
    ds = clus_registry.get("datasets", "tiny-images")
    env = TrialEnv(clus_registry)
    rows = [cl.run(cl.trial_spec(ds, "mlp", cfg, clus_registry, r), env) for r in (0, 1)]
    assert [r["extra"]["reference_seed"] for r in rows] == [reference_seed(cfg.seed, 0),
                                                            reference_seed(cfg.seed, 1)]
    assert rows[0]["extra"]["reference_seed"] == cfg.seed
    # the seeds give different stratified test splits of the same size
    y = env.dataset("tiny-images").y
    tests = [reference_split(y, seed=r["extra"]["reference_seed"], test_size=cfg.test_size,
                             val_fraction=cfg.val_fraction)[2] for r in rows]
    assert len(tests[0]) == len(tests[1]) == rows[0]["n_test"]
    assert set(tests[0].tolist()) != set(tests[1].tolist())
    # two trained models, not one cached twice
    assert not rows[0]["extra"]["model_cache_hit"] and not rows[1]["extra"]["model_cache_hit"]


# --- stored trial rows -> scores -> the column -----------------------------------------------


def _table(purity: float, n: int = 900, k: int = 10) -> list:
    """Return a k-class contingency table (cluster i's majority is class i, n points per
    class) with the given purity (>= 1/k): each cluster keeps purity * n of its class and
    takes the rest evenly from the other classes."""
    keep = int(round(purity * n))
    rest = [(n - keep) // (k - 1) + (j < (n - keep) % (k - 1)) for j in range(k - 1)]
    return [[keep if j == i else rest[(j - i - 1) % k] for j in range(k)] for i in range(k)]


def _trial(model, repeat, p, acc=0.9, zoo=False):
    """Return a stored trial row whose p_purity combined is ``p`` at Model_ACC ``acc``."""
    c = math.sqrt(p * acc)  # C_purity of k-means = C_purity of the multicut
    return {"protocol": "clusterability", "model": model, "repeat": repeat, "status": "ok",
            "params": {"zoo_member": zoo}, "spec": {"zoo": []},
            "extra": {"model_acc": acc, "reference_seed": reference_seed(0, repeat),
                      "n_test": 9000, "kmeans": {"k": 10, "contingency": _table(c)},
                      "multicut": {"n": 9000, "contingency": _table(c)},
                      "corruptions": {"not_applicable": "tabular"},
                      "adversarial": {"not_applicable": "tabular"}}}


def _rows(per_model: dict, acc=None) -> list:
    """Return the stored score rows (dicts) of models' per-repeat p_purity values."""
    acc = acc or {}
    trials = [_trial(m, r, p, acc.get(m, 0.9)) for m, ps in per_model.items()
              for r, p in enumerate(ps)]
    scores = pm.aggregate({"dataset": "d"}, trials)
    return [{**s.__dict__} for s in scores]


def _by_model(rows):
    return {r["model"]: r for r in lb.section(rows)["models"]}


def test_the_score_is_the_mean_over_repeats_with_a_t_interval_and_every_repeat_kept():
    from scipy import stats

    from robench.stats.intervals import skewed_mean_interval

    ps = [0.80, 0.84, 0.78, 0.86]
    rows = _rows({"a": ps, "b": [0.7, 0.71, 0.69, 0.72]})
    head = next(r for r in rows if r["model"] == "a" and r["score"] == "purity-ratio")
    # the per-repeat contingency tables round to whole counts: p within 1e-3 of the target
    assert head["value"] == pytest.approx(np.mean(ps), abs=1e-3)
    got = head["details"]["per_repeat"]["values"]["purity-ratio"]
    half = stats.t.ppf(0.975, 3) * np.std(got, ddof=1) / 2
    hall = skewed_mean_interval(got)  # metric version 5: Hall's, wider than Student's
    assert (head["ci_low"], head["ci_high"]) == pytest.approx((hall.low, hall.high))
    assert hall.low < np.mean(got) - half and hall.high > np.mean(got) + half
    assert head["details"]["interval"]["method"].startswith("Hall's skew-corrected")
    assert head["n"] == 4 and head["details"]["per_repeat"]["repeats"] == [0, 1, 2, 3]
    assert head["details"]["per_repeat"]["seeds"] == [reference_seed(0, r) for r in range(4)]
    # every repeat's indicators, by model and repeat, for the claims
    values = per_repeat_values(rows)["d"]
    assert sorted(values) == ["a", "b"] and sorted(values["a"]) == [0, 1, 2, 3]
    assert values["a"][2]["purity-ratio"] == pytest.approx(0.78, abs=1e-3)
    assert values["a"][2]["model_acc"] == 0.9
    assert "p_purity_kmeans" in values["a"][0]


def test_point_estimates_that_differ_but_are_undecided_show_rank_1_2():
    rows = _rows({"a": [0.80, 0.82, 0.78], "b": [0.75, 0.80, 0.70]})
    got = _by_model(rows)
    assert got["a"]["value"] > got["b"]["value"]
    assert (got["a"]["rank"], got["b"]["rank"]) == (1, 2)  # order of the estimates
    assert got["a"]["rank_interval"] == got["b"]["rank_interval"] == "1-2"
    assert all(r["unranked"] is None for r in got.values())
    # what robench results and the ranks table store
    ranks = {r["model"]: r for r in lb.ranks(rows)}
    assert ranks["a"]["rank_interval"] == "1-2" and ranks["a"]["pairs"][0]["status"] == "undecided"


def test_the_same_pair_is_decided_with_enough_repeats():
    rng = np.random.default_rng(0)
    a = list(0.95 + 0.01 * rng.standard_normal(30))
    b = list(0.40 + 0.01 * rng.standard_normal(30))
    got = _by_model(_rows({"a": a, "b": b}))
    assert (got["a"]["rank_interval"], got["b"]["rank_interval"]) == ("1", "2")
    # the skew-corrected t (independent repeats): a gap of 40 sd is ordered at 3 repeats
    # too (the betting test it replaced decided nothing at 3), a gap of 1 sd is not
    got3 = _by_model(_rows({"a": a[:3], "b": b[:3]}))
    assert (got3["a"]["rank_interval"], got3["b"]["rank_interval"]) == ("1", "2")
    close = _by_model(_rows({"a": a[:3], "b": [a[0] - 0.02, a[1], a[2] - 0.01]}))
    assert close["a"]["rank_interval"] == "1-2"


def test_a_model_at_chance_is_not_ranked_and_costs_the_others_nothing():
    rng = np.random.default_rng(1)
    per = {"a": list(0.95 + 0.01 * rng.standard_normal(30)),
           "b": list(0.40 + 0.01 * rng.standard_normal(30)),
           "guess": list(1.0 + 0.01 * rng.standard_normal(30))}
    # 10 classes: chance 10%, bar 19%; "guess" is at 15% in every repeat
    got = _by_model(_rows(per, acc={"guess": 0.15}))
    assert got["guess"]["rank"] is None and got["guess"]["unranked"].startswith("at chance")
    assert (got["a"]["rank_interval"], got["b"]["rank_interval"]) == ("1", "2")


def test_one_repeat_gives_no_interval_and_no_rank():
    got = _by_model(_rows({"a": [0.8], "b": [0.7]}))
    assert all(r["rank"] is None and r["unranked"] == lb.FEW_REPEATS
               for r in got.values())
    assert got["a"]["interval"] == "none" and "2 repeats" in got["a"]["interval_note"]
    assert lb.section(_rows({"a": [0.8], "b": [0.7]}))["rule"] == lb.FEW_REPEATS


def test_the_terminal_summary_and_report_show_the_interval_and_rank_interval():
    from robench.families.purity_ratio.report import report_lines
    from robench.present.summary import summary_lines

    rows = _rows({"a": [0.80, 0.82, 0.78], "b": [0.75, 0.80, 0.70]})
    sections = {"purity-ratio": type("S", (), {"headline": staticmethod(lb.headline)})()}
    text = "\n".join(summary_lines(rows, sections)["lines"])
    assert "1-2" in text and "[0.676, 0.934]" in text  # Hall's interval of a's 3 repeats
    report = "\n".join(report_lines(rows))
    assert "1-2 #1" in report and "1-2 #2" in report and "ranks: rank intervals" in report


# --- the interval's coverage, by simulation -------------------------------------------------


def _coverage(draw, true, repeats, runs=4000, seed=0, skewed=True):
    """Return the share of simulated runs whose interval over ``repeats`` values covers
    ``true`` (the headline's skew-corrected one, or Student's); ``draw(rng, shape)`` gives
    per-repeat purity ratios."""
    rng = np.random.default_rng(seed)
    x = draw(rng, (runs, repeats))
    hit = 0
    for row in x:
        low, high, _ = pm._interval(list(row), skewed=skewed)
        hit += low <= true <= high
    return hit / runs


def _beta(mean, sd):
    k = mean * (1 - mean) / sd ** 2 - 1
    return mean * k, (1 - mean) * k


#: Per-repeat p_purity shapes: (draw, true mean). "skewed": Beta with skewness -1.3 (a few
#: repeats far below the rest, e.g. a k-means run that merged two classes); "merge": a
#: discrete mixture, p drops by 0.1 in 20% of repeats, on normal noise of sd 0.02.
SHAPES = {
    "normal": (lambda rng, s: 0.8 + 0.04 * rng.standard_normal(s), 0.8),
    "skewed": (lambda rng, s: rng.beta(*_beta(0.9, 0.08), s), 0.9),
    "merge": (lambda rng, s: 0.85 - 0.1 * (rng.random(s) < 0.2)
              + 0.02 * rng.standard_normal(s), 0.85 - 0.02),
}


@pytest.mark.parametrize("shape,repeats", [
    ("normal", 3), ("normal", 10), ("skewed", 3), ("skewed", 10), ("skewed", 30),
    ("merge", 5), ("merge", 10), ("merge", 30),
])
def test_the_interval_covers_by_simulation(shape, repeats):
    # nominal 95%; 4,000 runs: Monte Carlo sd 0.35 points: the headline's skew-corrected
    # interval covers 95% (-2 MC SE) on every shape (Student's: 86-92% on skewed and merge)
    draw, true = SHAPES[shape]
    assert _coverage(draw, true, repeats, runs=1500) >= 0.95 - 2 * 0.0056


def test_students_interval_falls_short_on_heavy_skew_at_few_repeats():
    # the control: the interval of metric version 4 (Student's) on the same shapes
    draw, true = SHAPES["skewed"]
    assert _coverage(draw, true, 3, skewed=False) < 0.935


def test_another_headline_shows_its_rank_interval_beside_the_rank_column():
    from robench.present.summary import summary_lines

    rows = _rows({"a": [0.80, 0.82, 0.78], "b": [0.75, 0.80, 0.70]})
    first = [{"dataset": "d", "model": m, "metric": "first", "score": "first", "value": v}
             for m, v in (("a", 0.5), ("b", 0.6))]

    def ranked_first(mine):
        return {"label": "first", "rule": "a rule", "rows": [
            {"model": "b", "value": 0.6, "rank": 1, "rank_interval": "1"},
            {"model": "a", "value": 0.5, "rank": 2, "rank_interval": "2"}]}

    sections = {"first": type("F", (), {"headline": staticmethod(ranked_first)})(),
                "purity-ratio": type("S", (), {"headline": staticmethod(lb.headline)})()}
    lines = summary_lines(rows + first, sections)["lines"]
    assert "purity-ratio (rank)" in lines[1]  # the header, under the data set's name
    assert any(line.split()[:2] == ["1", "b"] and line.endswith("(1-2)") for line in lines)


def test_robench_run_purity_ratio_end_to_end_on_digits(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from robench.cli import cli

    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    db = str(tmp_path / "r.db")
    argv = ["run", "-d", "digits", "-m", "mlp", "-m", "cnn-1", "--metric", "purity-ratio",
            "-r", "2", "--executor", "local", "--db", db,
            "--set", "train.max_epochs=2", "--set", "clusterability.zoo=[]",
            "--set", 'clusterability.corruptions=["gaussian-noise"]',
            "--set", "clusterability.corruption_cap=20", "--set", "clusterability.attack_cap=10",
            "--set", 'clusterability.attacks=["fgsm"]', "--set", "clusterability.epsilons=[0.1]"]
    res = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = res.stdout[res.stdout.index("digits"):]
    # the purity-ratio column is the rank column here: value [95% CI] and rank intervals
    assert "purity-ratio [95% CI]" in summary
    shown = [line.split() for line in summary.splitlines() if line.strip().startswith("1-2")]
    assert sorted(s[1] for s in shown) == ["cnn-1", "mlp"], summary
    out = CliRunner().invoke(cli, ["results", "--metric", "purity-ratio", "--format", "json",
                                   "--db", db], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    heads = [r for r in json.loads(out.output) if r["score"] == "purity-ratio"
             and r["model"] in ("mlp", "cnn-1")]
    assert len(heads) == 2
    for r in heads:
        assert r["n"] == 2 and r["ci_low"] <= r["value"] <= r["ci_high"]
        assert r["ranking"]["rank_interval"] == "1-2"
        assert r["details"]["per_repeat"]["repeats"] == [0, 1]
    # every repeat is its own stored trial, with its own seed
    import sqlite3

    with sqlite3.connect(db) as conn:
        trials = conn.execute("SELECT model, repeat, key FROM trials WHERE protocol = "
                              "'clusterability'").fetchall()
    assert sorted((m, r) for m, r, _ in trials) == [("cnn-1", 0), ("cnn-1", 1), ("mlp", 0),
                                                    ("mlp", 1)]
    assert len({k for _, _, k in trials}) == 4
    again = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert again.exit_code == 0
    assert "4 trials planned: 4 already stored (training nothing)" in again.output


def test_models_are_paired_by_repeat_and_a_failed_repeat_is_left_out():
    # a split effect shared by both models within a repeat (sd ~0.3) and a constant gap of
    # 0.1: paired by repeat the difference is exactly 0.1 and 30 repeats order the pair; the
    # same values with one model's repeats shuffled (the pairing broken: the control, a gap
    # of 0.2 sd of the unpaired differences) do not
    rng = np.random.default_rng(3)
    shared = np.clip(0.4 * rng.standard_normal(30), -0.45, 0.45)
    a, b = list(0.6 + shared), list(0.5 + shared)
    got = _by_model(_rows({"a": a, "b": b}))
    assert (got["a"]["rank_interval"], got["b"]["rank_interval"]) == ("1", "2")
    shuffled = _by_model(_rows({"a": list(rng.permutation(a)), "b": b}))
    assert shuffled["a"]["rank_interval"] == shuffled["b"]["rank_interval"] == "1-2"
    # a failed repeat: the others make the score, the failure is said
    trials = [_trial("a", r, p) for r, p in enumerate([0.8, 0.9, 0.7])]
    trials[1] = {**trials[1], "status": "failed", "error": "RuntimeError: boom"}
    head = next(s for s in pm.aggregate({"dataset": "d"}, trials)
                if s.model == "a" and s.score == "purity-ratio")
    assert head.n == 2 and head.details["failed_repeats"] == [1]
    assert head.details["per_repeat"]["repeats"] == [0, 2]
    assert head.value == pytest.approx(0.75, abs=1e-3)


def test_damaged_per_repeat_details_pair_nothing_and_break_nothing():
    rows = _rows({"a": [0.80, 0.82, 0.78], "b": [0.75, 0.80, 0.70]})
    for r in rows:
        if r["model"] == "a" and r["score"] == "purity-ratio":
            r["details"]["per_repeat"]["repeats"] = ["x", None, 2.5]
    got = _by_model(rows)
    assert got["a"]["rank"] is None and got["a"]["unranked"] == lb.FEW_REPEATS
    assert got["b"]["rank_interval"] == "1"  # alone among the ranked
    assert per_repeat_values(rows)["d"]["a"] == {}


def test_a_zoo_helper_is_shown_never_ranked_and_not_counted_in_the_ranks():
    """The validation's zoo models are trained for its correlations: a helper above every
    model the user asked for takes no rank and widens no one's rank interval."""
    rng = np.random.default_rng(2)
    per = {"a": list(0.80 + 0.01 * rng.standard_normal(30)),
           "b": list(0.40 + 0.01 * rng.standard_normal(30)),
           "zoo-x": list(0.95 + 0.01 * rng.standard_normal(30))}
    trials = [_trial(m, r, p, zoo=(m == "zoo-x")) for m, ps in per.items()
              for r, p in enumerate(ps)]
    rows = [{**s.__dict__} for s in pm.aggregate({"dataset": "d"}, trials)]
    got = _by_model(rows)
    assert got["zoo-x"]["rank"] is None and "zoo" in got["zoo-x"]["unranked"]
    assert (got["a"]["rank_interval"], got["b"]["rank_interval"]) == ("1", "2")
