"""The clusterability paper's claims, decided on stored purity-ratio scores (robench.stats.claims)."""

from __future__ import annotations

import math

from robench.stats.claims import FAILS, HOLDS, UNDECIDED, Claim

PAPER = "Feature-space clusterability (Ho et al.)"
#: Two-sided 95% normal quantile of Fisher's z interval.
Z95 = 1.959963984540054


def r_interval(r, n) -> tuple:
    """Return Fisher's 95% interval (low, high) of a Pearson r over n models, or (None, None).

    ``tanh(atanh(r) ± z / sqrt(n - 3))``: needs n > 3 and |r| < 1.
    """
    if r is None or n is None or n <= 3 or not -1 < r < 1:
        return None, None
    z, se = math.atanh(r), 1 / math.sqrt(n - 3)
    return math.tanh(z - Z95 * se), math.tanh(z + Z95 * se)


def _r_text(r, n) -> str:
    lo, hi = r_interval(r, n)
    return f"r = {r:+.2f}" + ("" if lo is None else f" [{lo:+.2f}, {hi:+.2f}]")


def purity_claims(rows: list) -> list:
    """Return per data set: purity-ratio predicts corruption robustness, and beats Delta.

    Each r carries Fisher's z interval over the zoo's n models. The relation holds when r's
    interval lies above 0 and Kendall's tau is positive; it does not hold when r's interval
    lies below 0 (reversed), or when the stored validation failed and r's interval excludes
    nothing (no interval); it is undecided when the interval contains 0. Beating a baseline
    needs purity-ratio's interval wholly above the baseline's.
    """
    claims = []
    for r in sorted(rows, key=lambda r: r["dataset"]):
        if r.get("model") != "zoo" or r.get("score") != "validation_holds":
            continue
        d = r.get("details") or {}
        holds = d.get("holds")
        r_, tau, n = d.get("r"), d.get("tau"), d.get("n")
        lo, hi = r_interval(r_, n)
        baselines = {b: v for b, v in (d.get("baselines") or {}).items()
                     if v.get("r") is not None}
        base = "; ".join(f"{b}: {_r_text(v['r'], n)}" for b, v in baselines.items())
        figure = ("-" if r_ is None else _r_text(r_, n)
                  + (f", tau = {tau:+.2f}" if tau is not None else "") + f" over {n} models")
        if holds is None or r_ is None:
            verdict, why = UNDECIDED, d.get("reason") or "no validation"
        elif lo is None:
            verdict = {True: HOLDS, False: FAILS}[bool(holds)]
            why = (d.get("reason") or "") + " (no interval for r: too few models)"
            verdict = UNDECIDED if verdict == HOLDS else verdict
        elif lo > 0 and (tau or 0) > 0:
            verdict, why = HOLDS, f"r's interval [{lo:+.2f}, {hi:+.2f}] lies above 0, tau > 0"
        elif hi < 0:
            verdict, why = FAILS, f"r's interval [{lo:+.2f}, {hi:+.2f}] lies below 0: reversed"
        else:
            verdict, why = UNDECIDED, (f"r's interval [{lo:+.2f}, {hi:+.2f}] contains 0 at "
                                       f"{n} models")
        claims.append(Claim(
            PAPER, "purity-ratio rises with corruption robustness across models",
            "R^2 = 0.87, tau = 0.79 on ImageNet-C (positive)", r["dataset"],
            figure + (f" ({base})" if base else ""), verdict, why,
            {k: d.get(k) for k in ("r", "tau", "n", "baselines")}))
        if r_ is None or not baselines:
            verdict, why = UNDECIDED, "no validation or no baseline"
        else:
            outcomes = []
            for b, v in baselines.items():
                blo, bhi = r_interval(v["r"], n)
                if lo is None or blo is None:
                    outcomes.append((UNDECIDED, f"{b}: no interval"))
                elif lo > bhi:
                    outcomes.append((HOLDS, f"above {b}'s"))
                elif hi < blo:
                    outcomes.append((FAILS, f"below {b}'s"))
                else:
                    outcomes.append((UNDECIDED, f"overlaps {b}'s"))
            verdicts = [o for o, _ in outcomes]
            verdict = (HOLDS if all(o == HOLDS for o in verdicts) else
                       FAILS if any(o == FAILS for o in verdicts) else UNDECIDED)
            point = ("purity-ratio's r exceeds every baseline's" if d.get("beats_baselines")
                     else "a baseline's r is at least purity-ratio's")
            why = f"{point} (point estimates); intervals: " + ", ".join(w for _, w in outcomes)
        claims.append(Claim(
            PAPER, "purity-ratio predicts robustness better than the Delta and accuracy "
                   "baselines",
            "purity-ratio's R^2 above Delta's", r["dataset"],
            f"purity-ratio {figure}; {base}" if base else "-", verdict, why,
            {"baselines": d.get("baselines"), "r": r_}))
    return claims
