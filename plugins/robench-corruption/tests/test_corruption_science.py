"""mCE and CE on numbers derivable by hand, and the metric's aggregate on fake trial rows."""

import pytest

from robench_corruption import science
from robench_corruption.metric import aggregate

# model errors per severity: a = [.1, .2, .3] (sum .6), b = [.5, .5, .5] (sum 1.5)
MODEL = {"a": [0.9, 0.8, 0.7], "b": [0.5, 0.5, 0.5]}
# baseline errors: a = [.2, .4, .6] (sum 1.2), b = [.5, .5, .5] (sum 1.5)
BASE = {"a": [0.8, 0.6, 0.4], "b": [0.5, 0.5, 0.5]}


def test_ce_and_mce_by_hand():
    ce = science.corruption_errors(MODEL, BASE)
    assert ce == pytest.approx({"a": 0.6 / 1.2, "b": 1.0})
    assert science.mean_defined(ce) == pytest.approx(0.75)
    assert science.mean_corruption_accuracy(MODEL) == pytest.approx((2.4 + 1.5) / 6)


def test_relative_ce_by_hand():
    # clean error: model .05, baseline .1 -> a: (.6 - 3*.05)/(1.2 - 3*.1) = .45/.9 = .5
    rce = science.relative_corruption_errors(MODEL, 0.95, BASE, 0.9)
    assert rce["a"] == pytest.approx(0.5)
    assert rce["b"] == pytest.approx((1.5 - 0.15) / (1.5 - 0.3))


def test_baseline_against_itself_is_exactly_one():
    ce = science.corruption_errors(BASE, BASE)
    assert all(v == 1.0 for v in ce.values()) and science.mean_defined(ce) == 1.0


def test_undefined_where_baseline_makes_no_error():
    ce = science.corruption_errors({"a": [0.9], "b": [0.5]}, {"a": [1.0], "b": [0.5]})
    assert ce["a"] is None and science.mean_defined(ce) == pytest.approx(1.0)
    assert science.mean_defined({"a": None}) is None


def _row(model, acc, clean, baseline="mlp"):
    return {"model": model, "status": "ok", "not_applicable": None, "baseline": baseline,
            "extra": {"n": 10, "clean": clean, "severities": [1, 2, 3], "accuracy": acc}}


def _by_score(scores):
    return {s.score: s for s in scores}


def test_aggregate_scores_the_group_model_against_the_baseline():
    group = {"dataset": "d", "model": "cnn"}
    s = _by_score(aggregate(group, [_row("cnn", MODEL, 0.95), _row("mlp", BASE, 0.9)]))
    assert s["mce"].value == pytest.approx(0.75) and s["mce"].higher_is_better is False
    assert s["ce|a"].value == pytest.approx(0.5) and s["ce|b"].value == pytest.approx(1.0)
    assert s["clean_accuracy"].value == 0.95
    assert s["relative_mce"].value == pytest.approx((0.5 + 1.35 / 1.2) / 2)
    assert s["mce"].details["baseline"] == "mlp"
    # the baseline's own group: CE = 1 exactly
    s = _by_score(aggregate({"dataset": "d", "model": "mlp"}, [_row("mlp", BASE, 0.9)]))
    assert s["mce"].value == 1.0 and s["ce|a"].value == 1.0


def test_aggregate_reports_a_failed_baseline_instead_of_a_number():
    bad = {"model": "mlp", "status": "failed", "error": "boom\ntrace"}
    (s,) = aggregate({"dataset": "d", "model": "cnn"}, [_row("cnn", MODEL, 0.95), bad])
    assert s.value is None and s.details["error"] == "baseline 'mlp' trial failed: boom"
