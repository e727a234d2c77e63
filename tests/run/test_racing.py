"""Racing on every paired metric and the time budget (``--budget``): issue 43."""

import math
import time
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from tests.helpers import run_config
from robench.run.adaptive import SPENDING, run_until_decided, with_repeats
from robench.run.config import REPEATS, parse_duration
from robench.run.runner import execute, plan_run
from robench.stats import paired
from robench.stats.sequential import cycle_looks
from tests.helpers import load_benchmark

simulations = load_benchmark("simulations")
error_rates, run_sequential = simulations.error_rates, simulations.run_sequential


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid", "svm"], clusterers=["kmeans"],
                metrics=["rho"], repeats=24, k=3, executor="local")
    base.update(kw)
    return run_config(**base)


# --- the budget's duration --------------------------------------------------------------------


def test_durations_parse_and_bad_ones_are_one_line_errors():
    assert [parse_duration(t) for t in ("90s", "10m", "1h", "1.5h", "45", " 2 min ")] == \
        [90.0, 600.0, 3600.0, 5400.0, 45.0, 120.0]
    for bad in ("", "ten minutes", "-1m", "0s", "10q", "1e9", "8d", "inf", "9" * 400):
        with pytest.raises(ValueError) as info:
            parse_duration(bad)
        assert "\n" not in str(info.value) and len(str(info.value)) < 120


def test_a_bad_budget_exits_2_with_one_line_before_the_database_is_touched(tiny_registry,
                                                                           tmp_path):
    from robench.cli import cli

    db = tmp_path / "r.db"
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "--budget", "soon",
                                   "--db", str(db)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--budget" in lines[0] and "Traceback" not in res.output
    assert not db.exists()


def test_a_budget_in_other_digits_is_refused_in_one_line(tiny_registry, tmp_path):
    """`--budget ١٠m` (Arabic-Indic digits) was taken as 10 minutes (issue 51): only ASCII
    digits make a duration."""
    from robench.cli import cli

    for text in ("١٠m", "１０m", "10m\u200b"):
        db = tmp_path / "r.db"
        res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "--budget", text,
                                       "--db", str(db)])
        assert res.exit_code == 2, (text, res.output)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "is not a duration" in lines[0]
        assert not db.exists()


def test_the_budget_help_gives_the_order_the_race_runs_in(tiny_registry, tmp_path,
                                                          monkeypatch):
    """--budget's help says: every table's first look, then the other metrics, then further
    looks (it said the other metrics first, issue 51); the race runs in that order."""
    import robench.run.runner
    from robench.cli import cli

    res = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    said = " ".join(res.output.split())
    assert ("each table's first look first, then the other metrics, then further looks only "
            "where one fits what is left") in said
    order = []
    real = robench.run.runner.execute

    def recording(cfg, registry, store, **kw):
        order.append(list(cfg.metrics))
        return real(cfg, registry, store, **kw)

    monkeypatch.setattr(robench.run.runner, "execute", recording)
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "-m", "svm", "-c",
                                   "kmeans", "--metric", "rho", "--metric", "lost-test", "-k",
                                   "3", "--repeats", "12", "--executor", "local", "--precision",
                                   "1e-9", "--budget", "10m", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
    assert order[:3] == [["rho"], ["lost-test"], ["rho"]]


# --- a deadline stops a run cleanly -----------------------------------------------------------


def test_a_deadline_stops_taking_trials_and_keeps_every_stored_one(tiny_registry, store):
    """The deadline passes while the first trial runs: that trial is stored, no other starts,
    the report says the budget is spent, and the stored trial is complete and reused."""
    c = cfg(repeats=3)
    events = []

    def slow_first(event, **info):
        events.append(event)
        if event == "trial" and events.count("trial") == 1:
            time.sleep(0.3)

    report = execute(c, tiny_registry, store, on_event=slow_first,
                     deadline=time.monotonic() + 0.2)
    assert report.budget_spent and report.n_ran == 1
    assert report.n_not_run == report.n_planned - 1
    assert "budget_spent" in events
    rows = store.trials()
    assert len(rows) == 1 and rows[0]["status"] == "ok"
    again = execute(c, tiny_registry, store)
    assert again.n_cached == 1 and not again.budget_spent
    assert again.n_ran == again.n_planned - 1


def test_a_look_that_does_not_fit_the_budget_is_not_started_and_its_cost_is_said(
        tiny_registry, store):
    """The first look (6 repeats at k = 3) is stored; with no time left the race takes no
    second look: nothing runs, the table stops 'undecided: ... time budget', and the
    summary's material (next_look: 9 repeats, the next complete cycle, its projected seconds
    from the stored durations) is recorded."""
    execute(cfg(repeats=6), tiny_registry, store)
    report = run_until_decided(cfg(repeats=24), tiny_registry, store, precision=1e-9,
                               alpha=1e-9, budget=1e-6)
    assert report.n_ran == 0
    (info,) = report.adaptive
    assert "time budget" in info["stopped"] and info["looks_taken"] == [6]
    assert info["next_look"]["repeats"] == 9
    assert set(info["next_look"]["models"]) == {"centroid", "svm"}
    assert info["next_look"]["seconds"] > 0
    assert {s["score"] for s in store.scores(metric="rho")} >= {"rho"}


def test_without_a_budget_the_same_race_takes_its_next_look(tiny_registry, store):
    """The control of the test above: the same store and race without a budget runs the
    second look (so the budget, not the data, stopped it there)."""
    execute(cfg(repeats=6), tiny_registry, store)
    report = run_until_decided(cfg(repeats=24), tiny_registry, store, precision=1e-9,
                               alpha=1e-9)
    (info,) = report.adaptive
    assert report.n_ran > 0 and info["looks_taken"][:2] == [6, 9]
    assert "budget" not in info["stopped"]


def test_the_cli_budget_races_and_prints_what_is_decided(tiny_registry, tmp_path):
    from robench.cli import cli

    db = tmp_path / "r.db"
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "-m", "svm", "-c",
                                   "kmeans", "--metric", "rho", "-k", "3", "--repeats", "12",
                                   "--executor", "local", "--budget", "10m", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "Decided (racing" in res.output and "rho 1 of 1 pairs in 1 table" in res.output


# --- every metric that declares a paired comparison races -------------------------------------


def test_a_metric_whose_repeats_are_a_knob_gets_each_looks_repeats():
    """coverage's repeats are the knob coverage.repeats: racing asks for a look's repeats
    through it, and its trials pair by repeat (the split and seed of repeat r do not depend
    on the model)."""
    from robench.plugins import get_registry

    reg = get_registry()
    spec = reg.get("metrics", "coverage")
    assert spec.paired is not None and spec.paired.repeats_knob == "coverage.repeats"
    base = run_config(datasets=["digits"], models=["mlp", "cnn-1"], clusterers=["kmeans"],
                      metrics=["coverage"], executor="local")
    plan = plan_run(with_repeats(base, spec, 7), reg)
    by_model = {}
    for s in plan.specs.values():
        by_model.setdefault(s["model"], []).append(s)
    assert {m: len(v) for m, v in by_model.items()} == {"mlp": 7, "cnn-1": 7}
    assert plan_run(base, reg).specs.keys() <= plan.specs.keys(), \
        "the profile's repeats are the first repeats of the larger plan (reused, not rerun)"
    from robench.families.coverage.protocol import repeat_seed

    assert {repeat_seed(s["seed"], s["repeat"]) for s in by_model["mlp"]} == \
        {repeat_seed(s["seed"], s["repeat"]) for s in by_model["cnn-1"]}


def test_coverage_pairs_its_trials_by_repeat():
    from robench.families.coverage.metric import interval_at, paired_values
    from robench.specs import Score

    extra = {"generated": {f"{m}@100": {"accuracy": a} for m, a in
                           (("0-100", 0.5), ("30-70", 0.6), ("50-50", 0.7), ("70-30", 0.8),
                            ("100-0", 0.9))}}
    row = {"protocol": "coverage", "status": "ok", "extra": extra, "repeat": 2}
    assert paired_values(row) == ("x", pytest.approx(0.7))
    assert paired_values({**row, "status": "failed"}) is None
    assert paired_values({**row, "extra": {"not_applicable": "no features"}}) is None
    s = Score(dataset="d", model="m", clusterer="", metric="coverage", score="coverage",
              value=0.7, details={"per_repeat": [0.6, 0.7, 0.8]})
    wide, narrow = interval_at(s, 0.99), interval_at(s, 0.95)
    assert wide.low < narrow.low < 0.7 < narrow.high < wide.high


def test_check_decided_accepts_coverage_alone():
    from robench.run.adaptive import check_decided

    c = run_config(datasets=["digits"], models=["mlp"], metrics=["coverage"])
    assert check_decided(c) == ["coverage"]


# --- racing with elimination keeps its familywise level on the design's shapes -----------------


def racing_tables(rng, runs, repeats, shape, k, rho_x, loadings, design="balanced"):
    """Return (x, i) of tables of models with true exclusive means ``rho_x`` (inclusive 0.9
    for all), hit by the held-out source's effect with ``loadings`` (the shapes of issue 41:
    skewed or a rare hard source), plus own noise."""
    m = len(rho_x)
    eff = paired.source_effects(rng, runs, k, shape)
    src = paired.held_out(rng, runs, repeats, k, design)
    s = np.take_along_axis(eff, src, -1)[:, None, :]
    x = (np.asarray(rho_x)[None, :, None] + np.asarray(loadings)[None, :, None] * s
         + 0.01 * rng.standard_normal((runs, m, repeats)))
    z = rng.standard_normal((runs, 1, repeats))
    i = 0.9 + 0.01 * (math.sqrt(0.8) * z + math.sqrt(0.2) * rng.standard_normal(
        (runs, m, repeats)))
    return x, i


@pytest.mark.parametrize("shape,k", [("lognormal", 5), ("hard", 5), ("hard", 10)])
def test_racing_with_elimination_keeps_the_familywise_level_on_skewed_shapes(shape, k):
    """Four models: two tied (equal rho, hit 0.02 and 0.06 by the source effect: the pair
    the hard source pushes apart), one far above, one far below. The far models are
    eliminated early (their pairs decide at the first look) while the tied pair races on to
    100 repeats, a look at every complete cycle with alpha spent as the race spends it: the
    probability of any wrong call in a table stays at or below 5% (+2 MC SE). The far
    models' repeats show the elimination happened."""
    runs = 800
    rng = np.random.default_rng(zlib.crc32(repr((shape, k, "race")).encode()))
    mean_x = [0.80, 0.70, 0.70, 0.55]
    x, i = racing_tables(rng, runs, 100, shape, k, mean_x, [0.03, 0.02, 0.06, 0.03])
    final = run_sequential(x, i, max_repeats=100, precision=0.005, cycle=k, spending=SPENDING)
    res = error_rates(final, np.array(mean_x) / 0.9, precision=0.005)
    assert res["any_wrong"] <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs), res
    reps = final["repeats"].mean(0)
    assert reps[0] < reps[1] and reps[3] < reps[2], reps  # the far models stopped first
    assert reps[0] <= 2 * k * 1.5
    if shape == "hard":
        # control: the same race where the held-out sources are drawn at random (the
        # balanced design absent): the hard source is no longer held out once a cycle, so
        # the paired test's degraded-run check sees it as a far repeat and leaves the tied
        # pair undecided in many tables (Student's t without the check called wrong orders
        # in 11% at p = 0.2, 23% at p = 0.1)
        x, i = racing_tables(rng, runs, 100, shape, k, mean_x, [0.03, 0.02, 0.06, 0.03],
                             design="random")
        final = run_sequential(x, i, max_repeats=100, precision=0.005, cycle=k, spending=SPENDING)
        assert (final["degraded"] >= 0).any(-1).mean() > 0.1


def test_the_decided_figure_replays_fixed_designs_and_the_race_from_stored_trials(
        tiny_registry, tmp_path):
    """benchmarks/decided.py on a raced tiny table: a fixed point for each profile whose
    repeats every model has, then the race's looks, CPU-seconds growing with the repeats."""
    import importlib.util
    from pathlib import Path

    from robench.storage.store import Store

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "decided.py"
    mod = importlib.util.spec_from_file_location("decided_bench", path)
    decided = importlib.util.module_from_spec(mod)
    mod.loader.exec_module(decided)
    s = Store(tmp_path / "r.db")
    standard = REPEATS["standard"]
    run_until_decided(cfg(repeats=standard), tiny_registry, s, precision=1e-9, alpha=1e-9)
    s.close()
    (table,) = decided.replay(tmp_path / "r.db")
    assert table["metric"] == "rho" and table["pairs"] == 1
    labels = [p[0] for p in table["points"]]
    assert labels == ["quick (3 repeats, fixed)", f"standard ({standard} repeats, fixed)",
                      *(f"race look at {n}" for n in cycle_looks(standard, 3))]
    cpu = dict((p[0], p[2]) for p in table["points"])
    assert 0 < cpu["quick (3 repeats, fixed)"] < cpu[f"standard ({standard} repeats, fixed)"]
    first, last = cycle_looks(standard, 3)[0], cycle_looks(standard, 3)[-1]
    assert cpu[f"race look at {first}"] < cpu[f"race look at {last}"]
    assert decided.figure_rows([table])[0][0] == "decided: rho tiny/kmeans"


def test_a_budget_races_and_until_or_its_absence_keeps_the_plain_run():
    from robench.errors import ConfigError
    from robench.run.execution import choose

    # `run --all` alone (no --budget) is the fixed quick run: the main job stays the fixed
    # run (docs/running.md: the race's first looks alone were projected at ~7 of its 10 minutes)
    assert choose() == "fixed" and choose("fixed") == "fixed"
    assert choose(budget=90.0) == "decided" and choose("decided") == "decided"
    assert choose("fixed", 90.0) == "fixed"  # a plain run with a deadline
    with pytest.raises(ConfigError, match="--precision goes with --until decided"):
        choose(precision=0.01)
    for until, budget in (("sometimes", None), (None, 0), (None, float("nan")), (None, "10m")):
        with pytest.raises(ConfigError):
            choose(until, budget)


def test_execute_races_or_runs_plainly_from_what_prepare_returns(tiny_registry, store,
                                                                 monkeypatch):
    """One entry (robench.run.execution.execute) chooses: a budget races up to 40 repeats
    unless --repeats says otherwise; without one the prepared plan runs as it is."""
    import robench.run.adaptive
    import robench.run.runner
    from robench.run.execution import execute
    from robench.run.prepare import prepare
    from robench.run.runner import RunReport

    seen = []
    monkeypatch.setattr(robench.run.runner, "execute", lambda cfg, reg, st, **kw: seen.append(
        ("plain", kw["plan"], kw["deadline"])) or RunReport(1, 0, 0, 0, [], [], [], 0.0))
    monkeypatch.setattr(robench.run.adaptive, "run_until_decided", lambda cfg, reg, st, **kw:
                        seen.append(("race", kw["max_repeats"], kw["budget"])))
    prepared = prepare(tiny_registry, datasets=["tiny"], models=["centroid", "svm"],
                       clusterers=["kmeans"], metrics=["rho"], repeats=3, k=3, jobs=1)
    execute(prepared, tiny_registry, store)
    execute(prepared, tiny_registry, store, budget=60.0)
    execute(prepared, tiny_registry, store, budget=60.0, max_repeats=12)
    execute(prepared, tiny_registry, store, until="decided")
    before = time.monotonic()
    execute(prepared, tiny_registry, store, until="fixed", budget=60.0)
    assert seen[0] == ("plain", prepared.plan, None)
    assert seen[1:4] == [("race", 40, 60.0), ("race", 12, 60.0), ("race", None, None)]
    kind, plan, deadline = seen[4]
    assert kind == "plain" and plan is prepared.plan and before + 60 <= deadline <= time.monotonic() + 60


def test_a_race_whose_budget_is_gone_runs_nothing_and_warns_nothing(tiny_registry, store):
    """No trial starts once the budget is spent, and the look that finds no trial stored
    warns nothing (it warned "Mean of empty slice" on stderr, issue 51)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = run_until_decided(cfg(repeats=24), tiny_registry, store, precision=1e-9,
                                   alpha=1e-9, budget=1e-6)
    assert report.n_ran == 0 and report.budget_spent


def test_run_all_of_metrics_without_a_paired_comparison_stays_a_plain_run(tiny_registry,
                                                                         tmp_path,
                                                                         monkeypatch):
    """`run --all --metric lost-test`: the plain run, no deadline."""
    import robench.run.runner
    from robench.cli import cli
    from robench.run.runner import RunReport

    seen = []

    def fake_execute(cfg, registry, store, **kw):
        seen.append((cfg.metrics, kw.get("deadline")))
        return RunReport(1, 0, 0, 0, [], [], [], 0.0)

    monkeypatch.setattr(robench.run.runner, "execute", fake_execute)
    res = CliRunner().invoke(cli, ["run", "--all", "-d", "tiny", "--metric", "lost-test",
                                   "--executor", "local", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
    assert seen == [(["lost-test"], None)]


# --- the main job: the plain run, then the race within a budget ---------------------------


def test_the_main_job_is_run_all_alone():
    """`run --all` with nothing that chooses otherwise is the main job; --until, --budget,
    --repeats, --precision, another profile or no racing metric make it what they say."""
    from types import SimpleNamespace

    from robench.plugins import get_registry
    from robench.run.execution import main_job

    reg = get_registry()

    def prepared(profile="quick", metrics=("rho", "purity-ratio")):
        return SimpleNamespace(config=SimpleNamespace(profile=profile, metrics=list(metrics)))

    assert main_job(prepared(), reg)
    for kw in (dict(until="fixed"), dict(until="decided"), dict(budget=60.0),
               dict(repeats=5), dict(precision=0.02)):
        assert not main_job(prepared(), reg, **kw), kw
    assert not main_job(prepared(profile="standard"), reg)
    assert not main_job(prepared(metrics=["lost-test"]), reg)


def _main(tiny_registry, store, monkeypatch, budget, events=None):
    import robench.run.execution as execution
    from robench.run.prepare import prepare

    monkeypatch.setattr(execution, "MAIN_BUDGET", budget)
    prepared = prepare(tiny_registry, datasets=["tiny"], models=["centroid", "svm"],
                       clusterers=["kmeans"], metrics=["rho", "lost-test"], k=3, jobs=1,
                       executor="local")
    hook = (lambda e, **k: events.append((e, k))) if events is not None else None
    return prepared, execution.execute(prepared, tiny_registry, store, main=True,
                                       on_event=hook)


def test_the_main_job_runs_the_plain_run_whole_then_races_its_tables(tiny_registry, store,
                                                                     monkeypatch):
    """The plain run of every metric comes first and whole (its plan as prepare made it),
    then the rho table's looks at every complete cycle; the raced table's scores share one
    configuration (labelled raced) and their ranks are stored, the other metric keeps its
    plain scores."""
    events = []
    prepared, report = _main(tiny_registry, store, monkeypatch, 600.0, events)
    planned = [k["todo"] for e, k in events if e == "planned"]
    assert planned[0] == len(prepared.plan.specs), "the plain run first, whole"
    looks = [k["repeats"] for e, k in events if e == "look"]
    assert looks[:2] == [6, 9]
    (table,) = report.adaptive
    assert table["spending"] == "pocock" and table["precision"] == 0.05
    assert {s.metric for s in report.scores} == {"rho", "lost-test"}
    rho = [s for s in store.scores(metric="rho")
           if (s["details"] or {}).get("design") == "adaptive"]
    assert len({s["configuration"] for s in rho}) == 1
    label = store.configurations()[rho[0]["configuration"]]["label"]
    assert label.startswith(f"quick R={cycle_looks(40, 3)[-1]} raced ")
    ranked = {r["model"] for r in store.db.query(
        "select model from ranks where configuration = ?", [rho[0]["configuration"]])}
    assert ranked == {"centroid", "svm"}
    assert all(s.details.get("design") != "adaptive" for s in report.scores
               if s.metric == "lost-test")


def test_the_main_job_keeps_the_plain_run_when_no_look_fits(tiny_registry, store,
                                                            monkeypatch):
    """A budget spent by the plain run: every metric is still run and scored (the plain run
    has no deadline), no look is taken and the rho table keeps its plain 3-repeat scores,
    with what its next look would cost."""
    events = []
    prepared, report = _main(tiny_registry, store, monkeypatch, 1e-6, events)
    assert report.n_ran == len(prepared.plan.specs) and not report.failed
    assert not [e for e, _ in events if e == "look"] and report.budget_spent
    assert report.n_not_run == 0, "every trial of the plain run is stored"
    said = [k for e, k in events if e == "decided"]
    assert said and all(k["table"].startswith("rho: tiny") and not k["repeats"] for k in said)
    rho = [s for s in report.scores if s.metric == "rho" and s.score == "rho"]
    assert len(rho) == 2 and all(s.n == 3 and "adaptive" not in s.details for s in rho)
    assert {s.metric for s in report.scores} == {"rho", "lost-test"}


def test_the_rules_replay_races_both_rules_on_the_same_stored_trials(tiny_registry, tmp_path):
    """benchmarks/decided.py --rules on a fixed tiny run of 12 repeats: both rules race the
    same stored values; 4e263f3's trains every kind at every look (its CPU counts the random
    split past 3 repeats), today's does not; the rows say both and their ratio."""
    import importlib.util
    from pathlib import Path

    from robench.storage.store import Store

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "decided.py"
    mod = importlib.util.spec_from_file_location("decided_rules", path)
    decided = importlib.util.module_from_spec(mod)
    mod.loader.exec_module(decided)
    s = Store(tmp_path / "f.db")
    execute(cfg(models=["centroid", "svm", "spy"], repeats=12), tiny_registry, s)
    s.close()
    (table,) = decided.rule_tables(tmp_path / "f.db", 12)
    assert table["metric"] == "rho" and table["table"] == "tiny/kmeans" and table["pairs"] == 3
    old, new = table["old"], table["new"]
    assert old["margin"] == 0.01 and new["margin"] == 0.05
    # centroid ~ spy (identical) are decided by both at their first look
    assert old["decided"] >= 1 and new["decided"] >= 1
    assert 0 < new["cpu"] and 0 < old["cpu"]
    if new["repeats"] == old["repeats"]:  # the same repeats: today's trains no random split
        assert new["cpu"] < old["cpu"]
    rows = decided.rule_rows([table])
    assert [r[0] for r in rows] == ["rules: rho tiny/kmeans", "rules: all tables"]
    assert "4e263f3" in rows[0][1] and "now" in rows[0][1]


def test_the_main_job_says_when_its_race_found_no_time(tiny_registry, tmp_path, monkeypatch):
    """`robench run --all` whose quick run used the whole budget: the summary says the race
    had no time for a look and how to race on; progress names each table once."""
    import robench.run.execution as execution
    from robench.cli import cli

    monkeypatch.setattr(execution, "MAIN_BUDGET", 1e-6)
    res = CliRunner().invoke(cli, ["run", "--all", "-d", "tiny", "-m", "centroid", "-m", "svm",
                                   "-c", "kmeans", "-k", "3", "--metric", "rho",
                                   "--executor", "local", "--db", str(tmp_path / "r.db")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "found no time left for a look" in said and "--budget 30m" in said
    assert "rho: tiny/kmeans: stopped (undecided: its next look does not fit the time " \
           "budget); no look taken" in said


def test_only_the_main_job_says_its_race_found_no_time(tiny_registry, store):
    """A plain run cut by its deadline (`--until fixed --budget`) has no race: its decided line
    must not speak of one; the main job's does."""
    from types import SimpleNamespace

    from robench.cli import run as run_cli
    from robench.present.leaderboard import reading_stored_ranks, registered_sections
    from robench.present.summary import summary_lines

    c = cfg(models=["centroid", "svm"], repeats=3)
    execute(c, tiny_registry, store)
    with reading_stored_ranks(store):
        tables = summary_lines(store.scores(), registered_sections(tiny_registry),
                               models=c.models)["tables"]
    plain = run_cli._decided_line(tables, [], c, SimpleNamespace(budget_spent=True,
                                                                 main_job=False))
    main = run_cli._decided_line(tables, [], c, SimpleNamespace(budget_spent=True,
                                                                main_job=True))
    assert plain and "found no time" not in plain
    assert "found no time left for a look" in main
