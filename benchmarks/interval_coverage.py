"""Coverage of robench's 95% intervals over R repeats, by simulation: prints a markdown table.

For each case, accuracies are drawn from a known distribution (so the true E[AccX], E[AccI]
and rho = E[AccX]/E[AccI] are known exactly), ``n_sims`` experiments of R_x exclusive and
R_i inclusive repeats are simulated at once (numpy, vectorised), and the share of intervals
that contain the truth is reported for:

* Fieller's interval of rho with Welch-Satterthwaite degrees of freedom (robench's default,
  :func:`robench.stats.intervals.ratio_interval`), and the delta-method t interval;
* Student's t interval of each mean (:func:`robench.stats.intervals.mean_interval`);
* the percentile bootstrap of rho that robench used before (2,000 resamples, each sample
  resampled on its own), re-implemented here vectorised, on fewer experiments (it is slow).

The Monte Carlo standard error of a coverage near 0.95 is sqrt(0.95 * 0.05 / n_sims): 0.11
points at the default 40,000 experiments, 0.5 points for the bootstrap's 2,000.
tests/stats/test_intervals.py imports :data:`CASES` and :func:`coverage_table` from this file, so
the table in docs/intervals.md is what the test pins.

Usage:
    python benchmarks/interval_coverage.py                  # about 30 s on one core
    python benchmarks/interval_coverage.py --sims 40000 --bootstrap-sims 0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.stats.intervals import delta_bounds, fieller_bounds, t_quantile  # noqa: E402

RS = (3, 5, 10, 30)
LEVEL = 0.95


def beta_params(mean: float, sd: float) -> tuple:
    """Return Beta(a, b) parameters with the given mean and standard deviation."""
    k = mean * (1 - mean) / sd ** 2 - 1
    return mean * k, (1 - mean) * k


def clipped_normal_mean(mu: float, sd: float) -> float:
    """Return E[clip(Z, 0, 1)] for Z ~ N(mu, sd^2), exactly."""
    from scipy import stats

    a, b = (0 - mu) / sd, (1 - mu) / sd
    inside = mu * (stats.norm.cdf(b) - stats.norm.cdf(a)) + sd * (stats.norm.pdf(a)
                                                                  - stats.norm.pdf(b))
    return float(inside + stats.norm.sf(b))


class Dist:
    """An accuracy distribution: "normal" (clipped to [0, 1]) or "beta", by mean and sd."""

    def __init__(self, kind: str, mean: float, sd: float):
        self.kind, self.mean_param, self.sd = kind, mean, sd

    @property
    def mean(self) -> float:
        """Return the exact expectation of a draw."""
        if self.kind == "normal":
            return clipped_normal_mean(self.mean_param, self.sd)
        return self.mean_param

    @property
    def skewness(self) -> float:
        """Return the skewness of the distribution (0 for the normal before clipping)."""
        if self.kind == "normal":
            return 0.0
        a, b = beta_params(self.mean_param, self.sd)
        return float(2 * (b - a) * np.sqrt(a + b + 1) / ((a + b + 2) * np.sqrt(a * b)))

    def draw(self, rng, size) -> np.ndarray:
        """Return draws of the given shape."""
        if self.kind == "normal":
            return np.clip(rng.normal(self.mean_param, self.sd, size), 0.0, 1.0)
        return rng.beta(*beta_params(self.mean_param, self.sd), size)

    def __str__(self) -> str:
        name = "N" if self.kind == "normal" else "Beta"
        return f"{name}(mean {self.mean_param:g}, sd {self.sd:g})"


#: name -> (AccX distribution, AccI distribution, R_i as a multiple of R_x, description).
CASES = {
    "normal": (Dist("normal", 0.80, 0.05), Dist("normal", 0.95, 0.01), 1,
               "AccX, AccI normal, clipped to [0, 1]"),
    "beta": (Dist("beta", 0.85, 0.04), Dist("beta", 0.97, 0.005), 1,
             "Beta accuracies, mild skew"),
    "skewed": (Dist("beta", 0.85, 0.06), Dist("beta", 0.97, 0.01), 1,
               "AccX Beta, skewness -0.64"),
    "heavy-skew": (Dist("beta", 0.90, 0.08), Dist("beta", 0.98, 0.01), 1,
                   "AccX Beta, skewness -1.33 (a few bad partitions)"),
    "noisy-denominator": (Dist("normal", 0.60, 0.05), Dist("normal", 0.70, 0.05), 1,
                          "AccI as variable as AccX"),
    "unequal-R": (Dist("normal", 0.80, 0.05), Dist("normal", 0.95, 0.01), 2,
                  "R_i = 2 R_x"),
}


def _bootstrap_cover(x, i, rho, rng, n_boot: int = 2000, chunk: int = 100) -> np.ndarray:
    """Return whether the percentile bootstrap interval of rho covers ``rho``, per experiment."""
    out = []
    for s in range(0, len(x), chunk):
        xb, ib = x[s:s + chunk], i[s:s + chunk]
        m, rx, ri = len(xb), xb.shape[1], ib.shape[1]
        jx = rng.integers(0, rx, (m, n_boot, rx))
        ji = rng.integers(0, ri, (m, n_boot, ri))
        bx = np.take_along_axis(xb[:, None, :].repeat(n_boot, 1), jx, 2).mean(2)
        bi = np.take_along_axis(ib[:, None, :].repeat(n_boot, 1), ji, 2).mean(2)
        lo, hi = np.quantile(bx / bi, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=1)
        out.append((lo <= rho) & (rho <= hi))
    return np.concatenate(out)


def coverage_table(n_sims: int = 40000, seed: int = 0, bootstrap_sims: int = 0,
                   cases=None, rs=RS) -> list:
    """Return one dict per (case, R): coverage of each interval and mean widths of rho's.

    Deterministic given the arguments (one generator seeded with ``seed`` per case and R).
    """
    rows = []
    for ci, name in enumerate(cases or CASES):
        dx, di, mult, _ = CASES[name]
        mx, mi = dx.mean, di.mean
        rho = mx / mi
        for R in rs:
            rng = np.random.default_rng([seed, ci, R])
            r_i = mult * R
            x, i = dx.draw(rng, (n_sims, R)), di.draw(rng, (n_sims, r_i))
            stats = (x.mean(1), x.var(1, ddof=1), R, i.mean(1), i.var(1, ddof=1), r_i)
            row = {"case": name, "R_x": R, "R_i": r_i, "n_sims": n_sims}
            for method, fn in (("fieller", fieller_bounds), ("delta", delta_bounds)):
                lo, hi, _ = fn(*stats, LEVEL)
                row[method] = float(np.mean((lo <= rho) & (rho <= hi)))
                row[f"{method}_width"] = float(np.nanmean(hi - lo))
                row[f"{method}_undefined"] = float(np.mean(~np.isfinite(lo)))
            for label, sample, truth, n in (("mean_x", x, mx, R), ("mean_i", i, mi, r_i)):
                half = t_quantile(LEVEL, n - 1) * sample.std(1, ddof=1) / np.sqrt(n)
                row[label] = float(np.mean(np.abs(sample.mean(1) - truth) <= half))
            if bootstrap_sims:
                b = min(bootstrap_sims, n_sims)
                row["bootstrap"] = float(_bootstrap_cover(x[:b], i[:b], rho, rng).mean())
                row["bootstrap_sims"] = b
            rows.append(row)
    return rows


def markdown(rows: list) -> str:
    """Return the rows as a markdown table (coverage in percent)."""
    boot = any("bootstrap" in r for r in rows)
    head = ["case", "R_x", "R_i", "Fieller", "delta", "t mean AccX", "t mean AccI",
            "Fieller width"] + (["bootstrap (old)"] if boot else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["case"], str(r["R_x"]), str(r["R_i"]), f"{100 * r['fieller']:.1f}",
                 f"{100 * r['delta']:.1f}", f"{100 * r['mean_x']:.1f}",
                 f"{100 * r['mean_i']:.1f}", f"{r['fieller_width']:.3f}"]
        if boot:
            cells.append(f"{100 * r['bootstrap']:.1f}" if "bootstrap" in r else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stamp() -> str:
    """Return what the table depends on: commit, numpy and scipy versions, Python, machine."""
    import platform

    import scipy

    from robench.process.provenance import git_revision

    commit = (git_revision() or "unknown")[:7]
    return (f"commit {commit}, numpy {np.__version__}, scipy {scipy.__version__}, Python "
            f"{platform.python_version()}, {platform.machine()} {platform.system()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=40000, help="experiments per case and R")
    ap.add_argument("--bootstrap-sims", type=int, default=2000,
                    help="experiments for the old percentile bootstrap (0: skip it)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = coverage_table(args.sims, args.seed, args.bootstrap_sims)
    print("Cases (true rho = E[AccX] / E[AccI], exact):")
    for name, (dx, di, mult, desc) in CASES.items():
        print(f"- {name}: AccX ~ {dx} (skewness {dx.skewness:+.2f}), AccI ~ {di}, "
              f"R_i = {mult} R_x; {desc}; rho = {dx.mean / di.mean:.4f}")
    print()
    print(f"Coverage (%) of nominal 95% intervals; {args.sims:,} experiments per row "
          f"(Monte Carlo SE {100 * np.sqrt(0.95 * 0.05 / args.sims):.2f} points)"
          + (f", bootstrap on {args.bootstrap_sims:,} (SE "
             f"{100 * np.sqrt(0.95 * 0.05 / args.bootstrap_sims):.2f})"
             if args.bootstrap_sims else "") + f", seed {args.seed}:")
    print()
    print(markdown(rows))
    print()
    print(f"({time.perf_counter() - t0:.1f} s; {stamp()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
