"""The source-aware paper's claims, decided on stored rho scores (robench.stats.claims)."""

from __future__ import annotations

from robench.families.source_aware.rho import METRIC as RHO
from robench.stats.claims import FAILS, HOLDS, UNDECIDED, Claim, compare, fmt
from robench.stats.claims import combine as _combine

PAPER = "Source-aware partitioning (Kilinc & Uysal)"
#: The paper's capacity order on MNIST (rho rises with capacity: SVM < MLP < CNN-1..3).
CAPACITY = ("svm", "mlp", "cnn-1", "cnn-2", "cnn-3")
#: E[AccI] ~ E[Acc]: both intervals must overlap and be narrower than this to call them equal.
EQUAL_WIDTH = 0.05


def _table(rows: list, clusterer: str = "kmeans") -> dict:
    """Return {dataset: {model: {score: row}}} of the rho metric's rows of one clusterer."""
    out: dict = {}
    for r in rows:
        if r.get("metric") != RHO or (r.get("clusterer") or "") != clusterer:
            continue
        out.setdefault(r["dataset"], {}).setdefault(r["model"], {})[r["score"]] = r
    return out


def rho_claims(rows: list) -> list:
    """Return the source-aware claims per data set: AccI > AccX, E[AccI] ~ E[Acc], capacity."""
    claims = []
    for dataset, models in sorted(_table(rows).items()):
        # 1. source-inclusive accuracy exceeds source-exclusive (eq. 1-2)
        res = {m: compare(sc["acc_inclusive"], sc["acc_exclusive"]) for m, sc in models.items()
               if "acc_inclusive" in sc and "acc_exclusive" in sc}
        if res:
            verdict = _combine([v for v, _ in res.values()])
            n_hold = sum(v == HOLDS for v, _ in res.values())
            worst = next((f"{m}: {w}" for m, (v, w) in sorted(res.items()) if v != HOLDS), "")
            claims.append(Claim(
                PAPER, "E[AccI] > E[AccX]: unseen sources cost accuracy",
                "holds for every model and data set (Figures 5-8)", dataset,
                f"decided for {n_hold} of {len(res)} models", verdict,
                f"{n_hold} of {len(res)} models have AccI's interval above AccX's"
                + (f"; {worst}" if worst else ""),
                {m: w for m, (_, w) in res.items()}))
        # 2. E[AccI] ~ E[Acc] (the random split behaves like the inclusive one)
        eq = {}
        for m, sc in models.items():
            i, r = sc.get("acc_inclusive"), sc.get("acc_random")
            if not (i and r) or None in (i.get("ci_low"), r.get("ci_low")):
                eq[m] = (UNDECIDED, "an interval is missing")
                continue
            overlap = i["ci_low"] <= r["ci_high"] and r["ci_low"] <= i["ci_high"]
            narrow = max(i["ci_high"] - i["ci_low"], r["ci_high"] - r["ci_low"]) < EQUAL_WIDTH
            if not overlap:
                eq[m] = (FAILS, f"{fmt(i, True)} vs {fmt(r, True)}: disjoint")
            elif narrow:
                eq[m] = (HOLDS, f"{fmt(i, True)} vs {fmt(r, True)}: overlap, both narrower "
                                f"than {100 * EQUAL_WIDTH:g} points")
            else:
                eq[m] = (UNDECIDED, f"{fmt(i, True)} vs {fmt(r, True)}: overlap but too wide "
                                    "to call equal")
        if eq:
            verdict = _combine([v for v, _ in eq.values()])
            n_hold = sum(v == HOLDS for v, _ in eq.values())
            example = next((f"{m}: {w}" for m, (v, w) in sorted(eq.items()) if v != HOLDS),
                           next(iter(sorted(eq.items())))[1][1])
            claims.append(Claim(
                PAPER, "E[AccI] ~ E[Acc]: a random split measures the inclusive accuracy",
                "E[AccI] close to E[Acc] (section 5)", dataset,
                f"equal within the intervals for {n_hold} of {len(eq)} models", verdict,
                example, {m: w for m, (_, w) in eq.items()}))
        # 3. rho rises with capacity (the paper's order on MNIST)
        order = [m for m in CAPACITY if "rho" in models.get(m, {})]
        if len(order) >= 2:
            pairs = [(a, b, compare(models[b]["rho"], models[a]["rho"]))
                     for a, b in zip(order, order[1:])]
            verdict = _combine([v for _, _, (v, _) in pairs])
            figure = " < ".join(f"{m} {fmt(models[m]['rho'])}" for m in order)
            why = "; ".join(f"{a} -> {b}: {v}" for a, b, (v, _) in pairs)
            # the other pairs of the order the intervals decide, e.g. svm < cnn-3
            decided = [(a, b, v) for i, a in enumerate(order) for b in order[i + 2:]
                       for v, _ in [compare(models[b]["rho"], models[a]["rho"])]
                       if v != UNDECIDED]
            if decided:
                why += "; decided beyond adjacent steps: " + ", ".join(
                    f"{a} < {b}" if v == HOLDS else f"{a} > {b}" for a, b, v in decided)
            claims.append(Claim(
                PAPER, "rho rises with capacity (" + " < ".join(order) + ")",
                "SVM < MLP < CNN-1 < CNN-2 < CNN-3 on MNIST (Table 3)", dataset, figure,
                verdict, why, {f"{a}<{b}": w for a, b, (_, w) in pairs}))
    return claims


def _size_key(label: str) -> float:
    return float("inf") if label == "full" else float(label)


def adequacy_claims(rows: list) -> list:
    """Return per data set: rho at the full training size exceeds rho at the smallest size."""
    groups: dict = {}
    for r in rows:
        if r.get("metric") != "adequacy" or not str(r.get("score", "")).startswith("rho@"):
            continue
        groups.setdefault(r["dataset"], {}).setdefault(r["model"], {})[
            r["score"].split("@", 1)[1]] = r
    claims = []
    for dataset, models in sorted(groups.items()):
        res, figures = {}, []
        for model, by_size in sorted(models.items()):
            sizes = sorted(by_size, key=_size_key)
            if len(sizes) < 2 or "full" not in by_size:
                continue
            small, full = by_size[sizes[0]], by_size["full"]
            res[model] = compare(full, small)
            figures.append(f"{model}: n={sizes[0]} {fmt(small)} -> full {fmt(full)}")
        if not res:
            continue
        n_hold = sum(v == HOLDS for v, _ in res.values())
        claims.append(Claim(
            PAPER, "rho rises with the training size (dataset adequacy)",
            "CNN-1 on MNIST: 0.85 at 100 samples to 0.96 at ~56K (Table 2-3, Figure 8)",
            dataset, "; ".join(figures), _combine([v for v, _ in res.values()]),
            f"{n_hold} of {len(res)} models have the full-size rho's interval above the "
            "smallest size's" + "".join(f"; {m}: {w}" for m, (v, w) in sorted(res.items())
                                         if v != HOLDS),
            {m: w for m, (_, w) in res.items()}))
    return claims


#: The corrected batch estimator counts as unbiased when its mean error's interval lies
#: within this many accuracy points of 0 (and contains 0).
UNBIASED_WITHIN = 0.01


def _error_row(errors: list) -> dict:
    from robench.stats.intervals import mean_interval

    iv = mean_interval(errors)
    return {"value": iv.estimate, "ci_low": iv.low, "ci_high": iv.high}


def lost_test_claims(rows: list) -> list:
    """Return per data set: the corrected batch estimator is unbiased, the post's is biased.

    Decided on the simulated batches of the stored random-split trials (each trial's
    estimates are means over the metric's simulated sets of k batches with the real test set
    planted among them): the per-trial errors estimate - true accuracy, with a t interval.
    """
    per: dict = {}
    for r in rows:
        if r.get("metric") == "lost-test" and r.get("score") == "true_accuracy":
            per.setdefault(r["dataset"], []).extend(
                t for t in ((r.get("details") or {}).get("trials") or [])
                if t.get("alpha_in") is not None)
    claims = []
    for dataset, trials in sorted(per.items()):
        if not trials:
            continue
        ok = _error_row([t["alpha_in"] - t["true_accuracy"] for t in trials])
        blog = _error_row([t["blog_alpha_in"] - t["true_accuracy"] for t in trials
                           if t.get("blog_alpha_in") is not None])
        lo, hi = ok["ci_low"], ok["ci_high"]
        if lo is None:
            verdict, why = UNDECIDED, "no interval (too few trials or no spread)"
        elif lo <= 0 <= hi and -UNBIASED_WITHIN <= lo and hi <= UNBIASED_WITHIN:
            verdict, why = HOLDS, (f"mean error {100 * ok['value']:+.2f} points, "
                                   f"[{100 * lo:+.2f}, {100 * hi:+.2f}] contains 0 and lies "
                                   f"within {100 * UNBIASED_WITHIN:g} point")
        elif hi < 0 or lo > 0:
            verdict, why = FAILS, f"[{100 * lo:+.2f}, {100 * hi:+.2f}] points excludes 0"
        else:
            verdict, why = UNDECIDED, f"[{100 * lo:+.2f}, {100 * hi:+.2f}] points: too wide"
        claims.append(Claim(
            "Lost test set (blog post, corrected)",
            "the corrected estimator k·(a_hat - p(1 - 1/k)) is unbiased for the test accuracy",
            "the post derives E[a_hat] = a/k + p(1 - 1/k)", dataset,
            f"mean error {_points(ok)} over {len(trials)} trials (simulated batches)",
            verdict, why, {"error": ok}))
        lo, hi = blog["ci_low"], blog["ci_high"]
        if lo is None:
            verdict, why = UNDECIDED, "no interval (too few trials or no spread)"
        elif hi < 0 or lo > 0:
            verdict, why = HOLDS, (f"[{100 * lo:+.1f}, {100 * hi:+.1f}] points excludes 0: "
                                   "its expectation is a/k², not a")
        else:
            verdict, why = FAILS, f"[{100 * lo:+.1f}, {100 * hi:+.1f}] points contains 0"
        claims.append(Claim(
            "Lost test set (blog post, corrected)",
            "the post's printed formula (1/k)·(a_hat - p(1 - 1/k)) is biased",
            "printed as the estimator of a", dataset,
            f"mean error {_points(blog)} over {len(trials)} trials", verdict, why,
            {"error": blog}))
    return claims


def _points(row: dict) -> str:
    """Return "+0.12 points [-0.30, +0.54]" of an error row in accuracy points."""
    if row.get("value") is None:
        return "-"
    out = f"{100 * row['value']:+.2f} points"
    if row.get("ci_low") is not None:
        out += f" [{100 * row['ci_low']:+.2f}, {100 * row['ci_high']:+.2f}]"
    return out
