"""The adequacy protocol: nested subsets, fixed test partitions, per-class rho, CLI, runner."""

import numpy as np
import pytest
from click.testing import CliRunner

from robench.families.source_aware.adequacy import aggregate as aggregate_adequacy
from robench.cli import cli
from tests.helpers import run_config
from robench.families.source_aware import adequacy_protocol as adequacy
from robench.families.source_aware import random_split_protocol as random_split
from robench.families.source_aware import protocol as source_aware
from robench.run.trials import Combo, TrialEnv
from robench.run.runner import RunReport, execute
from robench.data.splitters import partition_rng

SIZES = [30, 90, 200]


@pytest.fixture
def reg():
    from robench.plugins import make_registry, set_registry

    registry = make_registry(modules=["tests.plugins.tiny_adequacy"], load_entrypoints=False)
    set_registry(registry)
    yield registry
    set_registry(None)


def config(**kw):
    base = dict(datasets=["adequacy-toy"], models=["toy-centroid"], clusterers=["oracle"],
                metrics=["adequacy"], repeats=2, k=3, adequacy={"sizes": SIZES},
                executor="local")
    base.update(kw)
    return run_config(**base)


def combo(reg, clusterer="oracle"):
    return Combo(reg.get("datasets", "adequacy-toy"), reg.get("models", "toy-centroid"),
                 reg.get("clusterers", clusterer))


def test_subsets_are_nested_and_stratified_and_test_partitions_never_change(reg):
    cfg = config()
    specs = adequacy.plan(combo(reg), cfg, reg)
    assert len(specs) == 2 * cfg.repeats * (len(SIZES) + 1)
    assert len({s["key"] for s in specs}) == len(specs), "one trial key per size"
    ds = TrialEnv(reg).dataset("adequacy-toy")
    shared = {(s["kind"], s["repeat"]): s for s in source_aware.plan(combo(reg), cfg, reg)}
    n_classes = ds.n_classes
    for kind in adequacy.KINDS:
        for r in range(cfg.repeats):
            mine = [s for s in specs if (s["kind"], s["repeat"]) == (kind, r)]
            full = [s for s in mine if s["protocol"] == "source-aware"]
            assert full == [shared[(kind, r)]], "the full size is rho's own trial (same key)"
            fit_sa, val_sa, test_sa = source_aware.partition(full[0], ds, reg)
            train_all = np.union1d(fit_sa, val_sa)
            previous = np.array([], dtype=int)
            for spec in sorted((s for s in mine if s["protocol"] == "adequacy"),
                               key=lambda s: s["params"]["size"]):
                size = spec["params"]["size"]
                fit, val, test = adequacy.partition(spec, ds, reg)
                np.testing.assert_array_equal(test, test_sa)  # exactly the full run's test set
                subset = np.union1d(fit, val)
                assert subset.size == fit.size + val.size == size
                assert val.size > 0 and not np.intersect1d(subset, test).size
                assert set(previous) <= set(subset) <= set(train_all), "nested subsets"
                # stratified: every class within 1 + C*n_c/N of its proportional share
                share = np.bincount(ds.y[train_all], minlength=n_classes) / train_all.size
                counts = np.bincount(ds.y[subset], minlength=n_classes)
                assert np.all(np.abs(counts - size * share) < 1 + n_classes * share)
                again = adequacy.partition(spec, ds, reg)  # invariant 4: same spec, same split
                for a, b in zip((fit, val, test), again):
                    np.testing.assert_array_equal(a, b)
                previous = subset


def test_every_prefix_of_the_stratified_order_is_stratified():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], [300, 90, 10])
    idx = rng.permutation(y.size)[:350]
    order = adequacy.stratified_order(idx, y, partition_rng(0, 0, "inclusive", 2))
    assert sorted(order) == sorted(idx)
    share = np.bincount(y[idx], minlength=3) / idx.size
    for m in range(1, idx.size + 1):
        counts = np.bincount(y[order[:m]], minlength=3)
        assert np.all(np.abs(counts - m * share) < 1 + 3 * share), m


def test_sizes_and_repeats_follow_the_profile_and_the_data():
    assert adequacy.usable_sizes([100, 300, 1000, 3000], 1797, 0.2, 5) == [100, 300, 1000]
    quick = run_config(datasets=[], models=[], clusterers=[], metrics=[])
    assert adequacy.settings(quick) == (2, [100, 300, 1000])
    assert adequacy.settings(run_config([], [], [], [], repeats=1))[0] == 1
    paper = run_config([], [], [], [], profile="paper")
    assert adequacy.settings(paper) == (100, [100, 300, 1000, 3000, 10000, 30000])


def _row(kind, repeat, size, acc, per_class, n):
    params = {"k": 3, "test_size": 0.2} | ({} if size == "full" else {"size": size})
    return {"status": "ok", "kind": kind, "repeat": repeat, "clusterer": "c",
            "protocol": "source-aware" if size == "full" else "adequacy", "params": params,
            "accuracy": acc, "per_class": per_class, "n_train": n - n // 10, "n_val": n // 10}


def hand_rows():
    """Two classes, two repeats, sizes 50, 200 and full (=400); values chosen to add up."""
    return [
        _row("exclusive", 0, 50, 0.5, [0.4, 0.6], 50),
        _row("exclusive", 1, 50, 0.6, [0.6, 0.6], 50),
        _row("inclusive", 0, 50, 0.8, [0.8, 0.8], 50),
        _row("inclusive", 1, 50, 0.9, [1.0, 0.8], 50),
        _row("exclusive", 0, 200, 0.75, [0.5, 0.8], 200),
        _row("exclusive", 1, 200, 0.75, [0.5, 0.8], 200),
        _row("inclusive", 0, 200, 0.95, [0.9, 1.0], 200),
        _row("inclusive", 1, 200, 0.945, [1.0, 0.9], 200),
        _row("exclusive", 0, "full", 0.7, [0.5, 0.9], 400),
        _row("exclusive", 1, "full", 0.9, [None, 0.9], 400),  # class 0 absent from this test set
        _row("inclusive", 0, "full", 0.9, [1.0, 0.8], 400),
        _row("inclusive", 1, "full", 1.0, [0.8, 1.0], 400),
    ]


def test_per_size_and_per_class_rho_against_hand_computed_values():
    scores = {s.score: s for s in aggregate_adequacy(
        {"dataset": "d", "model": "m", "clusterer": "c"}, hand_rows())}
    assert scores["rho@50"].value == pytest.approx(0.55 / 0.85)
    assert scores["rho@200"].value == pytest.approx(0.75 / 0.9475)
    assert scores["rho@full"].value == pytest.approx(0.8 / 0.95)
    assert scores["acc_exclusive@full"].value == pytest.approx(0.8)
    lo, hi = scores["rho@full"].ci_low, scores["rho@full"].ci_high
    assert lo <= scores["rho@full"].value <= hi

    per_class = {label: scores[f"rho@{label}"].details["per_class"] for label in (50, 200, "full")}
    # class 0 at 50: E[AccX] = (0.4 + 0.6)/2 = 0.5, E[AccI] = (0.8 + 1.0)/2 = 0.9
    assert per_class[50][0]["rho"] == pytest.approx(0.5 / 0.9)
    assert per_class[50][1]["rho"] == pytest.approx(0.6 / 0.8)
    # class 0 at full: its None repeat is left out of E[AccX_0] = 0.5; E[AccI_0] = 0.9
    assert per_class["full"][0]["acc_exclusive"] == pytest.approx(0.5)
    assert per_class["full"][0]["rho"] == pytest.approx(0.5 / 0.9)
    assert per_class["full"][1]["rho"] == pytest.approx(0.9 / 0.9)

    worst = scores["worst_class_rho"]
    assert worst.value == pytest.approx(0.5 / 0.9) and worst.details["class"] == 0
    ranking = worst.details["ranking"]
    assert [c["class"] for c in ranking] == [0, 1]
    assert ranking[1]["acc_exclusive"] == pytest.approx([0.6, 0.8, 0.9])
    assert ranking[1]["reading"].startswith("collect more data for class 1: its AccX rises")
    assert "does not rise" in ranking[0]["reading"] and "new sources" in ranking[0]["reading"]

    # AccI is within 1 point of its full-size 0.95 from 200 on; AccX (0.75 vs 0.8) only at full
    assert scores["enough_inclusive"].details["size"] == 200
    assert scores["enough_inclusive"].value == 200
    assert scores["enough_exclusive"].details["size"] == "full"
    assert scores["enough_exclusive"].value == 400


def test_enough_size_needs_every_larger_size_within_one_point():
    curves = [{"label": s, "acc_inclusive": [v]} for s, v in
              ((100, 0.985), (300, 0.95), (1000, 0.99), ("full", 0.99))]
    assert adequacy.enough_size(curves, "inclusive")["label"] == 1000
    assert adequacy.enough_size(curves[:-1], "inclusive") is None


def test_runner_end_to_end_shares_full_size_trials_and_reruns_nothing(reg, store):
    cfg = config(clusterers=["kmeans"], metrics=["rho", "adequacy", "lost-test"])
    report = execute(cfg, reg, store)
    # rho: 3 kinds x 2 repeats; adequacy: 2 kinds x 2 repeats x 3 sizes (+4 shared with rho);
    # lost-test: rho's random splits again (shared)
    assert not report.failed and report.n_planned == 6 + 12 and report.n_ran == 18
    rows = store.trials()
    by = {(r["protocol"], r["kind"], r["repeat"], (r["params"] or {}).get("size")): r
          for r in rows}
    for (protocol, kind, r, size), row in by.items():
        if protocol == "adequacy":
            full = by[("source-aware", kind, r, None)]
            assert row["n_test"] == full["n_test"]
            assert row["n_train"] + row["n_val"] == min(size, full["n_train"] + full["n_val"])

    scores = {(s.metric, s.score): s for s in report.scores}
    for label in (30, 90, 200, "full"):
        assert scores[("adequacy", f"rho@{label}")].value is not None
    assert scores[("adequacy", "rho@full")].value == pytest.approx(scores[("rho", "rho")].value)
    assert scores[("adequacy", "enough_exclusive")].higher_is_better is False
    # the stored sizes pair by repeat: the claim uses the paired rule on them
    from dataclasses import asdict

    from robench.families.source_aware.claims import adequacy_claims

    (claim,) = adequacy_claims([asdict(s) for s in report.scores if s.metric == "adequacy"])
    assert claim.evidence["toy-centroid"]["rule"] == "paired"
    assert claim.evidence["toy-centroid"]["n"] == 2 and "n=30" in claim.figure
    assert scores[("lost-test", "true_accuracy")].value == pytest.approx(
        scores[("rho", "acc_random")].value)
    assert scores[("lost-test", "practical_abs_error")].value == pytest.approx(0, abs=1e-9)
    lag = scores[("lost-test", "practical_logged_abs_error")].value
    assert lag > 0.05, "a stale training-log accuracy is amplified by N1/N2"
    # the headline is the realistic estimator's error, not the oracle identity's (always 0)
    head = scores[("lost-test", "lost-test")]
    assert head.value == pytest.approx(lag) and head.higher_is_better is False
    assert head.details["estimator"] == "practical_logged" and head.details["role"] == "realistic"
    assert scores[("lost-test", "practical")].details["role"] == "oracle consistency check"
    assert scores[("lost-test", "alpha_out_abs_error")].value > 0

    again = execute(cfg, reg, store)
    assert again.n_ran == 0 and again.n_cached == 18

    res = CliRunner().invoke(cli, ["results", "--metric", "adequacy", "--db", str(store.path)],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "dataset adequacy" in res.output and "E[AccX]" in res.output
    assert "least robust classes" in res.output and "enough:" in res.output
    for label in ("30", "90", "200", "full"):
        assert any(line.split()[:1] == [label] for line in res.output.splitlines())


def test_lost_test_plans_exactly_the_random_trials_of_rho(reg):
    cfg = config(metrics=["lost-test"])
    mine = random_split.plan(Combo(combo(reg).dataset, combo(reg).model, None), cfg, reg)
    theirs = [s for s in source_aware.plan(combo(reg), cfg, reg) if s["kind"] == "random"]
    assert mine == theirs


def test_adequacy_runs_in_every_run_all(reg, tmp_path, monkeypatch):
    import robench.run.runner

    seen = []

    def fake_execute(cfg, registry, store, **_):
        seen.append(cfg)
        # a real run row: a race scores its tables under the last round's run
        run_id = store.start_run(command="fake", seed=0, config={}, plugin_versions={})
        return RunReport(run_id, 0, 0, 0, [], [], [], 0.0)

    monkeypatch.setattr(robench.run.runner, "execute", fake_execute)
    db = str(tmp_path / "r.db")
    runner = CliRunner()
    # `run --all` covers every registered metric: adequacy too (about 45 s of a quick run --all)
    for args, has_adequacy in ((["--all"], True), (["--all", "--profile", "paper"], True),
                               (["--metric", "adequacy"], True), (["-d", "adequacy-toy"], True)):
        before = len(seen)
        res = runner.invoke(cli, ["run", *args, "--executor", "local", "--db", db])
        assert res.exit_code == 0, res.output
        # a race (--budget) runs rho and coverage in rounds beside one plain run of the
        # other metrics: the metrics asked for are those of all its executions
        metrics = {m for c in seen[before:] for m in c.metrics}
        assert ("adequacy" in metrics) is has_adequacy, args
        assert "lost-test" in metrics or args[0] == "--metric"
    help_text = runner.invoke(cli, ["run", "--help"]).output
    assert "--profile paper" in help_text
