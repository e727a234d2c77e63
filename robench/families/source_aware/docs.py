"""The source-aware paper's claims, decided on stored rho scores (robench.claims)."""

from __future__ import annotations

from robench.claims import FAILS, HOLDS, UNDECIDED, Claim, compare, fmt

PAPER = "Source-aware partitioning (Kilinc & Uysal)"
#: The paper's capacity order on MNIST (rho rises with capacity: SVM < MLP < CNN-1..3).
CAPACITY = ("svm", "mlp", "cnn-1", "cnn-2", "cnn-3")
#: E[AccI] ~ E[Acc]: both intervals must overlap and be narrower than this to call them equal.
EQUAL_WIDTH = 0.05


def _table(rows: list, clusterer: str = "kmeans") -> dict:
    """Return {dataset: {model: {score: row}}} of the rho metric's rows of one clusterer."""
    out: dict = {}
    for r in rows:
        if r.get("metric") != "rho" or (r.get("clusterer") or "") != clusterer:
            continue
        out.setdefault(r["dataset"], {}).setdefault(r["model"], {})[r["score"]] = r
    return out


def _combine(verdicts: list) -> str:
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if any(v == FAILS for v in verdicts):
        return FAILS
    return UNDECIDED


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
            claims.append(Claim(
                PAPER, "rho rises with capacity (" + " < ".join(order) + ")",
                "SVM < MLP < CNN-1 < CNN-2 < CNN-3 on MNIST (Table 3)", dataset, figure,
                verdict, why, {f"{a}<{b}": w for a, b, (_, w) in pairs}))
    return claims
