"""The contributor model at scale: merge, re-merge and site build on generated databases.

Generates C contributor databases (default 100) of realistic trials: each contributor ran ~10
models (9 of its own and one shared baseline, which every contributor ran honestly: same keys
and results, other run times and workers) on two generated data sets with the source-aware
protocol (inclusive, exclusive and random partitions, R repeats), ~1,000 trial rows each with
per-class accuracies, per-row predictions and a training history, scored by the real ``rho``
metric (score groups and scores, as ``robench run`` stores them). Then, each in its own
process (wall seconds and peak resident memory of that process):

1. merge all C into one database (scores recomputed from their trials, content checks on);
2. merge the same C again (must copy nothing);
3. build the site of the merged database (~9 C models).

Each contributor's database also holds its own verification record (10 trials), which the
merge copies. Then the same three with another robench revision (``--baseline``, default
dbd9482, the merge before issue 29, extracted with ``git archive`` into a temporary folder)
on the same databases as schema 3, which that robench reads. The table ends with the models,
conflicts and verification records of each merged database (the baseline counts the shared
model's honest duplicates as conflicts).

    python benchmarks/merge_scale.py                      # 100 contributors x ~1,000 trials
    python benchmarks/merge_scale.py --contributors 3     # a quick check that it works

Run it under `flock /tmp/robench-bench.lock` on a shared machine: it is CPU-bound.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from robench import hookimpl

DATASETS = ("gen-a", "gen-b")
REPO = Path(__file__).resolve().parent.parent
_N_MODELS = [10]  # models per contributor, set by main before the registry is built
_CONTRIBUTORS = [1]


def _dataset(name: str):
    from robench.data.dataset import Dataset

    rng = np.random.default_rng(len(name) + ord(name[-1]))
    n_classes, n_sources, per = 4, 3, 84  # ~1,000 rows
    groups = np.repeat(np.arange(n_classes * n_sources), per)
    y = groups // n_sources
    X = rng.normal(0, 3, (n_classes, 8))[y] + rng.normal(0, 1, (groups.size, 8))
    return Dataset(name, X, y, sources=groups)


def model_names(contributor: int, n_models: int) -> list:
    """Return a contributor's models: its own, and the baseline everyone runs."""
    return [f"c{contributor:03d}-m{j}" for j in range(n_models - 1)] + ["shared-baseline"]


@hookimpl
def register_datasets(register):
    from robench.specs import DatasetSpec

    for name in DATASETS:
        register(DatasetSpec(name, lambda name=name: _dataset(name), "generated", has_sources=True))


@hookimpl
def register_models(register):
    from robench.specs import ModelSpec

    names = {"shared-baseline"}
    for c in range(_CONTRIBUTORS[0]):
        names.update(model_names(c, _N_MODELS[0]))
    for name in sorted(names):
        register(ModelSpec(name, lambda ctx: None, "generated"))


def _trial_row(spec: dict, n_rows: int, contributor: int) -> dict:
    """Return a plausible result row of ``spec``: values seeded by its key (the same trial
    gives the same result whoever runs it), run time and worker by the contributor."""
    from robench.stats.bits import pack_bits

    rng = np.random.default_rng(int(spec["key"][:12], 16))
    base = 0.6 + 0.35 * rng.random()
    acc = base * (0.8 if spec["kind"] == "exclusive" else 1.0)
    correct = rng.random(n_rows) < acc
    n_test = n_rows // 5
    epochs = int(rng.integers(5, 15))
    rng.uniform(size=4)  # the draw per-class accuracies once took: later values stay the same
    return {
        **{k: spec[k] for k in ("key", "dataset", "model", "clusterer", "protocol", "kind",
                                "repeat", "seed", "params", "versions")},
        "spec": spec, "status": "ok", "accuracy": float(correct[:n_test].mean()),
        "all_accuracy": float(correct.mean()), "correct": pack_bits(correct),
        "train_accuracy": float(correct[n_test:].mean()), "val_accuracy": float(acc),
        # per class (test row i is of class i % 4): what the test rows' correctness gives, as
        # in a real trial (a leaderboard's validation reads one against the other)
        "per_class": [float(correct[:n_test][c::4].mean()) for c in range(4)],
        "n_train": n_rows - 2 * n_test, "n_val": n_test, "n_test": n_test,
        "epochs": epochs, "best_epoch": epochs - 2,
        "history": [{"epoch": e, "loss": float(1 / (e + 1)), "val_accuracy": float(acc)}
                    for e in range(epochs)],
        "seconds": float(rng.random() * 3 + contributor % 7),
        "worker": f"host-{contributor}:{1000 + contributor}", "device": "cpu",
        "finished_at": f"2026-11-{1 + contributor % 28:02d}T10:00:00+00:00",
    }


def generate(folder: Path, contributors: int, n_models: int, repeats: int) -> list:
    """Write the contributors' databases into ``folder``; return their paths."""
    from robench.run.config import RunConfig
    from robench.run.configurations import configuration_row
    from robench.plugins import make_registry
    from robench.run.runner import plan_run
    from robench.run.scoring import score_groups
    from robench.storage.store import Store, encode_row

    _N_MODELS[0], _CONTRIBUTORS[0] = n_models, contributors
    registry = make_registry(modules=[__name__], load_entrypoints=False)
    paths = []
    for c in range(contributors):
        cfg = RunConfig(datasets=list(DATASETS), models=model_names(c, n_models),
                        clusterers=["kmeans"], metrics=["rho"], repeats=repeats, k=3,
                        settings={}).resolve(registry)
        plan = plan_run(cfg, registry)
        path = folder / f"contributor-{c:03d}.db"
        with Store(path) as store:
            run_id = store.start_run(command=f"robench run (contributor {c})", seed=0,
                                     config=cfg.to_dict(),
                                     plugin_versions=registry.plugin_versions())
            for description in plan.configurations.values():
                store.save_configuration(configuration_row(description, run_id))
            rows = [encode_row("trials", {**_trial_row(s, 1008, c), "run_id": run_id})
                    for s in plan.specs.values()]
            with store._write():
                store.db["trials"].insert_all(rows, pk="key")
            versions = {"rho": registry.component_version("metrics", "rho")}
            score_groups(plan.groups, store, run_id, versions=versions)
            store.finish_run(run_id, "ok", n_planned=len(rows), n_ok=len(rows))
            _self_verification(store, c, list(plan.specs.values()))
        paths.append(path)
    return paths


def _self_verification(store, contributor: int, specs: list) -> None:
    """Record the contributor's own verification of 10 of its trials (all matched), as
    ``robench verify`` would: merge copies these records."""
    from robench.exchange.verify import Verification, sample_trials
    from robench.process.provenance import run_environment
    from robench.storage.verification import save_verification

    picked = sample_trials([{**s, "model": s["model"]} for s in specs], 10, contributor)
    result = Verification(host=f"host-{contributor}", device="cpu",
                          started_at="2026-11-27T10:00:00+00:00")
    result.trials = [{**{k: s[k] for k in ("key", "dataset", "model", "clusterer", "protocol",
                                           "kind", "repeat")},
                      "outcome": "match", "mode": "exact", "differences": []} for s in picked]
    save_verification(store, result, seed=contributor, contributor=None,
                      environment=run_environment(), plugin_versions={},
                      finished_at="2026-11-27T10:05:00+00:00")


_MEASURE = r"""
import json, resource, sys, time
t0 = time.perf_counter()
{body}
print(json.dumps({{"seconds": time.perf_counter() - t0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
# the 0.1 import paths: they import in this tree too (forwarded) and in a baseline before 0.2
_MERGE = """
from robench.merge import merge_databases
merge_databases(sys.argv[2:], sys.argv[1])
"""
_SITE = """
from robench.site import build_site
from robench.store import Store
with Store(sys.argv[1], readonly=True) as store:
    build_site(store, sys.argv[2])
"""


def measure(body: str, args: list, pythonpath: str) -> dict:
    """Run ``body`` in a fresh Python with ``pythonpath``; return its seconds and peak RSS."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    # `python -c` puts the working directory first on sys.path: run it where no robench is
    out = subprocess.run([sys.executable, "-c", _MEASURE.format(body=body), *map(str, args)],
                         env=env, capture_output=True, text=True, check=False,
                         cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise SystemExit(f"failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def as_schema_3(paths: list, folder: Path) -> list:
    """Return copies of schema-4 databases as schema 3 (without its two new tables), which a
    robench from before issue 29 merges."""
    import sqlite3

    folder.mkdir()
    out = []
    for path in paths:
        copy = folder / path.name
        with sqlite3.connect(path) as a, sqlite3.connect(copy) as b:
            a.backup(b)
        conn = sqlite3.connect(copy)
        conn.execute("DROP TABLE verifications")
        conn.execute("DROP TABLE merged_sources")
        conn.execute("PRAGMA user_version = 3")
        conn.commit()
        conn.close()
        out.append(copy)
    return out


def extract(revision: str, into: Path) -> Path:
    """Extract ``revision`` of this repository into ``into``; return the folder."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contributors", type=int, default=100)
    parser.add_argument("--models", type=int, default=10, help="models per contributor")
    parser.add_argument("--repeats", type=int, default=16,
                        help="repeats per partition kind (3 kinds x 2 data sets x models)")
    parser.add_argument("--baseline", default="dbd9482",
                        help="robench revision whose merge to compare with ('' for none)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="robench-merge-bench-") as tmp:
        tmp = Path(tmp)
        (tmp / "src").mkdir()
        t0 = time.perf_counter()
        sources = generate(tmp / "src", args.contributors, args.models, args.repeats)
        n_trials = sum(_count(p, "trials") for p in sources)
        print(f"generated {len(sources)} contributor databases, {n_trials:,} trials "
              f"({n_trials / len(sources):,.0f} each), {args.models} models each, in "
              f"{time.perf_counter() - t0:.0f} s")
        trees = {"this tree": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}
        if args.baseline:
            trees[f"merge at {args.baseline}"] = str(extract(args.baseline,
                                                             Path(tempfile.mkdtemp(dir=tmp))))
        inputs = {"this tree": sources}
        if args.baseline:  # the same databases as that robench wrote them (schema 3)
            inputs[f"merge at {args.baseline}"] = as_schema_3(sources, tmp / "schema3")
        rows = []
        for label, path in trees.items():
            target = tmp / f"merged-{len(rows)}.db"
            first = measure(_MERGE, [target, *inputs[label]], path)
            again = measure(_MERGE, [target, *inputs[label]], path)
            site = measure(_SITE, [target, tmp / f"site-{len(rows)}"], path)
            models = _count(target, "DISTINCT model", "scores")
            rows.append((label, first, again, site, models, _count(target, "conflicts"),
                         _count(target, "verifications")))
        print(f"{'':<22} {'merge s':>8} {'MB':>6} {'re-merge s':>11} {'MB':>6} "
              f"{'site s':>7} {'MB':>6} {'models':>7} {'conflicts':>10} {'verifications':>14}")
        for label, first, again, site, models, conflicts, checks in rows:
            print(f"{label:<22} {first['seconds']:>8.1f} {first['rss_mb']:>6.0f} "
                  f"{again['seconds']:>11.1f} {again['rss_mb']:>6.0f} {site['seconds']:>7.1f} "
                  f"{site['rss_mb']:>6.0f} {models:>7} {conflicts:>10} {checks:>14}")
    return 0


def _count(path: Path, what: str, table: str = None) -> int:
    import sqlite3

    table = table or what
    what = "*" if table == what else what
    conn = sqlite3.connect(path)
    try:
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        return conn.execute(f"SELECT count({what}) FROM {table}").fetchone()[0] if exists else 0
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
