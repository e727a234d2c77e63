"""Tests for the summary of skipped combinations (after a run and on the leaderboard)."""

from robench.present.skips import summarize_skips


def skip(metric, model, dataset, reason):
    return {"metric": metric, "model": model, "dataset": dataset, "clusterer": "oracle",
            "reason": reason}


def test_skips_are_grouped_by_reason_naming_only_what_the_reason_does_not():
    oracle = "clusterer 'oracle' needs true source ids and data set 'digits' has none"
    svm = "model 'svm' declares no learned feature space"
    summary = summarize_skips([
        skip("rho", "mlp", "digits", oracle),
        skip("purity-ratio", "svm", "digits", svm),
        skip("rho", "cnn", "digits", oracle),
        skip("purity-ratio", "svm", "mnist", svm),
    ])
    assert summary == [
        {"metric": "rho", "reason": oracle, "where": "models: cnn, mlp"},
        {"metric": "purity-ratio", "reason": svm, "where": "data sets: digits, mnist"},
    ]
    assert summarize_skips([]) == []
