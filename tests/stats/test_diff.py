"""robench diff A B: shared scores, the change with its interval, a decision, exit 0/1/2."""

import json
import sqlite3

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.stats.diff import compare, diff_scores

TINY = ["-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "8", "--executor", "local",
        "--metric", "rho", "-m", "centroid", "-m", "spy"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def copy_db(src, dst):
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


@pytest.fixture
def two_copies(tiny_registry, tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert run("run", *TINY, "--db", a).exit_code == 0
    copy_db(a, b)
    return a, b


def test_two_copies_of_one_database_are_the_same_and_exit_0(two_copies):
    a, b = two_copies
    res = run("diff", a, b)
    assert res.exit_code == 0, res.output
    n = sqlite3.connect(a).execute("SELECT count(*) FROM scores WHERE value IS NOT NULL") \
        .fetchone()[0]
    assert f"{n} same" in res.output and "0 worse" in res.output and "unchanged" not in res.output


def test_a_score_edited_down_is_worse_and_exits_1_in_every_format(two_copies):
    a, b = two_copies
    conn = sqlite3.connect(b)
    (value, low, high) = conn.execute("SELECT value, ci_low, ci_high FROM scores WHERE "
                                      "model = 'centroid' AND score = 'rho'").fetchone()
    conn.execute("UPDATE scores SET value = value - 0.5, ci_low = ci_low - 0.5, "
                 "ci_high = ci_high - 0.5 WHERE model = 'centroid' AND score = 'rho'")
    conn.commit()
    conn.close()
    res = run("diff", a, b, "--metric", "rho")
    assert res.exit_code == 1, res.output
    assert "tiny centroid kmeans rho rho: " in res.output and "worse" in res.output
    half = (high - low)  # both intervals as wide: sqrt(2) * half-width ~ 0.71 * width
    out = json.loads(run("diff", a, b, "--format", "json").output)
    (worse,) = [c for c in out["scores"] if c["decision"] == "worse"]
    assert worse["change"] == pytest.approx(-0.5)
    assert worse["high"] == pytest.approx(-0.5 + (2 * (half / 2) ** 2) ** 0.5)
    assert out["counts"]["worse"] == 1
    md = run("diff", a, b, "--format", "markdown")
    assert md.exit_code == 1 and "| `tiny` | `centroid` | `kmeans` | `rho` | `rho` |" in md.output
    # the other way round it got better, which is no failure
    assert run("diff", b, a, "--metric", "rho").exit_code == 0


def test_decisions_by_hand():
    base = dict(dataset="d", model="m", clusterer="", metric="rho", score="rho",
                configuration="c", metric_version="1", higher_is_better=True)
    a = dict(base, value=0.80, ci_low=0.75, ci_high=0.85)
    # half-widths 0.05 and 0.05: the change's interval is +-0.0707
    assert compare(a, dict(base, value=0.86, ci_low=0.81, ci_high=0.91))["decision"] == \
        "within noise"
    assert compare(a, dict(base, value=0.90, ci_low=0.85, ci_high=0.95))["decision"] == "better"
    assert compare(a, dict(base, value=0.70, ci_low=0.65, ci_high=0.75))["decision"] == "worse"
    lower = dict(base, higher_is_better=False)
    assert compare(dict(lower, value=1.0), dict(lower, value=0.9))["decision"] == "better"
    # no interval on either side: any change beyond rounding counts
    assert compare(dict(base, value=0.5), dict(base, value=0.5 + 1e-12))["decision"] == \
        "same"
    assert compare(dict(base, value=0.5), dict(base, value=0.499))["decision"] == "worse"
    # another metric version, model version or data: not comparable, with the reason
    c = compare(a, dict(a, metric_version="2"))
    assert c["decision"] == "not comparable" and "metric version 1 vs 2" in c["reason"]
    va = {"components": {"model": "0.1.0/1", "dataset_content": "x"}}
    vb = {"components": {"model": "0.2.0/1", "dataset_content": "x"}}  # plugin upgrade only
    assert compare(dict(a, versions=va), dict(a, versions=vb))["decision"] == "same"
    vc = {"components": {"model": "0.2.0/2", "dataset_content": "y"}}
    c = compare(dict(a, versions=va), dict(a, versions=vc))
    assert c["decision"] == "not comparable" and "model 1 vs 2" in c["reason"] \
        and "dataset_content x vs y" in c["reason"]
    # the same score in another configuration only
    (row,) = diff_scores([a], [dict(a, configuration="other")])
    assert row["decision"] == "not comparable" and "configuration differs" in row["reason"]


def test_bad_input_is_refused_with_one_line(two_copies, tmp_path):
    a, _ = two_copies
    res = run("diff", a, tmp_path / "missing.db")
    assert res.exit_code == 2 and "no results database at" in res.output
    res = run("diff", a, a, "--metric", "nope")
    assert res.exit_code == 2 and "neither database has a score of metric 'nope'" in res.output
    assert "Traceback" not in res.output


def rho_row(acc_x, acc_i, **kw):
    """A rho score row with its per-repeat accuracies (rho = mean AccX / mean AccI)."""
    value = (sum(acc_x) / len(acc_x)) / (sum(acc_i) / len(acc_i))
    details = {"acc_exclusive": acc_x, "acc_inclusive": acc_i,
               "repeats_exclusive": list(range(len(acc_x))),
               "repeats_inclusive": list(range(len(acc_i)))}
    return dict(dataset="digits", model="svm", clusterer="kmeans", metric="rho", score="rho",
                configuration="c", metric_version="1", higher_is_better=True, value=value,
                details=details, **kw)


def test_a_rho_halved_in_every_repeat_is_worse_when_paired_by_repeat():
    """Issue 38: with 2 repeats each rho's own interval is wide, so a rho halved in every
    repeat read "unchanged" (compared as independent: about [-1.77, +0.98]); on the same
    partitions the halving is the same in each repeat, and the paired interval excludes 0."""
    acc_x, acc_i = [0.80, 0.78], [0.90, 0.91]
    a = rho_row(acc_x, acc_i, ci_low=-0.5, ci_high=2.2)  # 2 repeats: a wide interval
    b = rho_row([x / 2 for x in acc_x], acc_i, ci_low=-0.25, ci_high=1.1)
    paired = compare(a, b)
    assert paired["decision"] == "worse" and paired["method"] == "paired by repeat (2 repeats)"
    assert paired["high"] < 0 and paired["change"] == pytest.approx(-a["value"] / 2)
    # the control: the same two scores without their per-repeat values cannot be paired
    bare = compare({k: v for k, v in a.items() if k != "details"},
                   {k: v for k, v in b.items() if k != "details"})
    assert bare["decision"] == "within noise" and bare["low"] < 0 < bare["high"]
    assert "unchanged" not in json.dumps([paired, bare])
    # a side whose per-repeat values do not give its stored value is not paired, and says so
    edited = dict(b, value=b["value"] + 0.1)
    c = compare(a, edited)
    assert c["method"] == "independent intervals" and "do not give its stored value" in \
        c["reason"]


def test_another_configuration_names_what_differs_and_compares_when_asked():
    a = rho_row([0.8, 0.82], [0.9, 0.91], ci_low=0.7, ci_high=1.0)
    b = dict(rho_row([0.7, 0.74], [0.9, 0.92], ci_low=0.6, ci_high=0.95), configuration="d")
    configs_a = {"c": {"seed": 0, "repeats": 2, "sources": 3, "profile": "quick",
                       "knobs": {"train": {"max_epochs": 4, "lr": 0.01}}}}
    configs_b = {"d": {"seed": 1, "repeats": 2, "sources": 3, "profile": "quick",
                       "knobs": '{"train": {"max_epochs": 8, "lr": 0.01}}'}}
    (row,) = diff_scores([a], [b], configs_a=configs_a, configs_b=configs_b)
    assert row["decision"] == "not comparable" and (row["a"], row["b"]) == (a["value"],
                                                                            b["value"])
    assert "seed 0 vs 1" in row["reason"] and "train.max_epochs 4 vs 8" in row["reason"]
    assert "lr" not in row["reason"]
    (row,) = diff_scores([a], [b], configs_a=configs_a, configs_b=configs_b, anyway=True)
    assert row["decision"] in ("worse", "within noise") and row["change"] is not None
    assert row["method"] == "independent intervals" and "seed 0 vs 1" in row["reason"]


def test_two_models_of_one_database_are_compared_by_name(two_copies):
    a, _ = two_copies
    res = run("diff", a, a, "--models", "centroid", "spy", "--metric", "rho")
    assert res.exit_code in (0, 1), res.output
    assert "tiny centroid -> spy kmeans rho rho: " in res.output
    assert "paired by repeat (8 repeats)" in res.output  # one run: the same partitions
    res = run("diff", a, a, "--models", "centroid", "nope")
    assert res.exit_code == 2 and "no score of model 'nope'" in res.output


# --- issue 51, 2: an extended run, words not ids, every decision documented -----------------


@pytest.fixture
def three_and_six(tiny_registry, tmp_path):
    """The same command with -r 3 and with -r 6: all trials of the first are in the second."""
    a, b = tmp_path / "r3.db", tmp_path / "r6.db"
    for db, n in ((a, 3), (b, 6)):
        args = [x if x != "8" else str(n) for x in TINY]
        res = run("run", *args, "--db", db)
        assert res.exit_code == 0, res.output
    keys = [{k for (k,) in sqlite3.connect(db).execute("SELECT key FROM trials")}
            for db in (a, b)]
    assert keys[0] < keys[1]  # B's trials include A's, same keys
    return a, b


def test_an_extended_run_is_compared_paired_on_its_shared_repeats(three_and_six):
    a, b = three_and_six
    out = json.loads(run("diff", a, b, "--format", "json").output)
    n = sqlite3.connect(a).execute("SELECT count(*) FROM scores").fetchone()[0]
    assert len(out["scores"]) == n > 0
    for c in out["scores"]:
        assert c["method"].startswith("paired on the 3 shared repeats"), c
        assert "B extends A by 3 repeats" in c["reason"] and c["shared_repeats"] == 3
        assert c["decision"] == "same" and c["change"] == 0.0  # the shared trials are equal
        assert c["extends"] == 3
    assert out["counts"]["same"] == n and out["counts"]["not comparable"] == 0
    # the other way round: A extends B
    back = json.loads(run("diff", b, a, "--format", "json").output)
    assert all("A extends B by 3 repeats" in c["reason"] for c in back["scores"])
    res = run("diff", a, b)
    assert res.exit_code == 0, res.output
    assert "paired on the 3 shared repeats" in res.output and "B extends A by 3 repeats" in \
        res.output
    assert max(len(line) for line in res.output.splitlines()) <= 120
    assert "|---|" not in res.output  # markdown only when asked


def test_shared_repeats_that_differ_are_judged_paired():
    """The control: B's values on the shared repeats lowered in each repeat is worse, on
    those repeats only (B's extra repeats do not dilute it)."""
    from robench.stats.diff import _extension

    a = rho_row([0.80, 0.78, 0.82], [0.90, 0.91, 0.92], ci_low=0.5, ci_high=1.2)
    b = dict(rho_row([0.70, 0.69, 0.71, 0.80, 0.78, 0.82], [0.90, 0.91, 0.92] * 2,
                     ci_low=0.7, ci_high=0.9), configuration="six")
    ext = _extension({"k0": 0, "k1": 1, "k2": 2},
                     {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5})
    assert ext == {"shared": {0, 1, 2}, "more_a": set(), "more_b": {3, 4, 5}}
    (c,) = diff_scores([a], [b], trials_a={("digits", "svm", "kmeans", "rho", "c"):
                                           {"k0": 0, "k1": 1, "k2": 2}},
                       trials_b={("digits", "svm", "kmeans", "rho", "six"):
                                 {f"k{i}": i for i in range(6)}})
    assert c["decision"] == "worse" and c["high"] < 0
    assert c["change"] == pytest.approx(0.70 / 0.91 - 0.80 / 0.91, abs=1e-9)
    assert c["method"].startswith("paired on the 3 shared repeats")
    # trials that do not nest (other keys): not comparable, the difference named in words
    (c,) = diff_scores([a], [b], configs_a={"c": {"repeats": 3, "seed": 0}},
                       configs_b={"six": {"repeats": 6, "seed": 1}},
                       trials_a={("digits", "svm", "kmeans", "rho", "c"): {"x": 0}},
                       trials_b={("digits", "svm", "kmeans", "rho", "six"): {"y": 0}})
    assert c["decision"] == "not comparable"
    assert c["reason"] == "configuration differs: seed 0 vs 1; repeats 3 vs 6"  # no ids


def test_two_scores_without_a_value_are_the_same_not_a_change():
    """The publish report counted 25 untouched null scores as changed."""
    base = dict(dataset="d", model="m", clusterer="", metric="mce", score="mce",
                configuration="c", metric_version="1", higher_is_better=False, value=None)
    c = compare(base, dict(base))
    assert c["decision"] == "same" and c["reason"] == "no value in either"
    assert compare(base, dict(base, value=0.5))["decision"] == "not comparable"


def test_every_decision_is_documented_in_the_help_and_the_docs():
    from pathlib import Path

    from robench.stats.diff import DECISIONS, MEANING

    assert set(MEANING) == set(DECISIONS)
    text = run("diff", "--help").output
    docs = (Path(__file__).resolve().parents[2] / "docs" / "contributions.md").read_text()
    for decision in DECISIONS:
        assert decision in text, decision
        assert f"**{decision}**" in docs, decision


def test_stored_names_are_escaped_and_shortened_in_every_format():
    """Names come from other people's databases: a newline cannot start a Markdown heading,
    HTML or a mention cannot come through, a 10,000-character name is shortened, and no
    text line is longer than 120 columns."""
    from robench.exchange.diff import Diff, markdown_lines, text_lines
    from robench.stats.diff import counts

    long = "m" * 10_000
    rows = [dict(dataset="d\n# validate: passed", model=long, clusterer="<!--", metric="rho",
                 score="@owner <script>", configuration="c", metric_version="1",
                 higher_is_better=True, value=v, ci_low=v - 0.1, ci_high=v + 0.1)
            for v in (0.5, 0.2)]
    found = diff_scores([rows[0]], [rows[1]])
    d = Diff("a.db", "b.db", found, counts(found))
    text = text_lines(d)
    assert all(len(line) <= 120 for line in text) and "\n" not in "".join(text)
    assert long not in "".join(text) and "m" * 20 in text[0]
    md = markdown_lines(d)
    assert not any(line.startswith("#") for line in md)
    body = "\n".join(md)
    assert "<!--" not in body.replace("`<!--`", "") and "<script>" not in body.replace(
        "`@owner <script>`", "")
    assert long not in body and max(len(line) for line in md) < 1000
