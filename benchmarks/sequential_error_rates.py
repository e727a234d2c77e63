"""Error rates, power and repeats of the one paired test, by simulation: prints markdown tables.

What docs/intervals.md and docs/adaptive.md quote. The generator is
:func:`robench.stats.paired.null_pairs`: two models of equal rho sharing every repeat's
partitions, the held-out source's effect loading 0.02 and 0.06 on them (correlation 0.87
under the random design), source effects normal, Gamma(2), exponential, log-normal (left-
skewed) or one hard source of k = 1/p; the held-out sources drawn at random (protocol 1)
or in rotation (protocol 2, the balanced design). The rule is the one ranks and
``--until decided`` call (:func:`robench.stats.paired.compare_all`,
benchmarks/simulations.py's ``run_sequential``). tests/stats/test_paired.py,
test_sequential.py and test_ranks.py pin the same settings at fewer runs.

Usage:
    python benchmarks/sequential_error_rates.py              # a few minutes on one core
    python benchmarks/sequential_error_rates.py --runs 2000  # a quick look
"""

from __future__ import annotations

import argparse
import math
import zlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.stats import paired  # noqa: E402
from simulations import correlated_accuracies, error_rates, run_sequential  # noqa: E402

CASES = [("normal", 5), ("gamma2", 5), ("exponential", 5), ("lognormal", 5),
         ("hard", 20), ("hard", 10), ("hard", 5)]
SIZES = (3, 8, 32, 100)


def label(shape, k):
    return f"hard source p = {1 / k:g}" if shape == "hard" else f"{shape} (k = {k})"


def fixed_rates(runs: int) -> list:
    lines = ["| source effects | design | R = 3 | R = 8 | R = 32 | R = 100 |",
             "|---|---|---|---|---|---|"]
    for shape, k in CASES:
        for design in ("balanced", "random"):
            rng = np.random.default_rng(zlib.crc32(repr((shape, k, design)).encode()))
            cells = []
            for r in SIZES:
                n = runs if design == "balanced" else max(runs // 5, 1000)
                x, i = paired.null_pairs(rng, n, r, shape=shape, design=design, k=k)
                res = paired.compare_all(x, i, cycle=k if design == "balanced" else None)
                cells.append(f"{100 * float((np.abs(res['status']) == 1).mean()):.2f}%")
            lines.append(f"| {label(shape, k)} | {design} | " + " | ".join(cells) + " |")
    return lines


def sequential_rates(runs: int) -> list:
    lines = ["| source effects | design | wrong order (any look, up to 100) | decided |",
             "|---|---|---|---|"]
    for shape, k in CASES:
        for design in ("balanced", "random"):
            n = runs if design == "balanced" else max(runs // 5, 1000)
            rng = np.random.default_rng(zlib.crc32(repr((shape, k, design, "seq")).encode()))
            x, i = paired.null_pairs(rng, n, 100, shape=shape, design=design, k=k)
            final = run_sequential(x, i, max_repeats=100,
                                   cycle=k if design == "balanced" else None)
            res = error_rates(final, [0.7 / 0.9] * 2)
            lines.append(f"| {label(shape, k)} | {design} | {100 * res['any_wrong']:.2f}% | "
                         f"{100 * res['decided']:.1f}% (equivalent within 0.01) |")
    return lines


def gap_needed(n: int, pairs: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Return the standardised paired gap (mean / sd of the per-repeat difference) the
    balanced design's t test over n complete-cycle repeats orders with ``power``, at Holm's
    first step over ``pairs`` pairs (two-sided: alpha / pairs / 2 a side)."""
    from scipy import optimize, stats

    if n < 2:
        return float("inf")
    t = stats.t.ppf(1 - alpha / pairs / 2, n - 1)
    return float(optimize.brentq(lambda g: stats.nct.sf(t, n - 1, g * math.sqrt(n)) - power,
                                 1e-6, 1e3))


def independent_gap(n: int, runs: int, sd: float = 0.02, power: float = 0.8) -> float:
    """Return the standardised gap the test of independent repeats (means, two models:
    Hall's skew-corrected t over every repeat) orders with ``power`` at n repeats, by
    bisection over simulated normal differences of sd ``sd``."""
    rng = np.random.default_rng(n)
    z = rng.standard_normal((runs, n))
    lo, hi = 0.0, 0.5 / sd
    one = np.ones((runs, n))
    for _ in range(14):
        g = (lo + hi) / 2
        xa = 0.5 + sd * (g + z)
        got = paired.shows_above(xa, one, np.full((runs, n), 0.5), one, alpha=0.025).mean()
        lo, hi = (lo, g) if got >= power else (g, hi)
    return hi


def power_lines(runs: int) -> list:
    lines = ["| repeats R (k = 5) | repeats the balanced test uses | gap, 2 models | "
             "gap, 5 models (10 pairs) | independent repeats, 2 models |", "|---|---|---|---|---|"]
    for r in (3, 5, 8, 10, 20, 32, 50, 100):
        n = (r // 5) * 5
        bet = independent_gap(r, max(runs // 10, 500)) if r >= 3 else float("inf")
        cells = [f"{gap_needed(n, 1):.2f}" if n >= 2 else "none",
                 f"{gap_needed(n, 10):.2f}" if n >= 2 else "none",
                 f"{bet:.1f}" if math.isfinite(bet) and bet < 0.5 / 0.02 else "none"]
        lines.append(f"| {r} | {n} | " + " | ".join(cells) + " |")
    return lines


def mnist_like(runs: int) -> list:
    """Five models with mnist-5k's quick-budget means and spreads, balanced design (k = 5),
    shared partition correlation 0.85: the sequential rule's repeats and calls."""
    rng = np.random.default_rng(11)
    mean_x = np.array([0.884, 0.851, 0.778, 0.783, 0.736])
    mean_i = np.array([0.955, 0.954, 0.932, 0.951, 0.925])
    x, i = correlated_accuracies(rng, runs // 4, 100, mean_x, mean_i,
                                 [0.034, 0.043, 0.055, 0.046, 0.053],
                                 [0.006, 0.008, 0.011, 0.006, 0.011], shared=0.85)
    final = run_sequential(x, i, max_repeats=100, precision=0.01, cycle=5)
    res = error_rates(final, mean_x / mean_i, precision=0.01)
    per = final["repeats"].mean(0)
    return [f"mnist-5k-like table (5 models, balanced, precision 0.01, {runs // 4} runs): "
            f"wrong calls in {100 * res['any_wrong']:.2f}% of tables, decided in "
            f"{100 * res['decided']:.1f}%, mean repeats per model "
            + ", ".join(f"{v:.1f}" for v in per)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20_000)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    for title, fn in (("Null pairs, fixed repeats: share of pairs called ordered (level 5%)",
                       fixed_rates),
                      ("Null pairs, --until decided (looks at whole cycles / 6, 12, 24, 48, 100)",
                       sequential_rates),
                      ("Standardised paired gap decided with 80% power", power_lines),
                      ("A table with real gaps", mnist_like)):
        print(f"\n### {title}\n")
        print("\n".join(fn(args.runs)), flush=True)
    print(f"\n({args.runs} runs a balanced setting, {max(args.runs // 5, 1000)} a random-design one; "
          f"{time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
