"""The coverage paper's claims, decided on stored coverage scores (robench.stats.claims)."""

from __future__ import annotations

from typing import Optional
import json
import numpy as np

from robench.stats.claims import (BY_CONSTRUCTION, CONTROL_DRAWS, FAILS, HOLDS, UNDECIDED,
                                  Claim, Control, OrderingPart, controlled, decide_parts, fmt,
                                  matched, parts_need, repeats_needed, within, would)
from robench.stats.intervals import mean_interval
from robench.families.coverage.controls import STRONG, WEAK, null_model
from robench.metric_kit import score_index

PAPER = "Coverage testing in feature space (Mani et al.)"
#: "Near chance": the all-boundary accuracy's interval lies within [chance (1 - w),
#: chance (1 + w)]: [8%, 12%] for 10 classes, which holds all of Table 2's 10-class figures.
CHANCE_WINDOW = 0.2
#: Level of the t interval that decides the window (docs/coverage.md says why 99%).
WINDOW_LEVEL = 0.99
#: Test-set quality: "the majority of the test points" in the centroid region.
MAJORITY = 0.5
#: Mean separation of the weak null model of the controls (robench.families.coverage.controls).
WEAK_SEP = 0.5


def _with_interval(row: dict, level: float = 0.95) -> dict:
    """Return the row with a Student-t interval over its per-repeat values (reference models)."""
    per = (row.get("details") or {}).get("per_repeat") or []
    iv = mean_interval(per, level, bounds=(0.0, 1.0))
    return {**row, "ci_low": iv.low, "ci_high": iv.high}


def chance_window(n_classes: int) -> tuple:
    """Return the two-sided "near chance" window [low, high] for ``n_classes`` classes."""
    chance = 1.0 / n_classes
    return chance * (1 - CHANCE_WINDOW), chance * (1 + CHANCE_WINDOW)


def near_chance(row: dict, n_classes: int) -> tuple:
    """Return (verdict, position, why, row) for "the value is near chance".

    The :data:`WINDOW_LEVEL` t interval over ``details.per_repeat`` decides (the returned row
    carries it): inside :func:`chance_window`, wholly below or above it, or undecided.
    """
    row = _with_interval(row, WINDOW_LEVEL)
    low, high = chance_window(n_classes)
    verdict, why = within(row, low, high)
    position = ("near chance" if verdict == HOLDS else "undecided" if verdict != FAILS
                else "below chance" if row["ci_high"] < low else "above chance")
    return verdict, position, f"{position}: {why}", row


def _per_repeat(row: dict) -> list:
    return [v if v is not None else float("nan")
            for v in ((row or {}).get("details") or {}).get("per_repeat") or []]


#: Two models' coverage-guided accuracies (or CPs) count as a tie ("equivalent") when shown
#: within this many points: the third outcome of the model contrasts.
CONTRAST_MARGIN = 0.01
#: How the model contrasts are tested.
PAIRED = ("paired by repeat (the same split and seed), Student's t on the differences, "
          "one-sided 0.025")
#: The control of the model contrasts.
STRONG_WHAT = (f"models without learnt features (i.i.d. Gaussian classes, mean separation "
               f"{WEAK_SEP:g} vs {STRONG:g}: ~40% vs ~97% accuracy)")


def paired_part(a: list, b: list, margin: Optional[float] = None) -> OrderingPart:
    """Return "a above b" over reference models paired by repeat: i.i.d. units, so Student's
    t on the paired differences (robench.stats.paired.balanced_test with a cycle of 1)."""
    n = max(len(a), len(b))
    va, vb = np.full(n, np.nan), np.full(n, np.nan)
    va[:len(a)], vb[:len(b)] = a, b
    one = np.ones(n)
    return OrderingPart(va, one, vb, one, cycle=1, margin=margin)


def _knobs(det: dict) -> dict:
    return {k: v for k, v in (det.get("knobs") or {}).items()
            if k in ("radius", "boundary_rule", "wc_l", "theta1", "theta2", "step", "mixes")}


_NULLS: dict = {}


def _nulls(sep: float, det: dict, n) -> list:
    """Return :data:`CONTROL_DRAWS` draws of a control, each of the row's own number ``n`` of
    null reference models (at least 3), with the knobs of ``det``; models are cached by seed."""
    knobs, repeats = _knobs(det), max(3, int(n or 0))
    key = json.dumps(knobs, sort_keys=True)
    for seed in range(CONTROL_DRAWS * repeats):
        if (sep, key, seed) not in _NULLS:
            _NULLS[(sep, key, seed)] = null_model(seed, sep, knobs)
    return [[_NULLS[(sep, key, seed)] for seed in range(d * repeats, (d + 1) * repeats)]
            for d in range(CONTROL_DRAWS)]


def _pct(draws: list, key: str) -> float:
    """Return the mean of ``key`` over the null models of all draws that have one, in percent."""
    models = [m for d in draws for m in d if m[key] is not None]
    return 100 * sum(m[key] for m in models) / len(models)


def _null_control(what: str, verdicts: list, draws: list, figure: str) -> Control:
    """Return a control from its draws of null reference models (``matched``)."""
    return matched(what, verdicts, "null tables", figure,
                   size=f"{len(draws[0])} reference models")


def _contrast_control(first: list, second: list, key: str, figure: str) -> Control:
    """Return a model contrast's control: "first above second" on paired null draws of ``key``."""
    return _null_control(STRONG_WHAT, [
        decide_parts([paired_part([m[key] for m in a], [m[key] for m in b], CONTRAST_MARGIN)])
        for a, b in zip(first, second)], first, figure)


def _weak_what(knobs) -> str:
    return (f"a weak model without learnt features (i.i.d. Gaussian classes, mean separation "
            f"{WEAK:g}: ~40% accuracy; the {knobs.get('boundary_rule', 'paper')} rule)")


def _window_need(level: dict, low: float, high: float, position: str) -> str:
    """Return what would decide a near-chance row left undecided."""
    if position == "near chance":  # decided, but the band rule is not the paper's
        return ("not decidable by repeats: the band rule is not the paper's; the paper's "
                "rule decides it (boundary_rule = 'paper')")
    n = len(_per_repeat(level))
    lo, hi, v = level.get("ci_low"), level.get("ci_high"), level.get("value")
    if lo is None or v is None or not n:
        return would(None)
    dist = min(abs(v - low), abs(v - high))
    return would(repeats_needed(n, (hi - lo) / 2, dist, side=(1 - WINDOW_LEVEL) / 2))


def coverage_claims(rows: list) -> list:
    """Return per (data set, model): Table 2's trend and its all-boundary level near chance
    (by construction under the paper's boundary rule: docs/coverage.md)."""
    claims = []
    for (dataset, model), sc in sorted(score_index(rows, by=(("dataset", "model"),)).items()):
        head = sc.get("coverage") or {}
        det = head.get("details") or {}
        size = det.get("size")
        cent, raw_bnd = sc.get(f"acc@100-0@{size}"), sc.get(f"acc@0-100@{size}")
        if not (cent and raw_bnd):
            continue
        part = paired_part(_per_repeat(cent), _per_repeat(raw_bnd))
        cent, bnd = _with_interval(cent), _with_interval(raw_bnd)
        knobs = det.get("knobs") or {}
        rule, weak = knobs.get("boundary_rule", "band"), _weak_what(knobs)
        how = f"{rule} rule, {knobs.get('confidence', 'raw')} confidence"
        verdict = decide_parts([part])
        st = part.stats()
        why = (f"100:0 - 0:100 {100 * st['d']:+.1f} points over {int(st['n'])} reference "
               "models (paired by repeat: Student's t on the differences, one-sided 0.025)")
        draws = _nulls(WEAK_SEP, det, st["n"])
        nulls = [m for d in draws for m in d]
        ctl = _null_control(weak, [
            decide_parts([paired_part([m["mixes"].get((100, 0)) for m in d],
                                      [m["mixes"].get((0, 100)) for m in d])]) for d in draws],
            draws, "100:0 {:.1f}% vs 0:100 {:.1f}%".format(
                *(100 * sum(m["mixes"].get(k) or 0 for m in nulls) / len(nulls)
                  for k in ((100, 0), (0, 100)))))
        claims.append(controlled(Claim(
            PAPER, f"all-centroid sets are classified better than all-boundary ones ({model})",
            "Table 2: accuracy falls as the boundary share grows", dataset,
            f"100:0 {fmt(cent, True)} vs 0:100 {fmt(bnd, True)} ({how})", verdict, why,
            would_decide=would(parts_need([part])) if verdict == UNDECIDED else ""), ctl))
        n_classes = len((det.get("quality") or {}).get("ep") or []) or None
        if n_classes:
            low, high = chance_window(n_classes)
            verdict, position, why, level = near_chance(raw_bnd, n_classes)
            if rule == "paper":
                verdict = BY_CONSTRUCTION
                why = (f"boundary points are kept only while the model gives their true class "
                       f"a probability <= wc_l = {knobs.get('wc_l', 0.5)}, so it misclassifies "
                       f"them by construction; {why}")
            elif verdict == HOLDS:
                verdict, why = UNDECIDED, why + "; the band rule is not the paper's"
            nv = [near_chance({"details": {"per_repeat": [m["mixes"].get((0, 100))
                                                           for m in d]}}, n_classes)[1]
                  for d in draws]
            claims.append(controlled(Claim(
                PAPER, f"the all-boundary set is classified near chance ({model})",
                "Table 2, column (1): all-boundary accuracy at most 10%, as low as 0% "
                "(10-class sets: 8.7-10.9%)", dataset,
                f"0:100 {fmt(level, True)} ({100 * WINDOW_LEVEL:g}% CI): {position}; chance "
                f"{100 / n_classes:g}%, window [{100 * low:g}, {100 * high:g}]% ({how})",
                verdict, why, {"window": [low, high], "position": position},
                would_decide="" if verdict != UNDECIDED else _window_need(
                    level, low, high, position)),
                _null_control(weak, [
                    {"near chance": HOLDS}.get(v, FAILS if v in ("below chance", "above chance")
                                               else UNDECIDED) for v in nv], draws,
                    f"0:100 is {max(set(nv), key=nv.count)} in most")))
    return claims


def _by_accuracy(rows: list, score: str) -> list:
    """Return (data set, {model: its scores}, least and most accurate model, {either: test
    accuracy in %}, the most accurate's headline details) for the models of each data set
    that have a test accuracy and a value of ``score``."""
    out = []
    for dataset, models in sorted(score_index(rows).items()):
        scored = {m: sc for m, sc in models.items()
                  if (sc.get("model_acc") or {}).get("value") is not None
                  and (sc.get(score) or {}).get("value") is not None}
        if scored:
            order = sorted(scored, key=lambda m: (scored[m]["model_acc"]["value"], m))
            low, high = order[0], order[-1]
            out.append((dataset, scored, low, high,
                        {m: 100 * scored[m]["model_acc"]["value"] for m in (low, high)},
                        (scored[high].get("coverage") or {}).get("details") or {}))
    return out


def _mean_row(values: list) -> dict:
    iv = mean_interval([v for v in values if v is not None], 0.95, bounds=(0.0, 1.0))
    return {"value": iv.estimate, "ci_low": iv.low, "ci_high": iv.high}


def test_set_quality_claims(rows: list) -> list:
    """Return per data set section 5.3's claims: the most accurate model's CP against
    :data:`MAJORITY`, and against the least accurate model's CP, paired by repeat."""
    claims = []
    for dataset, scored, low, high, acc, det in _by_accuracy(rows, "cp"):
        cp = {m: _with_interval(scored[m]["cp"]) for m in (low, high)}
        train = [v for v in (det.get("quality") or {}).get("cp_train") or [] if v is not None]
        r = (det.get("knobs") or {}).get("radius")
        ref = (f"; at r = {r:g} (class RMS radius) {100 * sum(train) / len(train):.0f}% of its "
               "training points are in the region: the level follows r, which the paper "
               "does not give" if train and r is not None else "")
        verdict, why = within(cp[high], MAJORITY, 1.0)
        n = len(_per_repeat(scored[high]["cp"]))
        strong_d, weak_d = _nulls(STRONG, det, n), _nulls(WEAK_SEP, det, n)
        null_cp = _mean_row([m["cp"] for d in strong_d for m in d])
        ctl = _null_control("the CP of i.i.d. Gaussian classes at the same r (a model without "
                            "learnt features)",
                            [within(_mean_row([m["cp"] for m in d]), MAJORITY, 1.0)[0]
                             for d in strong_d], strong_d, f"pooled CP {fmt(null_cp, True)}")
        need = None
        if verdict == UNDECIDED and cp[high].get("ci_low") is not None and n:
            need = repeats_needed(n, (cp[high]["ci_high"] - cp[high]["ci_low"]) / 2,
                                  cp[high]["value"] - MAJORITY)
        claims.append(controlled(Claim(
            PAPER, f"the most accurate model puts most test points in the centroid region "
                   f"({high})",
            "Section 5.3 (RQ2), Figure 5: ResNet and VGG, the most accurate, classify the "
            "majority of the MNIST and SVHN test points in the centroid region", dataset,
            f"{high} (test {acc[high]:.1f}%): CP {fmt(cp[high], True)}", verdict, why + ref,
            {"model": high, "majority": MAJORITY},
            would_decide="" if verdict != UNDECIDED else (
                would(need) if need else would(None, why="the coverage metric stores no "
                                               "per-repeat CP: no interval"))), ctl))
        if len(scored) < 2:
            continue
        part = paired_part(_per_repeat(scored[high]["cp"]), _per_repeat(scored[low]["cp"]),
                           CONTRAST_MARGIN)
        verdict = decide_parts([part])
        ctl = _contrast_control(strong_d, weak_d, "cp",
                                f"CP {_pct(weak_d, 'cp'):.1f}% vs {_pct(strong_d, 'cp'):.1f}%")
        paired = n >= 2 and len(_per_repeat(scored[low]["cp"])) >= 2
        claims.append(controlled(Claim(
            PAPER, f"a less accurate model has fewer test points at the centroids ({low} vs "
                   f"{high})",
            "Section 5.3 (RQ2), Figure 5: LeNet, the least accurate, has a good coverage of "
            "the test points; ResNet and VGG put the majority in the centroid region", dataset,
            f"{low} (test {acc[low]:.1f}%) CP {fmt(cp[low], True)} vs {high} (test "
            f"{acc[high]:.1f}%) CP {fmt(cp[high], True)}", verdict,
            (f"{PAIRED}; equivalent within ±{100 * CONTRAST_MARGIN:g} point" if paired
             else "no per-repeat CP stored: nothing to pair")
            + "; test accuracies are means over the reference models",
            {"least_accurate": low, "most_accurate": high},
            would_decide="" if verdict != UNDECIDED else (
                would(parts_need([part])) if paired else
                would(None, why="the coverage metric stores no per-repeat CP to pair"))),
            ctl))
    return claims


def accuracy_vs_robustness_claims(rows: list) -> list:
    """Return per data set: the least accurate model's coverage-guided accuracy vs the most's,
    paired by repeat (Table 2: LeNet above VGG-19 on every generated set)."""
    claims = []
    for dataset, scored, low, high, acc, det in _by_accuracy(rows, "coverage"):
        if len(scored) < 2:
            continue
        part = paired_part(_per_repeat(scored[low]["coverage"]),
                           _per_repeat(scored[high]["coverage"]), CONTRAST_MARGIN)
        verdict = decide_parts([part])
        size = det.get("size")
        halves = []
        for m in (low, high):
            c, b = (((scored[m].get(f"acc@{mix}@{size}") or {}).get("value"))
                    for mix in ("100-0", "0-100"))
            if c is not None and b is not None:
                halves.append(f"{m} (acc@100:0 + acc@0:100)/2 = {50 * (c + b):.1f}%")
        n = len(_per_repeat(scored[high]["coverage"]))
        weak_d, strong_d = _nulls(WEAK_SEP, det, n), _nulls(STRONG, det, n)
        ctl = _contrast_control(weak_d, strong_d, "coverage", "coverage-guided {:.1f}% vs {:.1f}%"
                                .format(_pct(weak_d, "coverage"), _pct(strong_d, "coverage")))
        claims.append(controlled(Claim(
            PAPER, f"a less accurate model is more robust on generated sets ({low} vs {high})",
            "LeNet (least accurate) above VGG-19 on every generated MNIST/FMNIST set "
            "(Table 2)", dataset,
            f"{low} (test {acc[low]:.1f}%) {fmt(scored[low]['coverage'], True)} vs {high} "
            f"(test {acc[high]:.1f}%) {fmt(scored[high]['coverage'], True)}",
            verdict, f"{PAIRED}, equivalent within ±{100 * CONTRAST_MARGIN:g} "
            "point; " + "; ".join(halves)
            + "; test accuracies are means over the reference models",
            {"least_accurate": low, "most_accurate": high},
            would_decide=would(parts_need([part])) if verdict == UNDECIDED else ""), ctl))
    return claims


def all_coverage_claims(rows: list) -> list:
    """Return Table 2's trend and level per model, the accuracy-vs-robustness claim, then the
    test-set quality claims."""
    return coverage_claims(rows) + accuracy_vs_robustness_claims(rows) + \
        test_set_quality_claims(rows)
