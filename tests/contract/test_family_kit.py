"""The family kit: specs built from the modules that define them, and the row helpers of
robench.metric_kit (trial triage, the score index, the helper-model exclusion)."""

import types

import pytest

from robench import hookimpl
from robench.metric_kit import (by_repeat, error_line, failure, is_helper, not_applicable,
                                score_index, without_helpers)
from robench.plugins import Registry, make_plugin_manager
from robench.specs import MetricSpec, PairedComparison, ProtocolSpec


def _aggregate(group, trials):
    return []


def _metric_module(**extra):
    module = types.ModuleType("my_family.metric")
    module.METRIC, module.VERSION, module.DEFINITION = "my-metric", 3, "what it is"
    module.DESCRIPTION, module.aggregate = "one line", _aggregate
    for name, value in extra.items():
        setattr(module, name, value)
    return module


def _protocol_module(**extra):
    module = types.ModuleType("my_family.protocol")
    module.NAME, module.VERSION, module.DESCRIPTION = "my-protocol", "2", "how it runs"
    module.plan = lambda combo, cfg, registry: []
    module.run = lambda spec, env: {}
    for name, value in extra.items():
        setattr(module, name, value)
    return module


def test_metric_spec_reads_the_module_and_keeps_the_defaults_it_does_not_override():
    protocol = _protocol_module()
    spec = MetricSpec.from_module(_metric_module(HIGHER_IS_BETTER=False, DISPLAY_ORDER=7,
                                                 REFERENCES=(("A paper", ""),),
                                                 MOVED_FROM="old.plugin"),
                                  protocol=protocol)
    assert (spec.name, spec.version, spec.definition, spec.description, spec.aggregate) == (
        "my-metric", "3", "what it is", "one line", _aggregate)
    assert (spec.protocol, spec.higher_is_better, spec.display_order, spec.references,
            spec.moved_from) == ("my-protocol", False, 7, (("A paper", ""),), "old.plugin")
    defaults = MetricSpec("x", "", "p", _aggregate, "")
    assert (spec.uses_clusterer, spec.needs_features, spec.in_default_run, spec.paired,
            spec.applies_to) == (defaults.uses_clusterer, defaults.needs_features,
                                 defaults.in_default_run, None, None)


def test_metric_spec_wiring_wins_and_a_protocol_may_be_named():
    report = lambda rows: []  # noqa: E731
    spec = MetricSpec.from_module(_metric_module(DISPLAY_ORDER=7), protocol="source-aware",
                                  report=report, display_order=8)
    assert (spec.protocol, spec.report, spec.display_order) == ("source-aware", report, 8)


def test_metric_spec_pairs_a_module_that_defines_both_paired_functions():
    values, interval = (lambda trial: None), (lambda score, level: None)
    spec = MetricSpec.from_module(_metric_module(paired_values=values, interval_at=interval,
                                                 REPEATS_KNOB="mine.repeats"), protocol="p")
    assert spec.paired == PairedComparison(score="my-metric", values=values,
                                           interval=interval, repeats_knob="mine.repeats")
    with pytest.raises(TypeError, match="needs both paired_values and interval_at"):
        MetricSpec.from_module(_metric_module(paired_values=values), protocol="p")


def test_metric_spec_names_what_the_module_lacks():
    module = _metric_module()
    del module.DESCRIPTION, module.aggregate
    with pytest.raises(TypeError, match="my_family.metric defines no DESCRIPTION, aggregate"):
        MetricSpec.from_module(module, protocol="p")


def test_protocol_spec_reads_constants_and_wires_callables_only_by_name():
    def partition(spec, dataset, registry):
        return (), (), ()

    module = _protocol_module(SECTION="mine", AFTER=("other",), TRIAL_VERSIONS=("1",),
                              partition=partition, prepare=lambda *a: {})
    spec = ProtocolSpec.from_module(module)
    assert (spec.name, spec.version, spec.description, spec.plan, spec.run) == (
        "my-protocol", "2", "how it runs", module.plan, module.run)
    assert (spec.section, spec.after, spec.trial_versions) == ("mine", ("other",), ("1",))
    # a function that happens to be called partition or prepare is not handed to robench
    assert spec.partition is None and spec.prepare is None
    assert ProtocolSpec.from_module(module, partition=partition).partition is partition
    del module.run
    with pytest.raises(TypeError, match="defines no run"):
        ProtocolSpec.from_module(module)


def test_a_plugin_whose_metric_module_lacks_a_name_fails_alone_with_the_reason():
    module = _metric_module()
    del module.DEFINITION

    class Broken:
        @hookimpl
        def register_metrics(self, register):
            register(MetricSpec.from_module(module, protocol="source-aware"))

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(Broken(), name="broken-family")
    registry = Registry(pm, infos)
    assert "rho" in registry.names("metrics")  # everything else still loads
    assert registry.infos["broken-family"].status == "failed"
    assert "defines no DEFINITION" in registry.infos["broken-family"].error


# --- trial triage ----------------------------------------------------------------------------


def test_failure_error_line_and_not_applicable():
    ok = {"status": "ok", "error": None}
    assert failure(ok) is None and error_line(ok) is None
    assert failure({"status": "failed", "error": "Boom\nTraceback ..."}) == "Boom"
    assert failure({"status": "failed", "error": None}) == "failed"
    assert failure({"status": "failed", "error": "\nsecond line"}) == ""  # as stored
    assert failure({}) == "failed"  # no status: not a finished trial
    assert not_applicable({"status": "ok", "not_applicable": "no features"}) == "no features"
    assert not_applicable({"status": "ok", "extra": {"not_applicable": "tabular"}}) == "tabular"
    assert not_applicable({"status": "ok", "extra": '{"not_applicable": "x"}'}) is None
    assert not_applicable(ok) is None


def test_by_repeat_keeps_one_row_per_repeat_of_one_protocol_in_repeat_order():
    rows = [{"protocol": "a", "repeat": 2, "n": 1}, {"protocol": "a", "repeat": None, "n": 2},
            {"protocol": "b", "repeat": 1, "n": 3}, {"protocol": "a", "repeat": 2, "n": 4}]
    assert by_repeat(rows, protocol="a") == {0: rows[1], 2: rows[3]}
    assert list(by_repeat(rows, protocol="a")) == [0, 2]
    assert list(by_repeat(rows)) == [0, 1, 2]


# --- the score index -------------------------------------------------------------------------


def test_score_index_nests_by_fields_and_tuples_of_fields():
    rows = [{"metric": "m", "dataset": "d", "model": "a", "clusterer": "k", "score": "m"},
            {"metric": "m", "dataset": "d", "model": "a", "clusterer": "k", "score": "s"},
            {"metric": "m", "dataset": "e", "model": "b", "clusterer": "", "score": "m"},
            {"metric": "other", "dataset": "d", "model": "a", "clusterer": "", "score": "m"}]
    assert score_index(rows, "m") == {"d": {"a": {"m": rows[0], "s": rows[1]}},
                                      "e": {"b": {"m": rows[2]}}}
    assert score_index(rows, "m", by=(("dataset", "clusterer"), "model")) == {
        ("d", "k"): {"a": {"m": rows[0], "s": rows[1]}}, ("e", ""): {"b": {"m": rows[2]}}}
    assert score_index(rows, by=("model",))["a"] == {"m": rows[3], "s": rows[1]}


# --- helper models ---------------------------------------------------------------------------


def test_without_helpers_leaves_out_a_helper_only_on_its_own_data_set():
    helpers = {("digits", "zoo-mlp"): ["purity-ratio"]}
    rows = [{"dataset": "digits", "model": "zoo-mlp"}, {"dataset": "digits", "model": "mlp"},
            {"dataset": "mnist-5k", "model": "zoo-mlp"}]
    assert without_helpers(rows, helpers) == rows[1:]
    assert [is_helper(r, helpers) for r in rows] == [True, False, False]
