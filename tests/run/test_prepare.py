"""robench.run.prepare: the one place `robench run` and `robench.evaluate` build a run from."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import robench.run.prepare as prepare_module
from robench.errors import ConfigurationError, KnobError
from robench.run.prepare import default_executor, prepare
from robench.run.runner import plan_run


def test_prepare_plans_the_named_combination(tiny_registry):
    got = prepare(tiny_registry, datasets=["tiny"], models=["centroid"], clusterers=["oracle"],
                  metrics=["rho"], repeats=2, k=3, jobs=1)
    cfg = got.config
    assert (cfg.datasets, cfg.models, cfg.clusterers, cfg.metrics) == (
        ["tiny"], ["centroid"], ["oracle"], ["rho"])
    assert cfg.executor == "local"  # one job: a process pool would only cost start-up
    assert got.selection.explicit["models"] == ["centroid"]
    # the plan is exactly the planner's for that configuration
    assert list(got.plan.specs) == list(plan_run(cfg, tiny_registry).specs)
    assert len(got.plan.specs) > 0


def test_the_default_executor_uses_processes_only_where_they_help(monkeypatch):
    monkeypatch.setattr(prepare_module.os, "cpu_count", lambda: 4)
    assert default_executor(1) == "local" and default_executor(4) == "process"
    monkeypatch.setattr(prepare_module.os, "cpu_count", lambda: 1)
    assert default_executor(4) == "local"


def test_a_scheduler_needs_the_dask_executor(tiny_registry):
    with pytest.raises(ConfigurationError, match="--scheduler goes with --executor dask"):
        prepare(tiny_registry, datasets=["tiny"], models=["centroid"], metrics=["rho"],
                executor="local", scheduler="tcp://127.0.0.1:8786")


def test_the_knobs_are_checked_before_the_cache_folder(tiny_registry, monkeypatch):
    """A bad knob is reported even where the cache folder is bad too: values first."""
    def broken_cache():
        raise AssertionError("the cache folder was checked before the knobs")

    monkeypatch.setattr(prepare_module, "check_cache_dir", broken_cache)
    with pytest.raises(KnobError):
        prepare(tiny_registry, datasets=["tiny"], models=["centroid"], metrics=["rho"],
                settings={"train": {"no_such_knob": 1}})


def test_the_command_and_the_api_both_go_through_prepare(tiny_registry, monkeypatch, tmp_path):
    """`robench run` and `robench.evaluate` hold no selection policy of their own."""
    from robench.cli import cli
    import robench.api

    calls = []

    def spy(registry, **kwargs):
        calls.append(kwargs)
        raise ConfigurationError("stop here")

    monkeypatch.setattr(prepare_module, "prepare", spy)
    monkeypatch.setattr("robench.cli.run.load_registry", lambda: tiny_registry)
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "--metric", "rho",
                                   "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 2 and "stop here" in res.output
    with pytest.raises(ConfigurationError, match="stop here"):
        robench.api.evaluate("centroid", "tiny", metrics=["rho"], registry=tiny_registry,
                             db=str(tmp_path / "y.db"))
    assert [c["datasets"] for c in calls] == [("tiny",), ["tiny"]]
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()
