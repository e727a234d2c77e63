"""The variance the balanced held-out design removes, measured on stored trials.

Reads the exclusive trials of a results database written with source-aware protocol 2 (the
balanced design) over at least two complete cycles, recovers which source of each class each
repeat held out (from the trial's own spec: the partition is a pure function of it), and
splits each class's per-class exclusive accuracy into the part that depends on which source
was held out and the rest:

* within a class, every source was held out once per cycle, so each (class, source) has one
  accuracy per cycle; the noise variance s2_n (training seeds, inclusive partitions of the
  other classes, ...) is the mean over (class, source) of half the squared difference between
  cycles, and the between-source variance s2_b the variance of the per-source means minus
  s2_n / cycles;
* the variance of the mean over one cycle of k repeats of a class's accuracy is then
  (s2_b + s2_n) / k when the source is drawn at random each repeat (protocol 1) and s2_n / k
  when each source is held out once (protocol 2): the ratio is what the design removes. The
  same for the paired difference of two models' per-class accuracies, and for E[AccX] (the
  mean over classes, classes drawn independently: the sums of the class variances).

Usage:
    python benchmarks/balanced_variance.py --db robench.db [--clusterer kmeans]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench


def held_out_sources(store, registry, trials):
    """Return {repeat: [held-out source id per class]} of a data set's exclusive trials."""
    from robench.data.sources import find_sources
    from robench.families.source_aware import protocol as source_aware
    from robench.run.trials import TrialEnv

    env = TrialEnv(registry)
    out = {}
    for t in trials:
        if t["repeat"] in out:
            continue
        spec = t["spec"]
        ds = env.dataset(spec["dataset"])
        groups = find_sources(ds, registry.get("clusterers", spec["clusterer"]),
                              spec["versions"]["clusterer"], spec["params"]["k"],
                              spec["seed"]).groups
        test = source_aware.partition(spec, ds, registry)[2]
        y = np.asarray(ds.y)
        out[t["repeat"]] = [int(np.unique(groups[test][y[test] == c])[0])
                            for c in range(ds.n_classes)]
    return out


def decompose(acc: dict, held: dict, cycle: int) -> tuple:
    """Return (sum over classes of s2_b, of s2_n) from {repeat: [per-class value]}."""
    repeats = sorted(r for r in acc if r < (max(acc) + 1) // cycle * cycle)
    n_cycles = len(repeats) // cycle
    classes = len(next(iter(acc.values())))
    sb = sn = 0.0
    for c in range(classes):
        by_source = defaultdict(list)
        for r in repeats:
            if acc[r][c] is not None:
                by_source[held[r][c]].append(acc[r][c])
        reps = [v for v in by_source.values() if len(v) == n_cycles]
        if len(reps) < 2 or n_cycles < 2:
            continue
        a = np.array(reps)  # (sources, cycles)
        s2n = float(np.mean(a.var(axis=1, ddof=1)))
        s2b = float(a.mean(axis=1).var(ddof=1) - s2n / n_cycles)
        sb += max(s2b, 0.0)
        sn += s2n
    return sb, sn


def main(argv=None) -> None:
    from robench.plugins import make_registry
    from robench.storage.store import Store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--clusterer", default="kmeans")
    args = ap.parse_args(argv)
    store = Store(args.db, readonly=True)
    registry = make_registry(load_entrypoints=False)
    rows = [t for t in store.trials() if t["kind"] == "exclusive" and t["status"] == "ok"
            and t["clusterer"] == args.clusterer
            and (t.get("params") or {}).get("held_out") == "balanced"]
    by = defaultdict(dict)
    for t in rows:
        by[(t["dataset"], t["model"])][t["repeat"]] = t
    print("| data set | quantity | cycles | between-source var | noise var | "
          "random / balanced variance of a cycle mean |")
    print("|---|---|---|---|---|---|")
    for dataset in sorted({d for d, _ in by}):
        models = sorted(m for d, m in by if d == dataset)
        trials = list(by[(dataset, models[0])].values())
        cycle = trials[0]["extra"]["cycle"]
        held = held_out_sources(store, registry, trials)
        per = {m: {r: t["per_class"] for r, t in by[(dataset, m)].items()} for m in models}
        n_cycles = (max(held) + 1) // cycle
        for m in models:
            sb, sn = decompose(per[m], held, cycle)
            print(f"| {dataset} | per-class AccX, {m} | {n_cycles} | {sb:.2e} | {sn:.2e} | "
                  f"{(sb + sn) / sn:.1f}x |")
        for a, b in [(a, b) for i, a in enumerate(models) for b in models[i + 1:]]:
            diff = {r: [None if (u is None or v is None) else u - v
                        for u, v in zip(per[a][r], per[b][r])]
                    for r in per[a] if r in per[b]}
            sb, sn = decompose(diff, held, cycle)
            print(f"| {dataset} | per-class AccX, {a} - {b} | {n_cycles} | {sb:.2e} | "
                  f"{sn:.2e} | {(sb + sn) / sn:.1f}x |")


if __name__ == "__main__":
    main()
