"""Applicability is decided per protocol while planning (issue 33).

A combination one protocol cannot use is skipped for that protocol alone, with its reason;
a preparation one protocol cannot make never fails another protocol's trials; shifted-cv on
a clusterer that gives a class fewer sub-domains than folds uses one fold per sub-domain.
"""

from __future__ import annotations

import pytest

from robench.run.runner import ConfigError, execute, plan_run
from tests.helpers import run_config, clusterings


@pytest.fixture
def uneven_registry():
    from robench.plugins import make_registry, set_registry

    reg = make_registry(modules=["tests.plugins.tiny", "tests.plugins.uneven_sources"],
                        load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)


def cfg(registry, **kw):
    base = dict(datasets=["tiny"], models=["centroid"], clusterers=["oracle"],
                metrics=["rho", "adequacy", "shifted-cv"], repeats=2, k=3, executor="local",
                adequacy={"sizes": [20]},
                shifted_cv={"folds": 4, "repeats": 1, "vae_epochs": 1, "max_points": 40,
                            "vae_max_train": None})
    base.update(kw)
    return run_config(registry=registry, **base)


def test_oracle_with_fewer_sources_than_folds_runs_every_protocol(tiny_registry, store):
    # tiny has 3 true sources per class; shifted-cv asks for 4 folds
    report = execute(cfg(tiny_registry), tiny_registry, store)
    assert not report.failed, [r.get("error") for r in report.failed]
    assert not report.skipped
    rows = store.trials()
    shifted = [r for r in rows if r["protocol"] == "shifted-cv" and r["kind"] == "shifted"]
    rand = [r for r in rows if r["protocol"] == "shifted-cv" and r["kind"] == "random"]
    assert sorted(r["params"]["fold"] for r in shifted) == [0, 1, 2]
    assert {r["params"]["folds"] for r in shifted + rand} == {3}
    assert {r["params"]["folds_requested"] for r in shifted} == {4}
    assert all("folds_requested" not in r["params"] for r in rand), \
        "random K-fold depends on K alone: shared with runs that asked for 3 folds"
    scores = {(s["metric"], s["model"], s["score"]): s for s in store.scores()}
    head = scores[("shifted-cv", "centroid", "shifted-cv")]
    assert head["n"] == 3
    assert (head["details"]["folds"], head["details"]["folds_requested"]) == (3, 4)
    assert "3 folds instead of the 4 asked for" in head["details"]["fold_fallback"]
    assert "fold_fallback" in scores[("shifted-cv", "", "wasserstein_ratio")]["details"]
    # rho and adequacy on the oracle's sources are stored: the ground-truth check survives
    assert scores[("rho", "centroid", "rho")]["value"] is not None
    assert any(s["metric"] == "adequacy" and s["clusterer"] == "oracle"
               for s in store.scores())
    clus = [c for c in clusterings(store) if c["details"].get("protocol") == "shifted-cv"]
    assert clus and clus[0]["details"]["folds"] == 3 and clus[0]["k"] == 4


def test_the_folds_asked_for_are_kept_when_the_sources_suffice(tiny_registry):
    plan = plan_run(cfg(tiny_registry, metrics=["shifted-cv"], shifted_cv={"folds": 3}),
                    tiny_registry)
    folds = {s["params"]["folds"] for s in plan.specs.values()}
    assert folds == {3}
    assert not any("folds_requested" in s["params"] for s in plan.specs.values())
    kmeans = plan_run(cfg(tiny_registry, metrics=["shifted-cv"], clusterers=["kmeans"],
                          shifted_cv={"folds": 4}), tiny_registry)
    assert {s["params"]["folds"] for s in kmeans.specs.values()} == {4}, \
        "k-means returns the k it is asked for: no fallback"


def test_a_class_with_one_source_skips_only_the_protocols_that_need_two(uneven_registry,
                                                                       store):
    c = cfg(uneven_registry, datasets=["tiny-one-source"],
            metrics=["rho", "adequacy", "shifted-cv", "lost-test"])
    plan = plan_run(c, uneven_registry)
    skipped = {s["metric"]: s["reason"] for s in plan.skipped}
    assert set(skipped) == {"rho", "adequacy", "shifted-cv"}
    assert "class '2' has 1 source(s); the exclusive partition needs at least 2" \
        in skipped["rho"]
    assert "class '2' has 1 sub-domain(s) from clusterer 'oracle'" in skipped["shifted-cv"]
    assert [g.metric.name for g in plan.groups] == ["lost-test"]
    report = execute(c, uneven_registry, store, plan=plan)
    assert not report.failed and report.n_ran == 2
    assert {s["metric"] for s in store.scores()} == {"lost-test"}


def test_a_failed_preparation_fails_only_its_own_protocols_trials(uneven_registry, store):
    c = cfg(uneven_registry, clusterers=["kmeans"], metrics=["rho", "failing-prep"])
    report = execute(c, uneven_registry, store)
    failed = {r["protocol"] for r in report.failed}
    assert failed == {"failing-prep"} and len(report.failed) == 1
    assert "this preparation always fails" in report.failed[0]["error"]
    ok = [r for r in store.trials() if r["status"] == "ok"]
    assert len(ok) == 3 * 2 and {r["protocol"] for r in ok} == {"source-aware"}
    assert store.scores(metric="rho")


def test_a_class_too_small_for_k_is_a_skip_from_all_and_an_error_when_named(tiny_registry):
    # tiny has 36 rows per class: k=20 sources of 2+ rows do not fit; lost-test needs none
    c = cfg(tiny_registry, clusterers=["kmeans"], metrics=["rho", "lost-test"], k=20)
    plan = plan_run(c, tiny_registry)
    assert [s["metric"] for s in plan.skipped] == ["rho"]
    assert "use a smaller --sources/-k (at most 18)" in plan.skipped[0]["reason"]
    assert [g.metric.name for g in plan.groups] == ["lost-test"]
    named = cfg(tiny_registry, clusterers=["kmeans"], metrics=["rho"], k=20,
                explicit={"datasets": ["tiny"], "models": ["centroid"],
                          "clusterers": ["kmeans"]})
    with pytest.raises(ConfigError, match="dataset 'tiny' cannot run on what was asked for"):
        plan_run(named, tiny_registry)


def test_a_preconditions_check_that_raises_skips_its_protocol_only(uneven_registry):
    plan = plan_run(cfg(uneven_registry, clusterers=["kmeans"],
                        metrics=["rho", "broken-check"]), uneven_registry)
    (skip,) = plan.skipped
    assert skip["metric"] == "broken-check"
    assert "protocol 'broken-check' could not check whether it applies to data set 'tiny': " \
        "KeyError" in skip["reason"]
    assert [g.metric.name for g in plan.groups] == ["rho"]
