"""The paper CNNs' memory format, old vs new, alternating in one process (one torch thread).

Old: ``robench/families/shifted_cv/cnns.py`` at ``--old-rev`` (NCHW convolutions around a
channels-last pool: a conversion on each side). New: this checkout's (channels-last end to
end). Each round trains every chosen model for ``--epochs`` epochs on mnist-5k rows (batch
64, the paper profile's) and predicts 1,000 rows, old then new, so the machine's load hits
both alike; prints the seconds of every round, the median ratio, and how many
``aten::copy_`` calls one training step makes.

    python benchmarks/paper_cnns.py --rounds 3 --models lenet alexnet 3conv3fc
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = "robench/families/shifted_cv/cnns.py"


def old_module(rev: str):
    """Import cnns.py as it was at git revision ``rev`` (a module of its own)."""
    src = subprocess.run(["git", "-C", str(HERE.parent), "show", f"{rev}:{MODULE}"],
                         capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "cnns_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("cnns_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(mod, name: str):
    bayes = name.startswith("bayesian-")
    arch = name.removeprefix("bayesian-")
    return (lambda: mod.BayesianPaperCNN(arch, 10)) if bayes else (lambda: mod.PaperCNN(arch, 10))


def copies_per_step(factory, X, y) -> int:
    """Return the aten::copy_ calls of one forward + backward step on a 64-row batch."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    net = factory()
    xb, yb = torch.from_numpy(X[:64]), torch.from_numpy(y[:64])
    loss = torch.nn.functional.cross_entropy(net(xb), yb)  # warm-up
    loss.backward()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss = torch.nn.functional.cross_entropy(net(xb), yb)
        if hasattr(net, "penalty"):
            loss = loss + net.penalty(len(X))
        loss.backward()
    return sum(e.count for e in prof.key_averages() if e.key == "aten::copy_")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old-rev", default="8856819", help="git revision of the old cnns.py")
    p.add_argument("--models", nargs="+", default=["lenet", "alexnet", "3conv3fc",
                                                   "bayesian-lenet", "bayesian-alexnet",
                                                   "bayesian-3conv3fc"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--rows", type=int, default=2000, help="training rows")
    args = p.parse_args()

    import torch

    torch.set_num_threads(1)
    sys._robench_called_from_test = True
    from robench.families.shifted_cv import cnns as new
    from robench.plugins import make_registry
    from robench.learn.train import TorchClassifier

    old = old_module(args.old_rev)
    data = make_registry(load_entrypoints=False).load_dataset("mnist-5k")
    X, y = data.X.astype("float32"), data.y
    fit, val, test = slice(0, args.rows), slice(args.rows, args.rows + 400), slice(3000, 4000)
    print(f"paper CNNs, old ({args.old_rev}) vs new, {args.rounds} rounds alternating, "
          f"{args.epochs} epoch(s) on {args.rows} rows + predict 1,000, one thread")
    for name in args.models:
        times = {"old": [], "new": []}
        for _ in range(args.rounds):
            for side, mod in (("old", old), ("new", new)):
                clf = TorchClassifier(build(mod, name), seed=0, max_epochs=args.epochs,
                                      patience=args.epochs, batch_size=64, lr=1e-3)
                t0 = time.perf_counter()
                clf.fit(X[fit], y[fit], X[val], y[val])
                clf.predict(X[test])
                times[side].append(time.perf_counter() - t0)
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        copies = {s: copies_per_step(build(m, name), X, y) for s, m in (("old", old),
                                                                        ("new", new))}
        print(f"{name:18s} old {', '.join(f'{t:.2f}' for t in times['old'])} s | new "
              f"{', '.join(f'{t:.2f}' for t in times['new'])} s | median {o / n:.2f}x | "
              f"copy_ per step {copies['old']} -> {copies['new']}", flush=True)


if __name__ == "__main__":
    main()
