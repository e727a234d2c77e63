"""One selection policy: `robench run` and `robench.evaluate` include the same components."""

import pytest
from click.testing import CliRunner

import robench
from robench.run.config import INCLUDES_OPT_IN, PROFILES
from robench.run.selection import select


class _Planned(Exception):
    """Raised by the patched planner/executor to stop once the configuration is made."""


@pytest.fixture
def capture(monkeypatch):
    """Patch the planner (CLI) and the executor (evaluate) to record the RunConfig they get."""
    import robench.api
    import robench.run.runner

    seen = []

    def record(cfg, *args, **kwargs):
        seen.append(cfg)
        raise _Planned

    monkeypatch.setattr(robench.run.runner, "plan_run", record)
    monkeypatch.setattr(robench.run.runner, "execute", record)
    return seen


@pytest.mark.parametrize("profile", list(PROFILES))
def test_run_and_evaluate_choose_the_same_components_in_every_profile(profile, capture, tmp_path):
    from robench.cli import cli

    CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "mlp", "--profile", profile,
                             "--db", str(tmp_path / "cli.db")])
    with pytest.raises(_Planned):
        robench.evaluate("mlp", "digits", profile=profile, db=str(tmp_path / "api.db"))
    from_cli, from_api = capture
    for kind in ("datasets", "models", "clusterers", "metrics"):
        assert getattr(from_cli, kind) == getattr(from_api, kind), kind
    assert from_cli.profile == from_api.profile == profile


def test_opt_in_components_join_only_the_profiles_that_include_them(tiny_registry):
    opt_in = {kind: [c.name for c in tiny_registry.all(kind) if not c.in_default_run]
              for kind in ("models", "clusterers", "metrics")}
    assert opt_in["clusterers"], "the built-ins have an opt-in clusterer (multicut)"
    for profile in PROFILES:
        chosen = select(tiny_registry, profile)
        for kind, names in opt_in.items():
            assert set(names) <= set(getattr(chosen, kind)) if INCLUDES_OPT_IN[profile] \
                else not set(names) & set(getattr(chosen, kind)), (profile, kind)
        assert chosen.opt_in == ({} if INCLUDES_OPT_IN[profile]
                                 else {k: v for k, v in opt_in.items() if v})


def test_named_components_are_exactly_what_runs_canonical_and_once(tiny_registry):
    chosen = select(tiny_registry, "quick", clusterers=["multicut", "kmeans", "multicut"],
                    metrics=["rho"])
    assert chosen.clusterers == ["multicut", "kmeans"]
    assert chosen.metrics == ["rho"]
    assert chosen.explicit["clusterers"] == ["multicut", "kmeans"]
    assert "clusterers" not in chosen.opt_in and "metrics" not in chosen.opt_in


def test_an_unknown_name_or_profile_is_refused(tiny_registry):
    from robench.errors import UnknownComponentError

    with pytest.raises(UnknownComponentError, match="kmenas"):
        select(tiny_registry, "quick", clusterers=["kmenas"])
    with pytest.raises(ValueError, match="unknown profile"):
        select(tiny_registry, "fast")
