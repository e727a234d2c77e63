"""Error rates and repeats of ``--until decided``'s rule, by simulation: prints a markdown table.

Each case draws tables of models whose accuracies share a per-repeat partition effect
(:func:`robench.stats.sequential.correlated_accuracies`) with known true rho, runs the rule
(:func:`robench.stats.sequential.run_sequential`, which calls the same ``table_look`` the
driver calls on real trials) and counts its calls against the truth
(:func:`robench.stats.sequential.error_rates`). Every case is run with the rule's interval
(Hall's skew-corrected one, ``skew``) and with Student's t interval it replaced (``t``), both
Bonferroni-corrected over the looks; the mean repeats per model are what the correction
costs. Rates are per adjacent pair (model interval misses per model); the Monte Carlo
standard error of a rate near 5% is ~0.15 points at 20,000 runs. tests/stats/test_sequential.py
imports :data:`CASES` and :func:`simulate`, so docs/adaptive.md's table is what the tests pin.

Usage:
    python benchmarks/sequential_error_rates.py              # about a minute on one core
    python benchmarks/sequential_error_rates.py --runs 2000  # a quick look
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.stats.sequential import (correlated_accuracies, error_rates,  # noqa: E402
                                      run_sequential)


def gamma2_left(rng, shape):
    """A left-skewed partition effect (mean 0, sd 1, skewness -1.41: standardised, negated
    Gamma(2)): most partitions a little easier than average, a few far harder."""
    return -(rng.gamma(2.0, 1.0, shape) - 2.0) / np.sqrt(2.0)


def exponential_left(rng, shape):
    """A more skewed effect (skewness -2: standardised, negated exponential)."""
    return -(rng.exponential(1.0, shape) - 1.0)


def loaded(loadings, own):
    """Return (sd, shared) of models loading ``loadings`` on the shared effect plus ``own``
    noise (sd): accuracies of models a and b then correlate L_a L_b / (sd_a sd_b)."""
    loadings = np.asarray(loadings, float)
    sd = np.hypot(loadings, own)
    return sd, loadings ** 2 / sd ** 2


_SKEW_SD, _SKEW_SHARED = loaded([0.02, 0.06], 0.0106)  # correlation 0.87
_MNIST = dict(mean_x=[0.884, 0.851, 0.778, 0.783, 0.736],
              mean_i=[0.955, 0.954, 0.932, 0.951, 0.925],
              sd_x=[0.034, 0.043, 0.055, 0.046, 0.053],
              sd_i=[0.006, 0.008, 0.011, 0.006, 0.011])

#: name -> table parameters (kwargs of correlated_accuracies plus max_repeats, precision, runs)
CASES = {
    "null pair, no shared effect (max 48)": dict(
        mean_x=[0.80, 0.80], mean_i=[0.95, 0.95], sd_x=[0.05, 0.05], sd_i=[0.01, 0.01],
        shared=0.0, max_repeats=48),
    "null pair, Gamma(2)-shaped shared effect, correlation 0.87 (max 100)": dict(
        mean_x=[0.80, 0.80], mean_i=[0.95, 0.95], sd_x=_SKEW_SD, sd_i=[0.01, 0.01],
        shared=_SKEW_SHARED, skew=gamma2_left, max_repeats=100),
    "null pair, exponential-shaped shared effect, correlation 0.87 (max 100)": dict(
        mean_x=[0.80, 0.80], mean_i=[0.95, 0.95], sd_x=_SKEW_SD, sd_i=[0.01, 0.01],
        shared=_SKEW_SHARED, skew=exponential_left, max_repeats=100),
    "null pair, skewed shared effect (loadings 0.03 / 0.07, shared 0.8, max 48)": dict(
        mean_x=[0.80, 0.80], mean_i=[0.95, 0.95], sd_x=[0.03, 0.07], sd_i=[0.01, 0.01],
        shared=0.8, skew=gamma2_left, max_repeats=48),
    "null pair, shared 0.95 (max 100)": dict(
        mean_x=[0.80, 0.80], mean_i=[0.95, 0.95], sd_x=[0.05, 0.05], sd_i=[0.01, 0.01],
        shared=0.95, max_repeats=100),
    "difference 0.0101 at the margin 0.01 (max 100)": dict(
        mean_x=[0.80, 0.80 - 0.0101 * 0.95], mean_i=[0.95, 0.95], sd_x=[0.05, 0.05],
        sd_i=[0.002, 0.002], shared=0.97, max_repeats=100),
    "mnist-5k-like, 5 models, shared 0.85 (max 100)": dict(
        **_MNIST, shared=0.85, max_repeats=100, runs=10_000),
}


def simulate(case: dict, *, skew_corrected: bool = True, corrected: bool = True,
             runs: int = 20_000, seed: int = 0) -> tuple:
    """Return (error rates, final arrays) of one case under one rule."""
    p = dict(case)
    runs = p.pop("runs", runs)
    max_repeats, precision = p.pop("max_repeats"), p.pop("precision", 0.01)
    skew = p.pop("skew", None)
    rng = np.random.default_rng(seed)
    x, i = correlated_accuracies(rng, runs, max_repeats, p["mean_x"], p["mean_i"], p["sd_x"],
                                 p["sd_i"], shared=p["shared"], skew=skew)
    final = run_sequential(x, i, precision=precision, corrected=corrected,
                           skew_corrected=skew_corrected)
    rho = np.asarray(p["mean_x"]) / np.asarray(p["mean_i"])
    return error_rates(final, rho, precision), final


def table(runs: int = 20_000) -> list:
    """Return the markdown lines of every case under both intervals."""
    lines = ["| case | interval | wrong order | wrong equivalence | pair interval misses | "
             "model interval misses | mean repeats |", "|---|---|---|---|---|---|---|"]
    for name, case in CASES.items():
        for skew_corrected, label in ((True, "skew-corrected (the rule)"), (False, "t")):
            res, _ = simulate(case, skew_corrected=skew_corrected,
                              runs=min(runs, case.get("runs", runs)))
            lines.append(f"| {name} | {label} | {100 * res['wrong_order']:.1f}% | "
                         f"{100 * res['wrong_equivalent']:.1f}% | {100 * res['pair_miss']:.1f}% "
                         f"| {100 * res['model_miss']:.1f}% | {res['mean_repeats']:.1f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20_000)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print("\n".join(table(args.runs)))
    print(f"\n({args.runs:,} runs per case, 10,000 for the five-model table; "
          f"{time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
