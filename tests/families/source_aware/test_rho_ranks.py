"""rho tables rank from every tested pair (rank intervals), give no rank at chance plus the
margin, and show intervals honestly.

Score rows come from the real aggregate (aggregate_rho) of simulated trials, so the per-repeat
accuracies, their repeats and the chance level travel the way they do in a run.
"""

from dataclasses import asdict

import numpy as np
import pytest

from robench.families.source_aware.leaderboard import ranks, rho_tables
from robench.families.source_aware.report import rho_lines
from robench.families.source_aware.rho import aggregate as aggregate_rho
from robench.families.source_aware.rho import chance_of
from robench.stats.intervals import ratio_interval


def trials(x, i, *, classes=10, counts=None, failed=(), cycle=None):
    """Return source-aware trial rows: exclusive accuracies x and inclusive i, per repeat.

    ``cycle``: the exclusive trials are protocol 2's balanced design with that cycle (None:
    protocol 1's random draws)."""
    out = []
    for kind, accs in (("exclusive", x), ("inclusive", i), ("random", i)):
        for r, acc in enumerate(accs):
            row = {"kind": kind, "repeat": r, "accuracy": float(acc),
                   "status": "failed" if (kind, r) in failed else "ok",
                   "clusterer": "" if kind == "random" else "kmeans", "params": {"k": 3},
                   "per_class": [float(acc)] * classes, "extra": {}}
            if counts is not None:
                row["extra"]["test_class_counts"] = list(counts)
            if cycle and kind == "exclusive":
                row["params"] = {"k": 3, "held_out": "balanced"}
                row["extra"]["cycle"] = cycle
            out.append(row)
    return out


def score_rows(model, x, i, **kw):
    group = {"dataset": "d", "model": model, "clusterer": "kmeans"}
    rows = [asdict(s) for s in aggregate_rho(group, trials(x, i, **kw))]
    for r in rows:
        r["higher_is_better"] = True
    return rows


def table(*models):
    rows = [r for m in models for r in m]
    return {r["model"]: r for r in rho_tables(rows)[0]["rows"]}, rows


def test_shared_partitions_rank_apart_what_marginal_intervals_tie():
    """Ten repeats (two balanced cycles of 5) share a partition effect (sd 0.05); b is 0.01
    below a in each. The marginal Fieller intervals overlap; the paired test orders them:
    rank intervals 1 and 2. The same numbers from protocol 1's random draws get the same
    skew-corrected t over every shared repeat (independent repeats), which orders them too
    (the betting test it replaced could not decide a 0.01 gap at 10 repeats)."""
    rng = np.random.default_rng(3)
    z = 0.05 * rng.standard_normal(10)
    xa, xb = 0.80 + z + 0.002 * rng.standard_normal(10), 0.79 + z + 0.002 * rng.standard_normal(10)
    ia, ib = 0.95 + 0.005 * rng.standard_normal(10), 0.95 + 0.005 * rng.standard_normal(10)
    a, b = ratio_interval(xa, ia), ratio_interval(xb, ib)
    assert a.low < b.high  # overlapping marginal intervals
    rows, _ = table(score_rows("a", xa, ia, cycle=5), score_rows("b", xb, ib, cycle=5))
    assert (rows["a"]["rank_interval"], rows["b"]["rank_interval"]) == ("1", "2")
    assert (rows["a"]["rank"], rows["b"]["rank"]) == (1, 2) and not rows["a"]["tied"]
    pair = rho_tables([r for m in (score_rows("a", xa, ia, cycle=5),
                                            score_rows("b", xb, ib, cycle=5)) for r in m])[0]["pairs"]
    assert pair == [{"pair": ["a", "b"], "status": "ordered", "above": "a",
                     "difference": pytest.approx(a.estimate - b.estimate), "n": 10,
                     "margin": 0.05, "degraded_repeat": None, "verdict": "ordered"}]
    rows, _ = table(score_rows("a", xa, ia), score_rows("b", xb, ib))
    assert (rows["a"]["rank_interval"], rows["b"]["rank_interval"]) == ("1", "2")
    assert "independent repeats" in rho_tables(_)[0]["rule"]


def test_marginally_apart_but_paired_difference_includes_zero_is_undecided():
    """Three repeats (one balanced cycle of 3) whose swings mirror each other (exclusive and
    inclusive): the marginal intervals do not overlap, the paired test (t with 2 df at
    2.5% a side) does not order them: both 1-2."""
    e, f = np.array([-0.02, 0.0, 0.02]), np.array([0.01, -0.01, 0.0])
    xa, ia, xb, ib = 0.85 + e, 0.95 + f, 0.75 - e, 0.95 - f
    assert ratio_interval(xa, ia).low > ratio_interval(xb, ib).high
    rows, all_rows = table(score_rows("a", xa, ia, cycle=3), score_rows("b", xb, ib, cycle=3))
    assert (rows["a"]["rank_interval"], rows["b"]["rank_interval"]) == ("1-2", "1-2")
    assert rows["b"]["tied"] and (rows["a"]["rank"], rows["b"]["rank"]) == (1, 2)
    lines = rho_lines(all_rows)
    text = "\n".join(lines)
    said = " ".join(text.split())
    assert "rank intervals from all 1 pair" in said and "Holm-corrected" in said
    assert "(a point estimate)" in said
    assert "    1-2  1 a " in text and "    1-2  2 b " in text
    # the title names the sort; the rule follows the table, wrapped to a terminal's width
    title = next(i for i, line in enumerate(lines) if "ranked by rho" in line)
    assert lines[title].strip() == "d - sources by kmeans: ranked by rho = E[AccX]/E[AccI]"
    rule = next(i for i, line in enumerate(lines) if line.startswith("  ranks: "))
    assert rule > title + 2 and all(len(line) <= 80 for line in lines)


def test_pairs_use_the_complete_cycles_both_models_have():
    """A failed repeat of one model breaks its cycle: with cycles of 4 over 8 repeats and a's
    exclusive repeat 2 failed, the test uses the 4 repeats of the second cycle only."""
    rng = np.random.default_rng(5)
    z = 0.05 * rng.standard_normal(8)
    xa, xb = 0.80 + z + 0.002 * rng.standard_normal(8), 0.76 + z + 0.002 * rng.standard_normal(8)
    i = np.full(8, 0.95) + 0.004 * rng.standard_normal(8)
    a = score_rows("a", xa, i, failed={("exclusive", 2)}, cycle=4)
    b = score_rows("b", xb, i, cycle=4)
    rho_a = next(r for r in a if r["score"] == "rho")
    assert rho_a["details"]["repeats_exclusive"] == [0, 1, 3, 4, 5, 6, 7]
    tables = rho_tables(a + b)
    assert tables[0]["pairs"][0]["n"] == 4
    rows = {r["model"]: r for r in tables[0]["rows"]}
    assert (rows["a"]["rank_interval"], rows["b"]["rank_interval"]) == ("1", "2")
    # a score from before (no repeats stored) with a failed trial is not paired at all
    for r in a:
        r["details"].pop("repeats_exclusive", None)
        r["details"].pop("repeats_inclusive", None)
    rows, _ = table(a, b)
    assert (rows["a"]["rank_interval"], rows["b"]["rank_interval"]) == ("1-2", "1-2")


def test_a_model_at_chance_is_shown_but_not_ranked():
    """A random-label model: E[AccI] ~10% on 10 classes, rho ~1 (it would top the table);
    a weak one at 13%: above chance, not above chance + the margin (19%). Neither is ranked
    and the best real model is rank 1."""
    rng = np.random.default_rng(0)
    good_x, good_i = 0.85 + 0.02 * rng.standard_normal(5), 0.95 + 0.005 * rng.standard_normal(5)
    rand_x = np.array([0.11, 0.09, 0.10, 0.12, 0.08])
    rand_i = np.array([0.095, 0.10, 0.105, 0.09, 0.11])  # mean 10% = 1/10: rho 1.0
    weak_x = np.array([0.125, 0.13, 0.128, 0.131, 0.127])
    weak_i = np.array([0.129, 0.131, 0.13, 0.132, 0.128])  # 13%: [12.8, 13.2] > 10%
    rows, all_rows = table(score_rows("good", good_x, good_i), score_rows("random", rand_x, rand_i),
                           score_rows("weak", weak_x, weak_i))
    assert rows["random"]["value"] > rows["good"]["value"]  # the ratio alone would rank it 1st
    assert rows["weak"]["value"] > rows["good"]["value"]
    assert rows["good"]["rank_interval"] == "1" and not rows["good"]["tied"]
    assert rows["random"]["rank"] is None and rows["weak"]["rank"] is None
    why = rows["random"]["unranked"]
    assert why.startswith("at chance: E[AccI]") and "chance 10.0% (1/10 classes" in why
    assert "margin 0.1 of the rest = 19.0%" in rows["weak"]["unranked"]
    ordered = rho_tables(all_rows)[0]["rows"]
    assert [r["model"] for r in ordered][0] == "good"
    text = "\n".join(rho_lines(all_rows))
    line = next(t for t in text.splitlines() if " random " in t)
    assert line.lstrip().startswith("-  - random") and line.endswith("at chance")
    assert "random: at chance: E[AccI]" in text
    json_rows = {r["model"]: r for r in ranks(all_rows)}
    assert json_rows["random"]["rank"] is None and json_rows["random"]["rank_interval"] is None
    assert json_rows["random"]["unranked"].startswith("at chance")
    assert json_rows["good"]["rank"] == 1 and json_rows["good"]["rank_interval"] == "1"
    assert json_rows["good"]["rule"] == rho_tables(all_rows)[0]["rule"] == "one ranked model"


def test_the_chance_margin_is_a_knob(monkeypatch):
    """ROBENCH_CHANCE_MARGIN=0 ranks the 13% model (its interval excludes 10%); 0.5 leaves
    a 50% model unranked."""
    weak_x = np.array([0.125, 0.13, 0.128, 0.131, 0.127])
    weak_i = np.array([0.129, 0.131, 0.13, 0.132, 0.128])
    monkeypatch.setenv("ROBENCH_CHANCE_MARGIN", "0")
    rows, _ = table(score_rows("weak", weak_x, weak_i))
    assert rows["weak"]["rank"] == 1
    monkeypatch.setenv("ROBENCH_CHANCE_MARGIN", "0.5")
    rows, _ = table(score_rows("half", weak_x + 0.4, weak_i + 0.4))  # 53%: bar 55%
    assert rows["half"]["rank"] is None
    monkeypatch.setenv("ROBENCH_CHANCE_MARGIN", "2")
    with pytest.raises(ValueError, match="ROBENCH_CHANCE_MARGIN"):
        table(score_rows("half", weak_x + 0.4, weak_i + 0.4))


def test_chance_is_the_majority_class_rate_where_higher():
    """A test set 60% one class of 3: a model at 62% [55, 69] is not above chance (60%),
    although it is far above 1/3."""
    counts = [60, 25, 15]
    x = np.array([0.55, 0.60, 0.58, 0.57])
    i = np.array([0.58, 0.66, 0.62, 0.62])
    assert chance_of(trials(x, i, classes=3, counts=counts)[4:8])["level"] == pytest.approx(0.6)
    rows, _ = table(score_rows("m", x, i, classes=3, counts=counts),
                    score_rows("n", x + 0.3, np.full(4, 0.95) + [0.01, -0.01, 0, 0],
                               classes=3, counts=counts))
    assert rows["m"]["rank"] is None and "majority-class rate 60.0%" in rows["m"]["unranked"]
    assert rows["n"]["rank"] == 1
    # without recorded counts: 1/3, and m is ranked
    rows, _ = table(score_rows("m", x, i, classes=3), score_rows("n", x + 0.3, i, classes=3))
    assert rows["m"]["unranked"] is None and rows["m"]["rank"] is not None


def test_intervals_are_shown_as_computed_with_their_reasons():
    """A lower Fieller bound below 0 is printed as it is, with a note; an empty interval says
    why (one repeat); an unbounded one says so."""
    neg = score_rows("neg", [0.02, 0.30, 0.01], [0.9, 0.92, 0.91])
    one = score_rows("one", [0.8], [0.9])
    unb = score_rows("unb", [0.2, 0.25, 0.3], [0.05, 0.9, 0.5])
    good = score_rows("good", [0.80, 0.82, 0.81], [0.95, 0.96, 0.95])
    rows, all_rows = table(neg, one, unb, good)
    low = next(r for r in neg if r["score"] == "rho")["ci_low"]
    assert low < 0
    assert rows["neg"]["interval"] == f"[{low:.3f}, {rows['neg']['ci_high']:.3f}]"
    assert "below 0" in rows["neg"]["interval_note"] and "not clipped" in rows["neg"]["interval_note"]
    assert rows["one"]["interval"] == "none" and "at least 2 repeats" in rows["one"]["interval_note"]
    assert rows["unb"]["interval"] == "unbounded" and "unbounded" in rows["unb"]["interval_note"]
    text = "\n".join(rho_lines(all_rows))
    assert f"[{low:.3f}," in text and "neg: lower bound" in text
    assert "unb: " in text and "one: " in text


def test_adequacy_intervals_say_when_a_bound_is_below_zero_or_missing():
    from robench.families.source_aware.leaderboard import adequacy_section
    from robench.families.source_aware.report import adequacy_lines

    base = {"dataset": "d", "model": "m", "clusterer": "kmeans", "metric": "adequacy"}
    table = [{"size": "100", "n_samples": 100, "acc_exclusive": 0.05, "acc_inclusive": 0.5,
              "rho": 0.1, "ci_low": -0.047, "ci_high": 0.923, "n": 3},
             {"size": "300", "n_samples": 300, "acc_exclusive": 0.6, "acc_inclusive": 0.9,
              "rho": 0.667, "ci_low": None, "ci_high": None, "n": 1}]
    rows = [{**base, "score": "worst_class_rho", "value": None,
             "details": {"table": table, "ranking": []}},
            {**base, "score": "rho@300", "value": 0.667,
             "details": {"interval": {"reason": "1 numerator and 1 denominator values: each "
                                                "needs at least 2 repeats"}}}]
    text = "\n".join(adequacy_lines(rows))
    assert "[-0.047, 0.923]*" in text and "* size 100: lower bound -0.047 is below 0" in text
    assert "none*" in text and "* size 300: 1 numerator and 1 denominator values" in text
    cells = adequacy_section(rows)["models"][0]["cells"]
    assert cells["100"]["interval"] == "[-0.047, 0.923]" and "not clipped" in \
        cells["100"]["interval_note"]
    assert cells["300"]["interval"] == "none"


def test_an_interval_from_repeats_short_of_one_rotation_says_so():
    """3 repeats of the balanced design with 5 sources a class hold out 3 of the 5: the
    interval leaves the other sources' effect out and says so; 5 repeats (one whole cycle)
    carry no such note, nor does the same 3 of a design without a cycle."""
    x, i = [0.80, 0.70, 0.85], [0.95, 0.96, 0.95]
    rows, _ = table(score_rows("short", x, i, cycle=5))
    assert "complete no rotation" in rows["short"]["interval_note"]
    assert "a cycle is 5 repeats" in rows["short"]["interval_note"]
    rows, _ = table(score_rows("whole", x + [0.75, 0.8], i + [0.95, 0.95], cycle=5))
    assert rows["whole"]["interval_note"] is None
    rows, _ = table(score_rows("random", x, i))
    assert rows["random"]["interval_note"] is None
