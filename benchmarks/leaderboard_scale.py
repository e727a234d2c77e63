"""Leaderboard site build time and size on generated databases of growing size.

Writes databases of M models x 5 data sets (rho with its three accuracies, purity-ratio with
Model_ACC, and coverage with its per-mix accuracies for every model: 9 score rows per model
and data set), builds the site from each and prints one table: models, score rows, build
seconds (wall and this process's CPU: on a shared machine the CPU time is the one to read),
milliseconds per model, site size, and the index size (which `--top` keeps flat).

    python benchmarks/leaderboard_scale.py                  # M = 250, 500, 1000
    python benchmarks/leaderboard_scale.py --models 100 1000 --top 20

Run it under `flock /tmp/robench-bench.lock` on a shared machine: it is CPU-bound.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout (tests.helpers)

DATASETS = ("digits", "mnist-5k", "synthetic-sources", "gen-a", "gen-b")
MIXES = ("0-100", "30-70", "50-50", "70-30", "100-0")


def generate(store, n_models: int, seed: int = 0) -> int:
    """Fill ``store`` with plausible scores of ``n_models`` models on 5 data sets; return rows."""
    from tests.helpers import save_scores  # stores scores as a run would, with its ranks
    from robench.specs import Score

    rng = random.Random(seed)
    run_id = store.start_run(command="generated", seed=seed, config={"profile": "quick"},
                             plugin_versions={})
    scores = []
    for dataset in DATASETS:
        for m in range(n_models):
            model = f"model-{m:04d}"
            acc_i = rng.uniform(0.6, 0.99)
            acc_x = acc_i * rng.uniform(0.7, 1.0)
            rho, half = acc_x / acc_i, rng.uniform(0.005, 0.05)
            scores += [
                Score(dataset, model, "kmeans", "rho", "rho", rho, rho - half, rho + half, n=3),
                Score(dataset, model, "kmeans", "rho", "acc_exclusive", acc_x, n=3),
                Score(dataset, model, "kmeans", "rho", "acc_inclusive", acc_i, n=3),
                Score(dataset, model, "kmeans", "rho", "acc_random", acc_i + 0.01, n=3),
                Score(dataset, model, "", "purity-ratio", "purity-ratio", rng.uniform(0.3, 0.9)),
                Score(dataset, model, "", "purity-ratio", "model_acc", acc_i),
                Score(dataset, model, "", "coverage", "coverage", acc_i * 0.8,
                      acc_i * 0.7, acc_i * 0.9, n=2,
                      details={"by_mix": {mix: acc_i * (0.5 + 0.1 * i)
                                          for i, mix in enumerate(MIXES)}, "repeats": 2}),
                Score(dataset, model, "", "coverage", "model_acc", acc_i, n=2),
                Score(dataset, model, "", "coverage", "ep_min", 0.9, n=2),
            ]
    save_scores(store, scores, run_id, {"rho": ("2", "rho"), "purity-ratio": ("2", "p"),
                                        "coverage": ("4", "coverage")})
    store.finish_run(run_id, "ok")
    return len(scores)


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    from robench.present.site import build_site
    from robench.storage.store import Store

    print(f"{'models':>7} {'scores':>8} {'build s':>8} {'cpu s':>6} {'ms/model':>9} "
          f"{'site MB':>8} {'index KB':>9} {'files':>6}")
    for n in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            with Store(tmp / "gen.db") as store:
                rows = generate(store, n)
                start, cpu = time.perf_counter(), time.process_time()
                index = build_site(store, tmp / "site", top=args.top)
                seconds = time.perf_counter() - start
                cpu = time.process_time() - cpu
            site = tmp / "site"
            files = sum(1 for p in site.rglob("*") if p.is_file())
            print(f"{n:>7} {rows:>8} {seconds:>8.1f} {cpu:>6.1f} {1000 * seconds / n:>9.1f} "
                  f"{folder_size(site) / 1e6:>8.1f} {index.stat().st_size / 1e3:>9.1f} "
                  f"{files:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
