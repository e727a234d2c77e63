"""How often the verify sample catches a forgery: the simulation docs/publishing.md quotes.

A contribution of ``models`` models x 3 partition kinds (inclusive, exclusive, random) x
``repeats`` repeats of the source-aware protocol: exclusive accuracies ~ N(0.80, 0.02),
inclusive ~ N(0.90, 0.015), random ~ N(0.88, 0.015), each a whole number of 360 test rows (so
they pass validation). A forger raises one model's rho = E[AccX] / E[AccI] by one point (0.01)
by adding ``d`` to ``k`` of its exclusive accuracies (k x d = 0.01 x R x E[AccI]); every copy of
each edited result is edited alike, so only a re-run shows it, and a re-run of an edited trial
always shows it (the same device re-runs exactly). Caught: the sample of
:func:`robench.exchange.verify.sample_trials` (weighted, the default size of
:func:`robench.exchange.verify.default_sample`) holds an edited trial. With ``tolerance``
(a re-run on another device or CPU, compared within :func:`robench.exchange.verify.tolerance`)
a sampled edited trial is caught only when its edit exceeds that tolerance.

:func:`blind_catch` is what any sample catches when the edited trials cannot be told from
the others by their values (a forger who raises the lowest trials into the middle of their
siblings): the chance that ``s`` trials drawn from a stratum of ``n`` hold one of ``k``.
"""

from __future__ import annotations

import numpy as np

from robench.exchange.verify import default_sample, sample_trials, tolerance

KINDS = {"inclusive": (0.90, 0.015), "exclusive": (0.80, 0.02), "random": (0.88, 0.015)}
N_TEST = 360


def contribution(rng, models: int, repeats: int) -> list:
    rows = []
    for m in range(models):
        for kind, (mu, sd) in KINDS.items():
            for r in range(repeats):
                acc = round(float(np.clip(rng.normal(mu, sd), 0, 1)) * N_TEST) / N_TEST
                rows.append({"key": f"m{m}-{kind}-{r}", "dataset": "d", "model": f"m{m}",
                             "clusterer": "kmeans", "protocol": "source-aware", "kind": kind,
                             "repeat": r, "n_test": N_TEST, "accuracy": acc})
    return rows


def blind_catch(n: int, s: int, k: int) -> float:
    """Return the chance that ``s`` of ``n`` trials drawn without replacement hold one of
    ``k`` edited ones: 1 - C(n-k, s) / C(n, s)."""
    from math import comb

    return 1.0 - comb(n - k, s) / comb(n, s)


def forge(rows: list, k: int, rng, how: str = "random") -> dict:
    """Raise model m0's rho by one point through k of its exclusive trials; return
    {key: accuracy before the edit} of the edited ones.

    ``random``: k trials drawn at random, each raised by the same amount. ``lowest``: the k
    lowest raised by the same amount (an adaptive forger: an edited trial then sits among its
    siblings instead of standing out above them).
    """
    inclusive = [r["accuracy"] for r in rows if r["model"] == "m0" and r["kind"] == "inclusive"]
    exclusive = [r for r in rows if r["model"] == "m0" and r["kind"] == "exclusive"]
    shift = 0.01 * len(exclusive) * float(np.mean(inclusive))  # total accuracy to add
    if how == "random":
        edited = rng.choice(len(exclusive), size=k, replace=False)
    else:
        edited = np.argsort([r["accuracy"] for r in exclusive], kind="stable")[:k]
    before = {}
    for i in edited:
        row = exclusive[i]
        before[row["key"]] = row["accuracy"]
        row["accuracy"] = min(1.0, round((row["accuracy"] + shift / k) * N_TEST) / N_TEST)
    return before


def catch_probability(models: int = 4, repeats: int = 100, ks=(1, 2, 5, 10, 20, 30, 50, 100),
                      hows=("random", "lowest"), seeds: int = 1000, fraction: float = 0.05,
                      least: int = 10, tolerance_mode: bool = False) -> dict:
    """Return {(k, how): share of ``seeds`` forgeries of k trials caught, ...,
    "sample": trials re-run, "sampled_fraction": their share, "worst": (k, how, share)}."""

    def shows(row, before) -> bool:
        if not tolerance_mode:
            return True
        return abs(row["accuracy"] - before) > tolerance(before, row["accuracy"], N_TEST)

    out = {}
    size = None
    for how in hows:
        for k in ks:
            if k > repeats:
                continue
            caught = 0
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                rows = contribution(rng, models, repeats)
                edited = forge(rows, k, rng, how)
                size = default_sample(rows, fraction, least)
                picked = sample_trials(rows, size, seed=10_000 + seed, weighted=True)
                caught += any(r["key"] in edited and shows(r, edited[r["key"]])
                              for r in picked)
            out[(k, how)] = caught / seeds
    out["sample"] = size
    out["sampled_fraction"] = size / (models * len(KINDS) * repeats)
    worst = min((v, key) for key, v in out.items() if isinstance(key, tuple))
    out["worst"] = (*worst[1], worst[0])
    return out


if __name__ == "__main__":  # python -m tests.reliability.forgery_simulation R FRACTION SEEDS
    import sys

    repeats, fraction = int(sys.argv[1]), float(sys.argv[2])
    mode = len(sys.argv) > 4 and sys.argv[4] == "tolerance"
    table = catch_probability(repeats=repeats, seeds=int(sys.argv[3]), fraction=fraction,
                              tolerance_mode=mode)
    per = table["sample"] / (4 * 3)
    print(f"R={repeats}: sample {table['sample']} of {4 * 3 * repeats} trials "
          f"({table['sampled_fraction']:.1%}, {per:g} per stratum)"
          f"{', tolerance mode' if mode else ''}; worst {table['worst']}")
    for how in ("random", "lowest"):
        print(f"  {how}: " + ", ".join(f"k={k}: {v:.3f}" for (k, h), v in sorted(
            (key, v) for key, v in table.items() if isinstance(key, tuple)) if h == how))
    print("  value-blind bound: " + ", ".join(
        f"k={k}: {blind_catch(repeats, int(per), k):.3f}" for k in (1, 5, 10, 20, 30, 50, 100)
        if k <= repeats))
