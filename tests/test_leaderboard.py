"""Tests for the static HTML leaderboard."""

import re

import pytest

from robench.leaderboard import build_leaderboard, format_percent, rank_rows
from robench.scoring import save_scores
from robench.specs import Score
from robench.store import Store

RHO_DEFINITION = "rho = E[AccX] / E[AccI] over R repeats (paper eq. 3)"
PURITY_DEFINITION = "p = C_purity / Model_ACC"


def rho_scores(model, rho, acc_x, acc_i, acc_random, clusterer="kmeans", n=5):
    """Return the four rho sub-scores of one model on digits."""
    return [
        Score("digits", model, clusterer, "rho", "rho", rho, rho - 0.02, rho + 0.02, n=n),
        Score("digits", model, clusterer, "rho", "acc_exclusive", acc_x, n=n),
        Score("digits", model, clusterer, "rho", "acc_inclusive", acc_i, n=n),
        Score("digits", model, clusterer, "rho", "acc_random", acc_random, n=n),
    ]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "robench.db")
    yield s
    s.close()


@pytest.fixture
def filled(store):
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    scores = (
        rho_scores("mlp", 0.900, 0.8100, 0.9000, 0.9050)
        + rho_scores("lenet", 0.975, 0.9263, 0.9500, 0.9510)
        + rho_scores("logreg", 0.850, 0.7650, 0.9000, 0.9000)
        + rho_scores("lenet", 0.700, 0.6650, 0.9500, 0.9510, clusterer="oracle")
        + [
            # purity-ratio has tables of its own (test_clusterability.py): a generic metric here
            Score("digits", "mlp", "", "feature-ratio", "kmeans", 0.42, 0.40, 0.44, n=3),
            Score("digits", "lenet", "", "feature-ratio", "kmeans", 0.61, n=3,
                  higher_is_better=True),
            Score("digits", "mlp", "", "error-gap", "gap", 0.05, higher_is_better=False),
            Score("digits", "lenet", "", "error-gap", "gap", 0.01, higher_is_better=False),
        ]
    )
    save_scores(
        store,
        scores,
        run_id,
        {
            "rho": ("1", RHO_DEFINITION),
            "feature-ratio": ("2", PURITY_DEFINITION),
            "error-gap": ("1", "gap <script>alert(1)</script>"),
        },
    )
    store.finish_run(run_id, "ok", n_ok=12)
    return store


def section(html, start, end):
    """Return the part of ``html`` from the first ``start`` to the next ``end``."""
    i = html.index(start)
    return html[i : html.index(end, i)]


def test_leaderboard_ranks_models_by_rho_with_ci_and_interval(filled, tmp_path):
    path = build_leaderboard(filled, tmp_path / "site" / "out")
    assert path == tmp_path / "site" / "out" / "index.html"
    html = path.read_text(encoding="utf-8")

    kmeans = section(html, "<code>kmeans</code>", "</table>")
    order = [kmeans.index(f"<td>{m}</td>") for m in ("lenet", "mlp", "logreg")]
    assert order == sorted(order), "models must be listed by descending rho"
    assert re.search(r'class="rank">1</td>\s*<td>lenet</td>', kmeans)
    assert re.search(r'class="rank">3</td>\s*<td>logreg</td>', kmeans)
    assert "0.975" in kmeans and "[0.955, 0.995]" in kmeans
    assert "[92.63%, 95.00%]" in kmeans
    assert "95.10%" in kmeans  # random-split accuracy
    assert 'class="span" style="left: 92.63%; width: 2.37%"' in kmeans

    oracle = section(html, "<code>oracle</code>", "</table>")
    assert "<td>lenet</td>" in oracle and "<td>mlp</td>" not in oracle
    assert "0.700" in oracle


def test_leaderboard_lists_other_metrics_definitions_and_runs(filled, tmp_path):
    html = build_leaderboard(filled, tmp_path).read_text(encoding="utf-8")
    other = section(html, "Other scores", "</table>")
    assert "feature-ratio" in other and "error-gap" in other
    # Lower is better for error-gap: lenet (0.01) ranks above mlp (0.05).
    gap_rows = re.findall(r"<td>error-gap</td>.*?class=\"rank\">(\d)</td>\s*<td>(\w+)</td>",
                          other, flags=re.S)
    assert gap_rows == [("1", "lenet"), ("2", "mlp")]
    assert "[0.4000, 0.4400]" in other

    definitions = section(html, "Definitions", "</section>")
    assert RHO_DEFINITION in definitions and PURITY_DEFINITION in definitions
    assert "version 2" in definitions
    assert "<script>" not in html and "&lt;script&gt;" in definitions  # autoescaped

    footer = section(html, "<footer>", "</footer>")
    run = filled.runs()[0]
    assert f"<td>{run['id']}</td>" in footer and run["robench_version"] in footer
    assert run["started_at"] in footer


def test_leaderboard_is_self_contained(filled, tmp_path):
    html = build_leaderboard(filled, tmp_path).read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    for attribute in re.findall(r'(?:src|href|url)\s*[=(]\s*["\']?([^"\')\s>]*)', html):
        assert not attribute.startswith("//") and ":" not in attribute, attribute
    assert "<script" not in html and "<link" not in html


def test_leaderboard_handles_an_empty_store(store, tmp_path):
    html = build_leaderboard(store, tmp_path / "empty").read_text(encoding="utf-8")
    assert "No scores yet" in html
    assert "<table" not in html.split("<footer>")[0]


def test_leaderboard_rebuild_overwrites(filled, tmp_path):
    first = build_leaderboard(filled, tmp_path).read_text(encoding="utf-8")
    second = build_leaderboard(filled, tmp_path).read_text(encoding="utf-8")
    assert first == second


def test_rank_rows_respects_direction_ties_and_missing():
    rows = [
        {"model": "a", "value": 0.5, "higher_is_better": False},
        {"model": "b", "value": None, "higher_is_better": False},
        {"model": "c", "value": 0.2, "higher_is_better": False},
        {"model": "d", "value": 0.2, "higher_is_better": False},
    ]
    ranked = rank_rows(rows)
    assert [(r["model"], r["rank"]) for r in ranked] == [
        ("c", 1), ("d", 1), ("a", 3), ("b", None)
    ]


def test_format_percent():
    assert format_percent(0.92634) == "92.63%"
    assert format_percent(None) == "—"
    assert format_percent(float("nan")) == "—"


def test_leaderboard_lists_what_could_not_apply_unless_a_later_run_scored_it(filled, tmp_path):
    reason = "clusterer 'oracle' needs true source ids and data set 'digits' has none"
    for model in ("mlp", "logreg"):
        filled.save_skip(dataset="digits", model=model, clusterer="oracle", metric="rho",
                         reason=reason, run_id=1)
    # stale: lenet/oracle on digits has scores (a later run scored it), so it is not listed
    filled.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                     reason=reason, run_id=1)
    filled.save_skip(dataset="other", model="mlp", clusterer="", metric="rho",
                     reason="no scores for this data set", run_id=1)
    html = build_leaderboard(filled, tmp_path / "site").read_text()
    part = section(html, "<h3>Not applicable</h3>", "</ul>")
    assert reason.replace("'", "&#39;") in part and "(models: logreg, mlp)" in part
    assert "no scores for this data set" not in html  # a data set without scores has no section
