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

Two more measurements answer whether the census part can be taken out of the rank test's
standard error (issue 49; docs/intervals.md has the conclusion):

* ``--pairs``: per pair of models, the mean over classes of the per-class AccX difference, its
  sample sd over the repeats (the census in it, as the rank test has it) and its census-free sd:
  the classes' (class, source) means over cycles removed, the covariance of every two classes'
  residuals estimated without bias (residual cross-products over tr(P_j P_l), P_j the
  projection off class j's (source) means: the classes' residuals are correlated, one model
  trains on them all), summed. t of the mean with each sd. This is what a per-class
  decomposition under robench's design (a fresh order per cycle and class) could recover.
* ``--interaction N``: whether fixing the rotation (the same order every cycle, so a position
  is a stratum) would be valid. N random held-out tuples (a source per class, drawn
  independently) on the data set, deterministic scikit-learn models (no training noise), an
  additive model of the paired AccX difference in the held-out sources fitted by least
  squares; the residual is the part that depends on which sources were held out *together*
  (the interaction). Under a fixed rotation it is frozen into the positions: it adds about
  s2_int / k to the variance of the mean whatever the number of cycles, and a variance from
  strata by position does not see it.

Usage:
    python benchmarks/balanced_variance.py --db robench.db [--clusterer kmeans]
    python benchmarks/balanced_variance.py --db robench.db --pairs
    python benchmarks/balanced_variance.py --interaction 240 [--dataset digits]
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


def census_free_variance(diff: dict, held: dict, cycle: int) -> tuple:
    """Return (n, mean, full variance, census-free variance) of the class mean of ``diff``.

    ``diff``: {repeat: [per-class value]} over complete cycles; the census-free variance is
    Var(sum_j u_j) / K^2 with u_j class j's residual off its (class, source) means, every
    covariance C_jl estimated by sum_r u_jr u_lr / tr(P_j P_l) (unbiased for any C).
    """
    repeats = sorted(r for r in diff if r < (max(diff) + 1) // cycle * cycle
                     and None not in diff[r])
    d = np.array([diff[r] for r in repeats], float)
    n, k_classes = d.shape
    resid, proj = np.zeros_like(d), []
    for j in range(k_classes):
        q = np.zeros((n, n))
        for s in {held[r][j] for r in repeats}:
            g = np.flatnonzero([held[r][j] == s for r in repeats])
            resid[g, j] = d[g, j] - d[g, j].mean()
            q[np.ix_(g, g)] = 1.0 / g.size
        proj.append(np.eye(n) - q)
    var = sum(resid[:, j] @ resid[:, m] / np.trace(proj[j] @ proj[m])
              for j in range(k_classes) for m in range(k_classes)) / k_classes ** 2
    mean = d.mean(1)
    return n, float(mean.mean()), float(mean.var(ddof=1)), float(var)


def interaction(dataset_name: str, draws: int, seed: int = 0) -> None:
    """Print the additive and interaction parts of the held-out tuple's effect on paired AccX
    differences of deterministic models (``--interaction``)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    from robench.data.sources import find_sources
    from robench.plugins import make_registry

    registry = make_registry(load_entrypoints=False)
    ds = registry.load_dataset(dataset_name)
    groups = find_sources(ds, registry.get("clusterers", "kmeans"),
                          registry.get("clusterers", "kmeans").version, 5, seed).groups
    x, y = ds.rows(np.arange(ds.y.shape[0])).reshape(ds.y.shape[0], -1), np.asarray(ds.y)
    sources = [np.unique(groups[y == c]) for c in range(ds.n_classes)]
    models = {"svc": SVC, "logreg": lambda: LogisticRegression(max_iter=500, C=0.5),
              "knn": lambda: KNeighborsClassifier(5)}
    rng = np.random.default_rng(seed)
    tuples = np.array([[rng.integers(s.size) for s in sources] for _ in range(draws)])
    acc = {m: np.zeros(draws) for m in models}
    for i, t in enumerate(tuples):
        test = np.zeros(y.size, bool)
        for c, s in enumerate(sources):
            test |= (y == c) & (groups == s[t[c]])
        for m, make in models.items():
            acc[m][i] = (make().fit(x[~test], y[~test]).predict(x[test]) == y[test]).mean()
    design = [np.ones(draws)] + [(tuples[:, c] == v).astype(float)
                                 for c, s in enumerate(sources) for v in range(1, s.size)]
    design = np.array(design).T
    print(f"{dataset_name}: {draws} random held-out tuples (a kmeans source per class, k = 5), "
          f"{design.shape[1]} additive parameters")
    print("| quantity | sd over tuples | sd of the interaction | interaction share |")
    print("|---|---|---|---|")
    names = list(models)
    for label, v in [(m, acc[m]) for m in names] + [
            (f"{a} - {b}", acc[a] - acc[b])
            for i, a in enumerate(names) for b in names[i + 1:]]:
        beta = np.linalg.lstsq(design, v, rcond=None)[0]
        s2_int = float(((v - design @ beta) ** 2).sum() / (draws - design.shape[1]))
        total = float(v.var(ddof=1))
        print(f"| AccX, {label} | {total ** 0.5:.4f} | {s2_int ** 0.5:.4f} | "
              f"{s2_int / total:.2f} |")


def stamp(store=None, db: str = "") -> str:
    """Return what a table depends on: this checkout's commit, the machine, and for a database
    its name and the commits and profiles of the runs that wrote its trials."""
    import platform

    from robench.process.provenance import git_revision

    commit = (git_revision() or "unknown")[:7]
    out = (f"*balanced_variance.py at commit {commit}; numpy {np.__version__}; "
           f"{platform.machine()} {platform.system()}")
    if store is not None:
        runs = store.runs()
        revs = sorted({(r.get("git_rev") or "?")[:10] for r in runs})
        profiles = sorted({str((r.get("config") or {}).get("profile", "?")) for r in runs})
        out += (f"; database {Path(db).name}: {len(runs)} runs, profile "
                f"{', '.join(profiles)}, commits {', '.join(revs)}")
    return out + "*"


def main(argv=None) -> None:
    from robench.plugins import make_registry
    from robench.storage.store import Store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db")
    ap.add_argument("--clusterer", default="kmeans")
    ap.add_argument("--pairs", action="store_true",
                    help="census-free variance of every pair's class-mean AccX difference")
    ap.add_argument("--interaction", type=int, metavar="N",
                    help="N random held-out tuples: the interaction part (no --db needed)")
    ap.add_argument("--dataset", default="digits", help="data set of --interaction")
    args = ap.parse_args(argv)
    if args.interaction:
        print(stamp())
        return interaction(args.dataset, args.interaction)
    if not args.db:
        ap.error("--db is required (except with --interaction)")
    store = Store(args.db, readonly=True)
    print(stamp(store, args.db))
    registry = make_registry(load_entrypoints=False)
    rows = [t for t in store.trials() if t["kind"] in ("exclusive", "inclusive")
            and t["status"] == "ok" and t["clusterer"] == args.clusterer
            and (t["kind"] == "inclusive"
                 or (t.get("params") or {}).get("held_out") == "balanced")]
    by, inclusive = defaultdict(dict), defaultdict(dict)
    for t in rows:
        (by if t["kind"] == "exclusive" else inclusive)[(t["dataset"], t["model"])][
            t["repeat"]] = t["accuracy"]
        if t["kind"] == "exclusive":
            by[(t["dataset"], t["model"])][t["repeat"]] = t
    if args.pairs:
        print("| data set | pair | repeats | mean | sd | census-free sd | t | census-free t | "
              "sd of the inclusive AccI difference |")
        print("|---|---|---|---|---|---|---|---|---|")
    else:
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
        for m in ([] if args.pairs else models):
            sb, sn = decompose(per[m], held, cycle)
            print(f"| {dataset} | per-class AccX, {m} | {n_cycles} | {sb:.2e} | {sn:.2e} | "
                  f"{(sb + sn) / sn:.1f}x |")
        for a, b in [(a, b) for i, a in enumerate(models) for b in models[i + 1:]]:
            diff = {r: [None if (u is None or v is None) else u - v
                        for u, v in zip(per[a][r], per[b][r])]
                    for r in per[a] if r in per[b]}
            if args.pairs:
                n, mean, full, free = census_free_variance(diff, held, cycle)
                ia, ib = inclusive[(dataset, a)], inclusive[(dataset, b)]
                d_incl = [ia[r] - ib[r] for r in diff if r in ia and r in ib]
                print(f"| {dataset} | {a} - {b} | {n} | {mean:+.4f} | {full ** 0.5:.4f} | "
                      f"{max(free, 0) ** 0.5:.4f} | {mean / (full / n) ** 0.5:+.1f} | "
                      f"{mean / (max(free, 1e-12) / n) ** 0.5:+.1f} | "
                      f"{np.std(d_incl, ddof=1):.4f} |")
                continue
            sb, sn = decompose(diff, held, cycle)
            print(f"| {dataset} | per-class AccX, {a} - {b} | {n_cycles} | {sb:.2e} | "
                  f"{sn:.2e} | {(sb + sn) / sn:.1f}x |")


if __name__ == "__main__":
    main()
