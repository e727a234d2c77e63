"""Tests for score keys and digests and for reusing a score group whose inputs are unchanged.

The runner-level behaviour (warm reruns, rescore, changed trials) is in test_warm_rerun.py;
byte-identical keys and fingerprints against an older database in test_keys_stable.py.
"""

import hashlib
import json
from dataclasses import dataclass, field

import pytest

from robench.run.scoring import score_digest, score_groups, score_key, score_row
from tests.helpers import save_scores
from robench.specs import MetricSpec, Score
from tests.storage.test_store import DEFINITIONS, rho_scores, trial_row



@pytest.fixture
def store(store):
    """The shared store with runs 1-5: scores and trials point to their run (foreign key)."""
    from tests.helpers import add_runs

    add_runs(store, 5)
    return store

def test_save_scores_upserts_by_key(store):
    run1 = store.start_run(command="x", seed=0, config={}, plugin_versions={})
    save_scores(store, rho_scores(rho=0.9), run1, DEFINITIONS)
    assert len(store.scores()) == 4
    run2 = store.start_run(command="x", seed=0, config={}, plugin_versions={})
    save_scores(store, rho_scores(rho=0.7), run2, DEFINITIONS)
    rows = store.scores(dataset="digits", metric="rho")
    assert len(rows) == 4
    rho = next(r for r in rows if r["score"] == "rho")
    assert rho["value"] == pytest.approx(0.7) and rho["run_id"] == run2
    assert rho["ci_low"] == pytest.approx(0.65) and rho["n"] == 5
    assert rho["higher_is_better"] is True
    assert rho["metric_version"] == "1" and rho["definition"].startswith("rho =")
    assert rho["key"] == score_key("digits", "mlp", "kmeans", "rho", "rho")
    random = next(r for r in rows if r["score"] == "acc_random")
    assert random["details"] == {"note": "x"} and random["clusterer"] == ""


def test_save_scores_nan_value_is_null_and_filters_work(store):
    save_scores(
        store, [Score("digits", "cnn", "kmeans", "rho", "rho", float("nan"))] + rho_scores(), 1,
        DEFINITIONS,
    )
    assert store.scores(model="cnn")[0]["value"] is None
    assert len(store.scores(model="mlp")) == 4
    assert store.scores(dataset="other") == []


def test_save_scores_requires_a_definition(store):
    with pytest.raises(ValueError, match="definition"):
        save_scores(store, rho_scores(), 1, {})
    assert store.scores() == []


def test_score_key_is_sha256_of_identity():
    expected = hashlib.sha256(json.dumps(["d", "m", "", "rho", "rho"]).encode()).hexdigest()
    assert score_key("d", "m", "", "rho", "rho") == expected


def test_score_digest_is_the_same_written_and_as_stored(store):
    # a REAL column gives 1 back as 1.0 and an INTEGER one 3.0 as 3: the digest must not care
    scores = [Score("digits", "mlp", "", "rho", "rho", 1, 0, 1.0, n=3.0,
                    details={"b": 1, "a": [0.5]})]
    (row,) = [score_row(s, 1, DEFINITIONS, "now") for s in scores]
    save_scores(store, scores, 1, DEFINITIONS)
    stored = store.score_rows([row["key"]])[row["key"]]
    assert score_digest(stored) == score_digest(row)
    assert stored["details"] == row["details"] == '{"a": [0.5], "b": 1}'


@dataclass
class Group:
    """A score group as score_groups reads it (the runner's Group has the same attributes)."""

    metric: MetricSpec
    key_dict: dict
    keys: list = field(default_factory=list)


def _counting_metric(calls):
    def aggregate(group, trials):
        calls.append(group["model"])
        mean = sum(t["accuracy"] for t in trials) / len(trials)
        return [Score(group["dataset"], group["model"], group["clusterer"], "mean-acc",
                      "mean-acc", mean, n=len(trials), details={"extra": trials[0]["extra"]})]

    return MetricSpec("mean-acc", "Mean accuracy.", "source-aware", aggregate,
                      definition="mean accuracy over the group's trials", plugin="tests")


def test_score_groups_reuses_unchanged_groups_and_recomputes_changed_ones(store):
    calls = []
    metric = _counting_metric(calls)
    for model in ("a", "b"):
        for r in range(2):
            store.save_trial(trial_row(f"{model}{r}", model=model, repeat=r,
                                       accuracy=0.5 + r / 4, extra={"note": model}))
    groups = [Group(metric, {"dataset": "digits", "model": m, "clusterer": "kmeans"},
                    [f"{m}0", f"{m}1"]) for m in ("a", "b")]

    first, n_aggregated, n_reused = score_groups(groups, store, 1)
    assert (n_aggregated, n_reused, calls) == (2, 0, ["a", "b"])
    assert first[0].details == {"extra": {"note": "a"}}  # the trial's extra came back decoded
    again, n_aggregated, n_reused = score_groups(groups, store, 2, versions={"mean-acc": "0/1"})
    assert (n_aggregated, n_reused) == (2, 0), "another plugin version is another input"
    calls.clear()
    again, n_aggregated, n_reused = score_groups(groups, store, 3, versions={"mean-acc": "0/1"})
    assert (n_aggregated, n_reused, calls) == (0, 2, [])
    assert again == first
    assert {r["run_id"] for r in store.scores()} == {2}

    store.save_trial(trial_row("b1", model="b", repeat=1, accuracy=0.25, extra={"note": "b"}))
    again, n_aggregated, n_reused = score_groups(groups, store, 4, versions={"mean-acc": "0/1"})
    assert (n_aggregated, n_reused, calls) == (1, 1, ["b"])
    assert again[1].value == pytest.approx(0.375)
    _, n_aggregated, _ = score_groups(groups, store, 5, versions={"mean-acc": "0/1"}, rescore=True)
    assert n_aggregated == 2
