"""Every page says what it shows (issue 51, point 3): the board's title, no winner without a
competitor, verification counts with their scope, no column for a metric that measured
nothing, a header for the rank column, each metric's direction and baseline."""

import json
import re
import time
from html import unescape
from types import SimpleNamespace

from robench.present.badges import COLOURS, headline_badge
from robench.present.site import build_site
from tests.helpers import save_scores
from robench.specs import Score
from robench.storage.store import Store
from robench.storage.verification import save_verification

RHO = ("1", "rho = E[AccX] / E[AccI]")


def _rho(model, rho, dataset="digits", half=0.02):
    return [Score(dataset, model, "kmeans", "rho", "rho", rho, rho - half, rho + half, n=5),
            Score(dataset, model, "kmeans", "rho", "acc_exclusive", 0.8 * rho, n=5),
            Score(dataset, model, "kmeans", "rho", "acc_inclusive", 0.9, 0.89, 0.91, n=5),
            Score(dataset, model, "kmeans", "rho", "acc_random", 0.9, n=5)]


def _filled(path, scores, definitions=None):
    store = Store(path)
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    save_scores(store, scores, run_id, definitions or {"rho": RHO})
    store.finish_run(run_id, "ok")
    return store


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


# --- the board's title ------------------------------------------------------------------------


def test_the_boards_title_is_the_sites_title(tmp_path):
    """`init-leaderboard --title` is stored in leaderboard.json as the site's title: the
    pipeline's build step puts it on every page (it said "robench leaderboard")."""
    from robench.exchange.publish import build
    from robench.present.site import DEFAULT_TITLE

    board = tmp_path / "board"
    (board / "contributions").mkdir(parents=True)
    (board / "leaderboard.json").write_text(json.dumps({"title": "Digits <robustness>"}))
    result = build(board)
    assert result.ok, result.lines
    index = (board / "site" / "index.html").read_text()
    methods = (board / "site" / "methods.html").read_text()
    assert "<title>Overview &middot; Digits &lt;robustness&gt;</title>" in index
    assert "<h1>Digits &lt;robustness&gt;</h1>" in index
    assert ">Digits &lt;robustness&gt;</a>" in methods  # the brand of every page
    assert f"&middot; {DEFAULT_TITLE}</title>" not in index and f">{DEFAULT_TITLE}</a>" not in index
    # the control: a site built without a title keeps the default one
    with Store(tmp_path / "empty.db") as store:
        build_site(store, tmp_path / "plain")
    assert f"<h1>{DEFAULT_TITLE}</h1>" in (tmp_path / "plain" / "index.html").read_text()


def test_the_leaderboard_command_takes_a_title(tmp_path):
    """`robench leaderboard --title` is the site's title; without it, the default."""
    from click.testing import CliRunner

    from robench.cli import cli

    db = tmp_path / "r.db"
    _filled(db, _rho("svm", 0.9) + _rho("mlp", 0.8)).close()
    res = CliRunner().invoke(cli, ["leaderboard", "--db", str(db), "--out", str(tmp_path / "s"),
                                   "--title", "Lab <runs>"])
    assert res.exit_code == 0, res.output
    assert "<h1>Lab &lt;runs&gt;</h1>" in (tmp_path / "s" / "index.html").read_text()
    res = CliRunner().invoke(cli, ["leaderboard", "--db", str(db), "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "<h1>robench leaderboard</h1>" in (tmp_path / "d" / "index.html").read_text()


# --- no winner without a competitor ---------------------------------------------------------


def test_a_model_alone_gets_no_winners_badge(tmp_path):
    """A one-model table: "rank 1 of 1" in the winner's green read as a race won; the badge
    says it is the only model ranked, in the colour of a plain rank. Two models: the control."""
    alone = {"rank": 1, "rank_interval": "1", "rank_best": 1, "rank_worst": 1, "value": 0.9,
             "ci_low": 0.88, "ci_high": 0.92}
    svg = headline_badge("robench rho · digits", alone, 1)
    assert "rank 1 of 1" not in svg and "the only model ranked · 0.900" in svg
    assert COLOURS["first"] not in svg and COLOURS["top"] not in svg
    assert COLOURS["first"] in headline_badge("robench rho · digits", alone, 2)

    store = _filled(tmp_path / "one.db", _rho("mlp", 0.9))
    build_site(store, tmp_path / "site")
    store.close()
    badges = list((tmp_path / "site" / "badges").glob("*.svg"))
    assert badges and all(COLOURS["first"] not in b.read_text() for b in badges)
    assert all("of 1" not in b.read_text() for b in badges)


# --- verification counts with their scope -----------------------------------------------------


def test_a_model_pages_verification_count_says_it_counts_this_models_trials(tmp_path):
    """A verification re-ran 20 trials (10 per model): the model page's "verified 10 of 10"
    says those are this model's and that the verification re-ran 20 in all (the count the
    pipeline's report gives), so the two counts do not read as a contradiction."""
    store = _filled(tmp_path / "v.db", _rho("mlp", 0.9) + _rho("svm", 0.8))
    trials = [{"key": f"{m}{i}", "dataset": "digits", "model": m, "outcome": "match"}
              for m in ("mlp", "svm") for i in range(10)]
    result = SimpleNamespace(trials=trials, host="ci-runner", device="cpu",
                             started_at="2026-12-07T00:00:00+00:00",
                             count=lambda o: sum(t["outcome"] == o for t in trials))
    save_verification(store, result, seed=1, contributor=None, environment={},
                      plugin_versions={}, finished_at="2026-12-07T00:01:00+00:00")
    build_site(store, tmp_path / "site")
    store.close()
    model = _text((tmp_path / "site" / "models" / "mlp.html").read_text())
    assert "verified 10 of 10 sampled trials on ci-runner, 2026-12-07" in model
    assert "counted over this model's trials: that verification re-ran 20 trials in all" in model
    dataset = _text((tmp_path / "site" / "datasets" / "digits.html").read_text())
    assert "verified 20 of 20 sampled trials" in dataset
    assert "counted over this data set's trials, all the trials it re-ran" in dataset


# --- a metric that did not run ----------------------------------------------------------------


def test_a_group_none_of_whose_trials_ran_gives_no_score(tiny_registry, store):
    """A budget that ends after the first trial: a model none of whose trials ran gets no
    score row (it got one with no value and "no trial" in it, for every such model), and the
    scores of the model that did run are there."""
    from robench.run.runner import execute
    from tests.helpers import run_config

    cfg = run_config(datasets=["tiny"], models=["centroid", "svm"], clusterers=["kmeans"],
                     metrics=["rho"], repeats=2, k=3, executor="local")
    events = []

    def slow_first(event, **info):
        events.append(event)
        if event == "trial" and events.count("trial") == 1:
            time.sleep(0.3)

    report = execute(cfg, tiny_registry, store, on_event=slow_first,
                     deadline=time.monotonic() + 0.2)
    assert report.budget_spent and report.n_ran == 1
    ran = {t["model"] for t in store.trials()}
    assert len(ran) == 1
    assert {s.model for s in report.scores} == ran
    assert {r["model"] for r in store.scores()} == ran


def _mce_rows(values, why="no model '{m}' trial"):
    """mce's headline rows of digits: one per model, with a value or none (and why)."""
    rows = []
    for m, v in values.items():
        details = {"baseline": "svm"} if v is not None else {
            "baseline": "svm", "error": why.format(m=m)}
        rows.append({"dataset": "digits", "model": m, "clusterer": "", "metric": "mce",
                     "score": "mce", "value": v, "n": 60 if v is not None else None,
                     "higher_is_better": False, "details": details})
    return rows


def _mce_section():
    from robench_corruption import leaderboard

    return type("S", (), {"headline": staticmethod(leaderboard.headline)})()


def test_the_summary_draws_no_column_of_dashes_and_says_once_why(tiny_registry):
    """After a --budget that ran no mCE trial, the summary showed an mCE column of dashes
    and listed purity-ratio (never computed) as "not in the table": now a headline with no
    value is one line with its reason, and a metric with no score is named once with why."""
    from robench.present.summary import summary_lines

    rows = [dict(vars(s), details={}) for s in _rho("mlp", 0.9) + _rho("svm", 0.8)]
    rows += _mce_rows({"mlp": None, "svm": None})
    sections = {"rho": tiny_registry.get("metrics", "rho").leaderboard, "mce": _mce_section()}
    out = summary_lines(rows, sections, metrics=["rho", "mce", "purity-ratio"],
                        budget_spent=True)
    text = "\n".join(out["lines"])
    assert "mCE" not in out["lines"][1]  # the header: no mCE column
    assert "mCE: no value for any model, so no column (no model 'mlp' trial)" in text
    assert text.count("no model") == 1
    assert "Not run: purity-ratio (the time budget was spent" in " ".join(text.split())
    assert "mce" not in out["rest"].get("digits", [])
    # the control: with values, mCE is a column
    rows = rows[:-2] + _mce_rows({"mlp": 0.8, "svm": 1.0})
    out = summary_lines(rows, sections, metrics=["rho", "mce"])
    assert "mCE" in out["lines"][1] and "Not run" not in "\n".join(out["lines"])


def test_the_site_draws_no_column_of_dashes_and_the_report_no_n_none(tmp_path):
    """The site's overview has no mCE column when no model has an mCE, and says why once;
    `results --metric mce` says the reason once instead of once per model, and no "n = None"."""
    from robench_corruption.report import report_lines

    from robench.plugins import make_registry

    registry = make_registry(modules=["robench_corruption"], load_entrypoints=False)
    mce = [Score(r["dataset"], r["model"], "", "mce", "mce", None, higher_is_better=False,
                 details=r["details"]) for r in _mce_rows({"mlp": None, "svm": None})]
    store = _filled(tmp_path / "m.db", _rho("mlp", 0.9) + _rho("svm", 0.8) + mce,
                    {"rho": RHO, "mce": ("1", "mCE")})
    build_site(store, tmp_path / "site", registry=registry)
    rows = store.scores(metric="mce")
    store.close()
    index = (tmp_path / "site" / "index.html").read_text()
    overview = index[index.index('id="ds-digits"'):]
    assert 'class="group sub">mCE' not in overview
    assert "mCE: no value for any model on digits, so no column (no model" in _text(overview)
    report = "\n".join(report_lines(rows))
    assert "n = None" not in report and report.count("trial") == 1, report


# --- the rank column's header, each column's direction and baseline --------------------------


def test_the_summary_names_the_rank_column_and_each_columns_direction_and_baseline(
        tiny_registry):
    from robench.present.summary import summary_lines

    rows = [dict(vars(s), details={}) for s in _rho("mlp", 0.9) + _rho("svm", 0.8)]
    rows += _mce_rows({"mlp": 0.8, "svm": 1.0})
    sections = {"rho": tiny_registry.get("metrics", "rho").leaderboard, "mce": _mce_section()}
    lines = summary_lines(rows, sections)["lines"]
    assert lines[0] == "digits" and lines[1].split()[:2] == ["rank", "model"]
    text = " ".join(" ".join(lines).split())
    assert "rho (kmeans): higher is better" in text
    assert "mCE: lower is better, relative to the baseline model 'svm' (= 1)" in text
    assert "rank = the rho (kmeans) column's rank" in text


def test_the_sites_overview_says_each_columns_direction_and_baseline(tmp_path):
    from robench.plugins import make_registry

    registry = make_registry(modules=["robench_corruption"], load_entrypoints=False)
    mce = [Score(r["dataset"], r["model"], "", "mce", "mce", r["value"], higher_is_better=False,
                 n=60, details=r["details"]) for r in _mce_rows({"mlp": 0.8, "svm": 1.0})]
    store = _filled(tmp_path / "m.db", _rho("mlp", 0.9) + _rho("svm", 0.8) + mce,
                    {"rho": RHO, "mce": ("1", "mCE")})
    build_site(store, tmp_path / "site", registry=registry)
    store.close()
    overview = _text((tmp_path / "site" / "index.html").read_text())
    assert "rho (kmeans) (higher is better)" in overview
    assert "mCE (lower is better; relative to the baseline model svm (= 1))" in overview


# --- long names shortened as the text views shorten them ---------------------------------------


def test_the_site_shortens_long_names_with_the_whole_name_in_a_title(tmp_path):
    """A 300-character data set or model name printed whole on every page (the text views
    shorten it, robench.escaping.shorten): the site shows the same short form, with the whole
    name in a title attribute; the page's <title> holds plain text; a short name is untouched."""
    from html import escape

    from robench.escaping import shorten

    dataset, model = "d" * 150 + "<set>" + "e" * 145, "m" * 200 + "&model"
    store = _filled(tmp_path / "long.db", _rho(model, 0.9, dataset=dataset) + _rho(
        "svm", 0.8, dataset=dataset))
    build_site(store, tmp_path / "site")
    store.close()
    pages = {p.relative_to(tmp_path / "site").as_posix(): p.read_text(encoding="utf-8")
             for p in (tmp_path / "site").rglob("*.html")}
    assert len(pages) >= 5
    for name in (dataset, model):
        short, whole = shorten(name), escape(name, quote=True).replace("&#x27;", "&#39;")
        assert len(short) == 80
        spans = f'<span title="{whole}">{escape(short, quote=False)}</span>'
        shown = 0
        for page, html in pages.items():
            outside = html.replace(f'title="{whole}"', "")
            assert escape(name, quote=False) not in outside, page  # whole only in a title
            shown += html.count(spans)
        assert shown >= 3, name
    dataset_page = next(html for page, html in pages.items() if page.startswith("datasets/"))
    assert f"<title>{escape(shorten(dataset), quote=False)} &middot;" in dataset_page
    assert ">svm</a>" in pages["index.html"]  # a short name: as it was
