"""``--until decided`` end to end on the tiny plugin: rounds, reuse, resume, details.adaptive."""

import pytest

from tests.helpers import run_config
from robench.run.adaptive import RULE, SPENDING, annotate, run_until_decided
from robench.stats.sequential import look_alphas
from robench.run.runner import ConfigError, execute
from robench.specs import Score


def cfg(**kw):
    base = dict(datasets=["tiny"], models=["centroid", "spy"], clusterers=["kmeans"],
                metrics=["rho"], repeats=12, k=3, executor="local")
    base.update(kw)
    return run_config(**base)


UNDECIDED = dict(models=["centroid", "svm"])  # ordered at 6 repeats at alpha 0.05, not at 1e-9


def test_undecided_table_runs_every_look_reusing_earlier_trials(tiny_registry, store):
    events = []
    report = run_until_decided(cfg(**UNDECIDED), tiny_registry, store, precision=1e-9,
                               alpha=1e-9, on_event=lambda e, **k: events.append((e, k)))
    looks = [k["repeats"] for e, k in events if e == "look"]
    assert looks == [6, 9, 12], "a look at every complete cycle of k = 3 sources"
    planned = [k["todo"] for e, k in events if e == "planned"]
    # the first look: 6 exclusive + 6 inclusive + 3 random-split (the quick profile's
    # repeats; rho's test does not use them) per model; later looks only the paired kinds
    assert planned == [30, 12, 12], "a look runs only the repeats the earlier ones did not"
    assert report.n_ran == 54 and report.n_planned == 54
    last_level = 1 - look_alphas([6, 9, 12], 12, 1e-9, SPENDING)[-1]
    rho = [s for s in store.scores(metric="rho")]
    assert {s["score"] for s in rho} == {"rho", "acc_exclusive", "acc_inclusive", "acc_random"}
    for s in rho:
        ad = s["details"]["adaptive"]
        assert ad["repeats"] == 12 and ad["looks_taken"] == [6, 9, 12]
        assert ad["stopped"] == "maximum repeats reached, undecided"
        assert ad["model_stopped"] == ad["stopped"]
        assert ad["level"] == last_level and ad["spending"] == SPENDING
        assert ad["alpha_look"] == pytest.approx(1 - last_level)
        assert s["details"]["design"] == "adaptive" and ad["rule"] == RULE
        assert [p["status"] for p in ad["pairs"]] == ["undecided"]
        assert ad["cycle"] == 3 and ad["ranks"] == {"centroid": "1-2", "svm": "1-2"}
        assert s["n"] == (3 if s["score"] == "acc_random" else 12)
        outlook = ad["pairs"][0]["outlook"]
        assert outlook["n"] == 12 and outlook["difference"] > 0 and outlook["next_repeats"] is None
        assert outlook["repeats_80"] % 3 == 0 and outlook["repeats_80"] > 12
    head = next(s for s in rho if s["score"] == "rho" and s["model"] == "centroid")
    assert head["details"]["interval"]["level"] == pytest.approx(last_level)
    assert head["details"]["interval_fixed_sample"]["level"] == pytest.approx(0.95)
    assert head["ci_low"] < head["details"]["interval_fixed_sample"]["low"]
    assert report.adaptive[0]["dataset"] == "tiny"

    again = run_until_decided(cfg(**UNDECIDED), tiny_registry, store, precision=1e-9,
                              alpha=1e-9)
    assert again.n_ran == 0, "a rerun (or a resumed run) trains nothing"
    assert [t["stopped"] for t in again.adaptive] == [t["stopped"] for t in report.adaptive]


def test_an_ordered_table_stops_at_the_look_that_orders_it(tiny_registry, store):
    """centroid vs svm, k = 3 sources: a look at every complete cycle of the balanced design
    (6, 9, ..., 99), alpha spent across them; the t test over complete cycles orders them at
    the third."""
    report = run_until_decided(cfg(models=["centroid", "svm"], repeats=100),
                               tiny_registry, store, precision=0.001)
    info = report.adaptive[0]
    assert report.n_ran == 54 and info["repeats"] == 12 and info["looks_taken"] == [6, 9, 12]
    assert info["stopped"] == "every pair ordered"
    assert info["looks_planned"] == list(range(6, 100, 3))
    assert info["order"] == ["centroid", "svm"] and info["ranks"] == {"centroid": "1",
                                                                           "svm": "2"}
    assert info["pairs"] == [{"pair": ["centroid", "svm"], "status": "ordered",
                              "above": "centroid"}]
    assert info["metric"] == "rho" and info["score"] == "rho"
    scores = {s["model"]: s for s in store.scores(metric="rho") if s["score"] == "rho"}
    ad = scores["svm"]["details"]["adaptive"]
    assert ad["repeats"] == 12 and ad["rank"] == "2"
    assert ad["model_stopped"] == "its pairs decided at 12 repeats (centroid > svm)"


def test_identical_models_are_equivalent_at_the_first_look(tiny_registry, store):
    report = run_until_decided(cfg(), tiny_registry, store, precision=1e-9)
    info = report.adaptive[0]  # centroid and spy: the same accuracies in every repeat
    assert info["repeats"] == 6 and info["pairs"][0]["status"] == "equivalent"
    assert info["stopped"] == "every pair equivalent within the precision"
    # equivalent, not ordered: each may hold either rank
    assert info["ranks"] == {"centroid": "1-2", "spy": "1-2"}


def test_resume_after_a_plain_run_reuses_its_trials(tiny_registry, store):
    execute(cfg(repeats=6, **UNDECIDED), tiny_registry, store)
    report = run_until_decided(cfg(**UNDECIDED), tiny_registry, store, precision=1e-9,
                               alpha=1e-9)
    assert report.n_ran == 24, "the plain run's 6 repeats of every kind are reused"


def test_plain_run_after_adaptive_scores_at_its_own_level_beside_it(tiny_registry, store):
    """The same trials run plainly afterwards: plain 95% intervals, stored under the plain
    run's configuration; the raced scores (their own, "raced", configuration) stay."""
    run_until_decided(cfg(**UNDECIDED), tiny_registry, store, precision=1e-9, alpha=1e-9)
    execute(cfg(**UNDECIDED), tiny_registry, store)  # same trials, plain 95% intervals
    heads = [s for s in store.scores(metric="rho") if s["score"] == "rho"]
    labels = {k: v["label"] for k, v in store.configurations().items()}
    plain = [s for s in heads if "raced" not in labels[s["configuration"]]]
    raced = [s for s in heads if "raced" in labels[s["configuration"]]]
    assert len(plain) == len(raced) == 2
    assert all("adaptive" not in s["details"] and s["details"]["interval"]["level"] == 0.95
               for s in plain)
    assert all(s["details"]["design"] == "adaptive" for s in raced)


def test_needs_rho_and_a_positive_precision(tiny_registry, store):
    with pytest.raises(ConfigError, match="rho"):
        run_until_decided(cfg(metrics=["lost-test"]), tiny_registry, store)
    with pytest.raises(ConfigError, match="precision"):
        run_until_decided(cfg(), tiny_registry, store, precision=0)


def test_annotate_widens_rho_and_accuracy_intervals():
    xs, is_ = [0.7, 0.8, 0.75, 0.78], [0.95, 0.96, 0.94, 0.955]
    base = dict(dataset="d", model="m", clusterer="c", metric="rho")
    scores = [Score(**base, score="rho", value=0.8, ci_low=0.7, ci_high=0.9, n=4,
                    details={"acc_exclusive": xs, "acc_inclusive": is_,
                             "interval": {"level": 0.95}}),
              Score(**base, score="acc_exclusive", value=0.7575, ci_low=0, ci_high=1, n=4,
                    details={"per_repeat": xs})]
    from robench.families.source_aware.rho import interval_at

    out = annotate(scores, 0.99, {"repeats": 4}, interval_at)
    from robench.stats.intervals import mean_interval, ratio_interval

    assert out[0].ci_low == pytest.approx(ratio_interval(xs, is_, 0.99).low)
    assert out[1].ci_high == pytest.approx(mean_interval(xs, 0.99, bounds=(0, 1)).high)
    assert all(s.details["adaptive"] == {"repeats": 4} for s in out)


def test_leaderboard_and_report_label_an_adaptive_table(tiny_registry, store, tmp_path):
    from robench.families.source_aware.leaderboard import rho_tables
    from robench.families.source_aware.report import rho_lines

    run_until_decided(cfg(models=["centroid", "spy", "svm"], repeats=24), tiny_registry, store,
                      precision=1e-9)
    rows = store.scores(metric="rho")
    table = rho_tables(rows)[0]["rows"]
    by_model = {r["model"]: r for r in table}
    assert all(r["adaptive"]["repeats"] == r["n"] for r in table)
    # centroid ~ spy (identical: equivalent), both above svm: rank intervals 1-2, 1-2, 3,
    # recomputed from the stored repeats by the same test at the run's level
    assert [by_model[m]["rank_interval"] for m in ("centroid", "spy", "svm")] == [
        "1-2", "1-2", "3"]
    assert by_model["svm"]["adaptive"]["stopped"].startswith("its pairs decided")
    text = "\n".join(rho_lines(rows))
    assert "adaptive repeats (--until decided" in " ".join(text.split())
    from robench.present.site import build_site

    index = build_site(store, tmp_path / "site", registry=tiny_registry)
    html = "".join(p.read_text() for p in index.parent.rglob("*.html"))
    assert "adaptive repeats (--until decided), at most 24" in html


def test_any_metric_that_declares_a_paired_comparison_is_decided(tmp_path):
    """A plugin metric that is not rho (a plain mean of the exclusive accuracy) declares its
    paired comparison on its MetricSpec: --until decided orders its table too."""
    from robench.plugins import make_registry, set_registry
    from robench.storage.store import Store

    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.paired_metric"],
                        load_entrypoints=False)
    set_registry(reg)
    try:
        store = Store(tmp_path / "r.db")
        report = run_until_decided(cfg(models=["centroid", "svm"], metrics=["held-out-acc"],
                                       registry=reg), reg, store, precision=0.001)
        (info,) = report.adaptive
        assert info["metric"] == "held-out-acc" and info["order"][0] == "centroid"
        assert info["pairs"][0]["status"] == "ordered"
        head = [s for s in store.scores(metric="held-out-acc")]
        assert head and all(s["details"]["design"] == "adaptive" for s in head)
        assert head[0]["details"]["interval"]["level"] == pytest.approx(info["level"])
        store.close()
    finally:
        set_registry(None)


def test_the_core_names_no_metric():
    import inspect

    import robench.run.adaptive as adaptive

    assert '"rho"' not in inspect.getsource(adaptive)


def test_a_random_label_model_is_never_ranked_and_costs_no_repeats(tiny_registry, store):
    """A model trained on shuffled labels (rho ~1, which would top the table) added to
    centroid and svm: in a plain run and under --until decided it is listed unranked with its
    reason and the best real model shows rank 1; under --until decided it stops at the first
    look (its E[AccI] interval lies below chance + margin) while the real models go on."""
    from robench.families.source_aware.leaderboard import rho_tables

    models = ["centroid", "svm", "shuffled"]
    execute(cfg(models=models, repeats=12), tiny_registry, store)
    plain = {r["model"]: r for r in rho_tables(store.scores(metric="rho"))[0]["rows"]}
    assert plain["shuffled"]["rank"] is None
    assert plain["shuffled"]["unranked"].startswith("at chance: E[AccI]")
    best = min((r for r in plain.values() if r["rank"]), key=lambda r: r["rank"])
    assert best["rank_interval"] == "1"

    report = run_until_decided(cfg(models=models, repeats=100), tiny_registry, store,
                               precision=0.001)
    info = report.adaptive[0]
    assert "shuffled" in info["unranked"] and "shuffled" not in info["order"]
    assert info["repeats_by_model"]["shuffled"] == info["looks_taken"][0] == 6
    assert info["repeats_by_model"]["centroid"] >= 6
    rows = {r["model"]: r for r in rho_tables(store.scores(metric="rho"))[0]["rows"]}
    assert rows["shuffled"]["rank"] is None and rows["shuffled"]["unranked"].startswith("at chance")
    assert min(r["rank_interval"] for r in rows.values() if r["rank_interval"]) == "1"
    assert any(r["rank_interval"] == "1" for r in rows.values())
