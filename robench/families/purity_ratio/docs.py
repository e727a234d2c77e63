"""The clusterability paper's claims, decided on stored purity-ratio scores (robench.claims)."""

from __future__ import annotations

from robench.claims import FAILS, HOLDS, UNDECIDED, Claim

PAPER = "Feature-space clusterability (Ho et al.)"


def purity_claims(rows: list) -> list:
    """Return per data set: purity-ratio predicts corruption robustness, and beats Delta."""
    claims = []
    for r in sorted(rows, key=lambda r: r["dataset"]):
        if r.get("model") != "zoo" or r.get("score") != "validation_holds":
            continue
        d = r.get("details") or {}
        holds = d.get("holds")
        r_, tau, n = d.get("r"), d.get("tau"), d.get("n")
        figure = ("-" if r_ is None else f"r = {r_:+.2f}, tau = {tau:+.2f} over {n} models"
                  if tau is not None else f"r = {r_:+.2f} over {n} models")
        base = "; ".join(f"{b}: r = {v['r']:+.2f}" for b, v in (d.get("baselines") or {}).items()
                         if v.get("r") is not None)
        claims.append(Claim(
            PAPER, "purity-ratio rises with corruption robustness across models",
            "R^2 = 0.87, tau = 0.79 on ImageNet-C (positive)", r["dataset"],
            figure + (f" ({base})" if base else ""),
            {True: HOLDS, False: FAILS}.get(holds, UNDECIDED), d.get("reason") or "",
            {k: d.get(k) for k in ("r", "tau", "n", "baselines")}))
        beats = d.get("beats_baselines")
        claims.append(Claim(
            PAPER, "purity-ratio predicts robustness better than the Delta and accuracy "
                   "baselines",
            "purity-ratio's R^2 above Delta's", r["dataset"], base or "-",
            {True: HOLDS, False: FAILS}.get(beats if holds is not None else None, UNDECIDED),
            ("purity-ratio's r exceeds every baseline's" if beats else
             "a baseline's r is at least purity-ratio's" if beats is False else
             "undecided: no validation"),
            {"baselines": d.get("baselines"), "r": r_}))
    return claims
