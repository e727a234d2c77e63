"""Knobs: declared by the core and the registered protocols, typed and checked when parsed."""

import pytest

from robench.run.config import (KnobError, RunConfig, check_value, knob_sections, parse_settings,
                            resolve_knobs)
from robench.plugins import make_registry
from robench.specs import UNSET, Knob, ProtocolSpec


@pytest.fixture(scope="module")
def reg():
    return make_registry(load_entrypoints=False)


def test_sections_come_from_the_core_and_the_registered_protocols(reg):
    sections = knob_sections(reg)
    assert sections["train"][0] == "robench"
    owners = {name: owner for name, (owner, _) in sections.items()}
    assert owners["coverage"] == "protocol 'coverage'"
    assert owners["clusterability"] == "protocol 'clusterability'"
    assert set(sections) == {"train", "adequacy", "clusterability", "shifted_cv", "coverage"}


def test_defaults_then_profile_then_settings(reg):
    quick = resolve_knobs(reg, "quick")
    paper = resolve_knobs(reg, "paper")
    # unset knobs (weight_decay, mc_samples) are left out: the model decides
    assert quick["train"] == {"max_epochs": 4, "patience": 2, "batch_size": 64, "lr": 2e-3}
    assert paper["train"] == {"max_epochs": 60, "patience": 10, "batch_size": 64, "lr": 1e-3}
    assert quick["coverage"]["repeats"] == 3 and paper["coverage"]["repeats"] == 5
    mine = resolve_knobs(reg, "paper", {"train": {"lr": 0.01, "weight_decay": 0}})
    assert mine["train"]["lr"] == 0.01 and mine["train"]["max_epochs"] == 60
    assert mine["train"]["weight_decay"] == 0.0 and isinstance(mine["train"]["weight_decay"], float)


BAD = [
    ("train.lr=abc", r"train.lr: value \"abc\" is not a number; expected float .*\(default 0.002\)"),
    ("train.lr=-1", r"train.lr: value -1 is below the minimum"),
    ("train.batch_size=0", r"train.batch_size: value 0 is below the minimum 1"),
    ("train.max_epochs=-3", r"train.max_epochs: value -3 is below the minimum 1"),
    ("train.max_epochs=2.5", r"train.max_epochs: value 2.5 is not an integer"),
    ("train.max_epochs=true", r"train.max_epochs: value true is not an integer"),
    ("train.max_epochs=null", r"train.max_epochs: null is not allowed"),
    ("train.lr=NaN", r"train.lr: value nan is not finite"),
    ("train.max_epoch=3", r"unknown train knob 'max_epoch'. Did you mean 'max_epochs'\?"),
    ("trian.lr=1", r"unknown section 'trian'. Did you mean 'train'\?"),
    ("coverage.sizes=[1, \"a\"]", r"coverage.sizes: item \"a\" is not an integer"),
    ("coverage.sizes=5", r"coverage.sizes: value 5 is not a list"),
    ("coverage.shift_covariance=ful", r"'ful' is not allowed \(did you mean 'full'\?\)"),
    ("clusterability.attacks=[\"fgsm\", \"cw\"]", r"item 'cw' is not allowed"),
    ("clusterability.severities=[0]", r"item 0 is below the minimum 1"),
    ("shifted_cv.train=3", r"shifted_cv.train: value 3 is not a JSON object"),
    ("lr=1", r"--set expects SECTION.KEY=VALUE"),
    ("train.lr", r"--set expects SECTION.KEY=VALUE"),
]


@pytest.mark.parametrize("item, message", BAD)
def test_bad_values_are_refused_when_parsed_naming_the_knob(reg, item, message):
    with pytest.raises(KnobError, match=message):
        parse_settings([item], reg)


def test_cross_knob_checks_run_when_resolving(reg):
    with pytest.raises(KnobError, match="theta1 <= theta2"):
        resolve_knobs(reg, "quick", {"coverage": {"theta1": 0.9, "theta2": 0.5}})
    with pytest.raises(KnobError, match="train: unknown key 'epochs'"):
        resolve_knobs(reg, "quick", {"shifted_cv": {"train": {"epochs": 2}}})
    with pytest.raises(KnobError, match="below the minimum 1"):
        resolve_knobs(reg, "quick", {"shifted_cv": {"train": {"max_epochs": 0}}})


def test_user_ints_become_floats_but_declared_values_are_never_converted():
    knob = Knob("x", "float", "x", default=1)
    assert check_value("s", knob, 1, convert=True) == 1.0
    assert isinstance(check_value("s", knob, 1, convert=True), float)
    assert type(check_value("s", knob, 1)) is int  # declared: kept as declared (trial keys)


def test_run_config_checks_its_own_fields():
    for bad, msg in (({"seed": -5}, "--seed must be an integer in"),
                     ({"seed": 2**70}, "--seed must be an integer in"),
                     ({"repeats": 0}, "--repeats must be an integer in \\[1, 10000\\]"),
                     ({"repeats": 2**63}, "--repeats must be an integer in"),
                     ({"k": 1}, "--sources must be an integer in \\[2, 1000\\]"),
                     ({"jobs": 0}, "--jobs must be an integer in"),
                     ({"profile": "fast"}, "unknown profile 'fast'")):
        with pytest.raises(ValueError, match=msg):
            RunConfig([], [], [], [], **bad)


def test_a_section_declared_twice_is_an_error():
    from robench import hookimpl
    from robench.plugins import Registry, make_plugin_manager

    class Plugin:
        @hookimpl
        def register_protocols(self, register):
            register(ProtocolSpec("other", plan=lambda *a: [], run=lambda *a: {},
                                  description="x", section="coverage",
                                  knobs=(Knob("r", "int", "r", default=1),)))

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(Plugin(), name="dup")
    with pytest.raises(KnobError, match="section 'coverage', already declared by protocol"):
        knob_sections(Registry(pm, infos))


def test_knob_declarations_are_checked():
    with pytest.raises(ValueError, match="type must be one of"):
        Knob("x", "number", "x")
    with pytest.raises(ValueError, match="knob name"):
        Knob("X-1", "int", "x")
    assert Knob("x", "int", "x").default is UNSET
    with pytest.raises(ValueError, match="declares knobs without a valid section"):
        ProtocolSpec("p", plan=None, run=None, description="x", knobs=(Knob("x", "int", "x"),))


def test_cli_knobs_lists_every_section_with_types_and_profile_values():
    from click.testing import CliRunner

    from robench.cli import cli

    out = CliRunner().invoke(cli, ["knobs"])
    assert out.exit_code == 0
    assert "train.max_epochs = quick 4, standard 12, paper 60" in out.output
    assert "coverage.repeats = quick 3, standard 5, paper 5" in out.output
    assert "train.weight_decay = quick unset, standard unset, paper unset" in out.output
    out = CliRunner().invoke(cli, ["knobs", "covrage"])
    assert out.exit_code == 2 and "Did you mean 'coverage'" in out.output
    out = CliRunner().invoke(cli, ["run", "--help"])
    assert "Knob sections" in out.output and "clusterability" in out.output
