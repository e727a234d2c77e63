"""Error rates and power of the paired test on training noise, against Student's t: markdown.

What docs/intervals.md quotes for issue 49. The generator is
benchmarks/simulations.py's ``residual_tables``: a pair (or a five-model table) whose paired
difference carries a census part (the held-out source, share 0, 0.2 or 0.5 of its variance)
and one model's training noise, normal, Gamma(2), log-normal or a degraded run in 5, 10 or
20% of repeats (:data:`robench.stats.NOISES`), under the balanced design (k = 5). The
rule is the one ranks and the sequential rule call (:func:`robench.stats.paired.compare_all`);
"Student" is the rule of 4e263f3 (Student's t over complete cycles, no skew allowance, no
degraded-run check) on the same repeats. tests/stats/test_paired.py pins the same settings
at fewer runs. Cell: % of null pairs ordered (either way; nominal 5%) by the rule / by
Student's, and % of pairs the rule left undecided for a degraded-looking repeat.

Usage:
    python benchmarks/training_noise_rates.py              # 20,000 pairs a cell: minutes
    python benchmarks/training_noise_rates.py --runs 2000  # a quick look
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.stats import paired  # noqa: E402
from simulations import NOISES, residual_tables  # noqa: E402

SIZES = (10, 15, 20, 40)


def student(x, i, alpha=0.05, cycle=5):
    """Student's t over complete cycles at alpha / 2 a side (the rule of 4e263f3)."""
    kw = dict(cycle=cycle, skew_se=None, check=False)
    up = paired.paired_test(x[:, 0], i[:, 0], x[:, 1], i[:, 1], 0.0, alpha / 2, **kw)
    down = paired.paired_test(x[:, 1], i[:, 1], x[:, 0], i[:, 0], 0.0, alpha / 2, **kw)
    return up["reject"] | down["reject"]


def level_table(runs: int) -> list:
    lines = ["| census share | training noise | " + " | ".join(f"n = {n}" for n in SIZES) + " |",
             "|---|---|" + "---|" * len(SIZES)]
    for census in (0.0, 0.2, 0.5):
        for noise in NOISES:
            rng = np.random.default_rng(zlib.crc32(repr((census, noise)).encode()))
            cells = []
            for n in SIZES:
                x, i = residual_tables(rng, runs, n, noise=noise, census=census)
                res = paired.compare_all(x, i, cycle=5)
                rule = 100 * float((np.abs(res["status"]) == 1).mean())
                old = 100 * float(student(x, i).mean())
                flagged = 100 * float((res["degraded"] >= 0).mean())
                cells.append(f"{rule:.1f} / {old:.1f} ({flagged:.0f})")
            lines.append(f"| {census:g} | {noise} | " + " | ".join(cells) + " |")
    return lines


def power_table(runs: int) -> list:
    lines = ["| gap (sd) | census | " + " | ".join(f"n = {n}" for n in SIZES) + " |",
             "|---|---|" + "---|" * len(SIZES)]
    for gap in (0.5, 0.8, 1.2):
        for census in (0.2, 0.5):
            rng = np.random.default_rng(int(gap * 10) + int(census * 100))
            cells = []
            for n in SIZES:
                x, i = residual_tables(rng, runs, n, noise="normal", census=census,
                                              gaps=[gap, 0.0])
                res = paired.compare_all(x, i, cycle=5)
                cells.append(f"{100 * float((res['status'][:, 0] == 1).mean()):.0f} / "
                             f"{100 * float(student(x, i).mean()):.0f}")
            lines.append(f"| {gap:g} | {census:g} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000, help="pairs per cell")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"Null pairs ordered, % (rule / Student's; in brackets % left undecided for a "
          f"degraded-looking repeat), {args.runs} pairs a cell:\n")
    print("\n".join(level_table(args.runs)))
    print(f"\nPower, % of pairs ordered the right way (rule / Student's), normal noise, "
          f"{args.runs} pairs a cell:\n")
    print("\n".join(power_table(args.runs)))
    print(f"\n({time.perf_counter() - start:.0f} s, seeded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
