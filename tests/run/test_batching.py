"""Tests for robench.run.batching: trials grouped into units, trained together, stored alone."""

import pytest

torch = pytest.importorskip("torch")

from robench.run import batching  # noqa: E402
from robench.run.executors import LocalExecutor, execute_trial, failed_row  # noqa: E402
from robench.run.runner import execute, plan_run  # noqa: E402
from tests.helpers import run_config  # noqa: E402


@pytest.fixture
def registry():
    from robench.plugins import make_registry, set_registry

    reg = make_registry(load_entrypoints=False)
    set_registry(reg)
    yield reg
    set_registry(None)


def _cfg(policy, models=("mlp",), repeats=2, **kw):
    base = dict(datasets=["digits"], models=list(models), clusterers=["kmeans"],
                metrics=["rho"], repeats=repeats, k=3, executor="local", batch=policy,
                train={"max_epochs": 2})
    base.update(kw)
    return run_config(**base)


def _specs(cfg, registry):
    plan = plan_run(cfg, registry)
    return [dict(s, device="cpu") for s in plan.specs.values()]


def test_units_group_one_protocol_data_set_and_model_and_keep_the_order(registry):
    specs = _specs(_cfg("on", models=("mlp", "cnn-1", "svm")), registry)
    assert batching.group_units(specs, "off") == specs
    units = batching.group_units(specs, "on", jobs=2)
    trials = [s for u in units for s in u.get("batch", [u])]
    assert sorted(s["key"] for s in trials) == sorted(s["key"] for s in specs)
    for unit in units:
        if "batch" in unit:
            members = unit["batch"]
            assert len({(s["protocol"], s["dataset"], s["model"]) for s in members}) == 1
            assert len(members) >= 2 and unit["key"].startswith("batch-")
    # 6 trials per model, 2 workers: two units of 3 per model
    assert sorted(len(u["batch"]) for u in units) == [3] * 6
    # auto batches on CUDA only: on a CPU every trial stays alone
    assert batching.group_units(specs, "auto", jobs=2) == specs
    on_gpu = [dict(s, device="cuda") for s in specs]
    assert len(batching.group_units(on_gpu, "auto", jobs=2)) == 6


def test_a_batched_run_stores_what_a_one_at_a_time_run_stores(registry, tmp_path):
    """Same keys, seeds, columns and (up to rounding) numbers; only how it ran differs."""
    from robench.storage.store import Store

    out = {}
    for policy in ("off", "on"):
        store = Store(tmp_path / f"{policy}.db")
        report = execute(_cfg(policy), registry, store)
        assert not report.failed and report.n_ran == 6
        out[policy] = {r["key"]: r for r in store.trials()}
        store.close()
    alone, together = out["off"], out["on"]
    assert set(alone) == set(together)
    for key, a in alone.items():
        b = together[key]
        assert set(a) == set(b)
        for column in ("seed", "repeat", "kind", "spec", "n_train", "n_val", "n_test", "params"):
            assert a[column] == b[column], column
        assert b["status"] == "ok" and b["execution"]["batched"] == 6  # one worker: one unit
        assert "batched" not in a["execution"]
        assert b["epochs"] == a["epochs"]
        assert b["accuracy"] == pytest.approx(a["accuracy"], abs=0.02)


def test_trials_that_cannot_be_batched_run_alone_in_their_unit(registry):
    from robench.run.trials import TrialEnv

    cfg = _cfg("on", models=("svm",))
    unit = batching.group_units(_specs(cfg, registry), "on")[0]
    assert "batch" in unit
    rows = execute_trial(unit, TrialEnv(registry), None)
    assert len(rows) == len(unit["batch"])
    assert [r["key"] for r in rows] == [s["key"] for s in unit["batch"]]
    assert all(r["status"] == "ok" and "batched" not in r["execution"] for r in rows)


def test_a_failed_batched_training_falls_back_to_training_alone(registry, monkeypatch):
    from robench.learn import batched

    def broken(jobs, device=None):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(batched, "fit_many", broken)
    unit = batching.group_units(_specs(_cfg("on"), registry), "on")[0]
    rows = list(LocalExecutor(registry).run([unit]))[0]
    assert len(rows) == len(unit["batch"]) and all(r["status"] == "ok" for r in rows)
    assert all("batched" not in r["execution"] for r in rows)
    assert batching.unit_rows(rows) == rows and batching.unit_rows(rows[0]) == [rows[0]]


def test_a_unit_that_could_not_run_gives_one_failed_row_per_trial(registry):
    unit = batching.group_units(_specs(_cfg("on"), registry), "on")[0]
    rows = failed_row(unit, "worker died")
    assert [r["key"] for r in rows] == [s["key"] for s in unit["batch"]]
    assert all(r["status"] == "failed" and r["error"] == "worker died" for r in rows)


def test_the_policy_is_checked_and_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("ROBENCH_BATCH", "OFF")
    assert batching.default_policy() == "off"
    with pytest.raises(ValueError, match="auto, on, off"):
        batching.check_policy("sometimes")
    cfg = run_config(datasets=["digits"], models=["mlp"], clusterers=["kmeans"],
                     metrics=["rho"])
    assert cfg.batch == "off"
    with pytest.raises(ValueError, match="ROBENCH_BATCH"):
        run_config(datasets=["digits"], models=["mlp"], clusterers=["kmeans"],
                   metrics=["rho"], batch="always")


def test_units_go_through_process_workers(registry, tmp_path):
    """The process executor pickles a unit to a spawned worker and stores one row per trial."""
    from robench.storage.store import Store

    store = Store(tmp_path / "p.db")
    report = execute(_cfg("on", executor="process", jobs=2), registry, store)
    rows = store.trials()
    store.close()
    assert not report.failed and report.n_ran == 6 and len(rows) == 6
    assert sorted(r["execution"]["batched"] for r in rows) == [3] * 6
    assert {r["execution"]["executor"] for r in rows} == {"process"}


def test_a_bad_policy_is_a_one_line_error_with_exit_2(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from robench.cli import cli

    monkeypatch.setenv("ROBENCH_BATCH", "sometimes")
    db = tmp_path / "r.db"
    res = CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "mlp", "--metric", "rho",
                                   "--dry-run", "--db", str(db)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "ROBENCH_BATCH" in res.output and not db.exists()


def test_robench_verify_checks_a_batched_trial_within_the_tolerance(registry, tmp_path):
    """A trial trained in a batch re-runs alone: same result up to rounding, so verify
    compares it like a trial from another device (robench.exchange.verify)."""
    from click.testing import CliRunner

    from robench.cli import cli

    db = str(tmp_path / "b.db")
    res = CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "mlp", "-c", "kmeans", "-k", "3",
                                   "-r", "2", "--metric", "rho", "--set", "train.max_epochs=2",
                                   "--executor", "local", "--db", db],
                             env={"ROBENCH_BATCH": "on"})
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["verify", "--db", db, "--sample", "3"])
    assert res.exit_code == 0, res.output
    assert "0 mismatch(es)" in res.output and res.output.count(", tolerance") == 3
