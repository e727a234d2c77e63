"""robench performance benchmark: prints one table of figures measured side by side in one run.

Sections (each can be skipped):

* naive   - the source-aware protocol (mnist-5k; mlp and cnn-2; R repeats of inclusive,
            exclusive and random) through robench's process executor vs a naive reference
            written here the way a researcher would: a sequential PyTorch loop per trial over
            a TensorDataset DataLoader with default threads, same epochs, same early-stopping
            rule and the same partitions. Reports the speed-up and whether the accuracies agree.
* flops   - achieved training throughput of those robench trials in FLOP/s against this
            machine's peak, measured as a large fp32 matmul on all cores in the same run.
* all     - `robench run --all` (default profile): cold wall time (empty cache and database),
            warm rerun, and the speed-up from 1 to 2 workers (empty database, warm cache).
* scale   - how time grows with data set size (digits, mnist-5k, synthetic-sources at 20k and
            50k samples) and with the number of repeats.
* help    - `robench --help` wall time.

Usage:
    python benchmarks/bench.py                      # everything (about 20-30 minutes on 2 cores)
    python benchmarks/bench.py --only naive --repeats 3
    python benchmarks/bench.py --skip all --skip scale
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_plugins.py: the larger synthetic data sets
sys._robench_called_from_test = True  # never pick up installed third-party plugins here

GOALS = {
    "naive": ">= 3x over the naive loop",
    "workers": ">= 1.8x from 1 to 2 workers",
    "warm": "warm rerun of run --all < 5 s",
    "help": "robench --help < 1 s",
}


# ------------------------------------------------------------------------------------------
# naive reference


def naive_trial(module_fn, X, y, fit_idx, val_idx, test_idx, *, seed, budget):
    """Train like a typical research script: DataLoader over a TensorDataset, default threads."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = module_fn()
    opt = torch.optim.Adam(model.parameters(), lr=budget["lr"])
    loss_fn = nn.CrossEntropyLoss()
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy(y)
    train = DataLoader(TensorDataset(Xt[fit_idx], yt[fit_idx]), batch_size=budget["batch_size"],
                       shuffle=True)
    val = DataLoader(TensorDataset(Xt[val_idx], yt[val_idx]), batch_size=256)
    test = DataLoader(TensorDataset(Xt[test_idx], yt[test_idx]), batch_size=256)

    def evaluate(loader):
        model.eval()
        correct = total = 0
        loss = 0.0
        with torch.no_grad():
            for xb, yb in loader:
                out = model(xb)
                loss += loss_fn(out, yb).item() * len(yb)
                correct += (out.argmax(1) == yb).sum().item()
                total += len(yb)
        return correct / total, loss / total

    best, best_state, stale = None, None, 0
    for _epoch in range(budget["max_epochs"]):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
        acc, loss = evaluate(val)
        key = (acc, -loss)  # same rule as robench: val accuracy, ties to lower val loss
        if best is None or key > best:
            best, stale = key, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= budget["patience"]:
                break
    model.load_state_dict(best_state)
    return evaluate(test)[0]


def bench_naive(repeats: int, jobs: int, rows: list, extra: dict):
    import torch

    from robench.builtin.datasets import load_mnist_5k
    from robench.builtin.models import CNN_CHANNELS
    from robench.config import RunConfig
    from robench.plugins import make_registry
    from robench.families.source_aware import protocol as source_aware
    from robench.seeds import derived_seed
    from robench.runner import execute
    from robench.splitters import KIND_CODES
    from robench.store import Store
    from robench.train import MLP, ConvNet

    reg = make_registry(load_entrypoints=False)
    cfg = RunConfig(datasets=["mnist-5k"], models=["mlp", "cnn-2"], clusterers=["kmeans"],
                    metrics=["rho"], repeats=repeats, executor="process", jobs=jobs)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        # find the sources first so both sides time training only
        execute(RunConfig(datasets=["mnist-5k"], models=["svm"], clusterers=["kmeans"],
                          metrics=["rho"], repeats=1, executor="local"), reg, store)
        t0 = time.perf_counter()
        report = execute(cfg, reg, store)
        robench_s = time.perf_counter() - t0
        trials = [t for t in store.trials(model=["mlp", "cnn-2"]) if t["status"] == "ok"]
        assert not report.failed, report.failed[:1]

    ds = load_mnist_5k()
    shape = ds.image_shape
    modules = {
        "mlp": lambda: MLP(ds.n_features, ds.n_classes, hidden=(256, 128)),
        "cnn-2": lambda: ConvNet(shape, ds.n_classes, channels=CNN_CHANNELS[:2], fc_width=128),
    }
    naive = {}
    torch.set_num_threads(os.cpu_count() or 1)  # a research script leaves torch's default
    t0 = time.perf_counter()
    for t in trials:
        fit_idx, val_idx, test_idx = source_aware.partition(t["spec"], ds, reg)
        seed = derived_seed(t["seed"], t["repeat"], KIND_CODES[t["kind"]])
        acc = naive_trial(modules[t["model"]], ds.X, ds.y, fit_idx, val_idx, test_idx,
                          seed=seed, budget=t["params"]["train"])
        naive[t["key"]] = acc
    naive_s = time.perf_counter() - t0

    for model in ("mlp", "cnn-2"):
        for kind in ("inclusive", "exclusive", "random"):
            mine = [t["accuracy"] for t in trials if t["model"] == model and t["kind"] == kind]
            ref = [naive[t["key"]] for t in trials if t["model"] == model and t["kind"] == kind]
            diff = np.mean(mine) - np.mean(ref)
            se = np.sqrt(np.var(mine, ddof=1) / len(mine) + np.var(ref, ddof=1) / len(ref)) \
                if len(mine) > 1 else float("nan")
            verdict = "same within noise" if abs(diff) <= 2 * se + 0.005 else "DIFFERENT"
            rows.append((f"accuracy {model} {kind}",
                         f"robench {np.mean(mine):.4f} vs naive {np.mean(ref):.4f}",
                         f"diff {diff:+.4f}, 2 SE {2 * se:.4f}: {verdict}"))
    ratio = naive_s / robench_s
    rows.append(("source-aware mnist-5k mlp+cnn-2",
                 f"robench {robench_s:.1f} s ({len(trials)} trials, {jobs} workers) vs naive "
                 f"{naive_s:.1f} s", f"speed-up {ratio:.2f}x (goal {GOALS['naive']})"))
    extra["trials"] = trials
    extra["robench_s"] = robench_s


# ------------------------------------------------------------------------------------------
# FLOP/s


def forward_flops(module, image_shape, n_features) -> float:
    """Return the forward FLOPs of one sample (2 per multiply-add of conv and linear layers)."""
    import torch
    from torch import nn

    total = [0.0]

    def hook(mod, inp, out):
        if isinstance(mod, nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
            total[0] += 2.0 * out.numel() * k
        elif isinstance(mod, nn.Linear):
            total[0] += 2.0 * mod.in_features * mod.out_features * (out.numel() // mod.out_features)

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        module(torch.zeros(1, n_features))
    for h in handles:
        h.remove()
    return total[0]


def peak_flops() -> float:
    """Return this machine's fp32 matmul FLOP/s on all cores (best of 5, 2048^3)."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


def bench_flops(rows: list, extra: dict):
    from robench.builtin.datasets import load_mnist_5k
    from robench.builtin.models import CNN_CHANNELS
    from robench.train import MLP, ConvNet

    trials = extra.get("trials")
    if not trials:
        rows.append(("training FLOP/s", "needs the naive section", ""))
        return
    ds = load_mnist_5k()
    fwd = {
        "mlp": forward_flops(MLP(ds.n_features, ds.n_classes), ds.image_shape, ds.n_features),
        "cnn-2": forward_flops(ConvNet(ds.image_shape, ds.n_classes, channels=CNN_CHANNELS[:2]),
                               ds.image_shape, ds.n_features),
    }
    total = 0.0
    for t in trials:
        # training step ~ 3x forward (forward + backward for inputs and weights); per epoch
        # also one forward over validation; finally one forward over the whole data set.
        per_epoch = 3 * t["n_train"] + t["n_val"]
        total += fwd[t["model"]] * (t["epochs"] * per_epoch + t["n_train"] + ds.n_samples)
    achieved = total / extra["robench_s"]
    peak = peak_flops()
    rows.append(("training throughput (robench trials)",
                 f"{achieved / 1e9:.2f} GFLOP/s achieved; peak fp32 matmul {peak / 1e9:.1f} "
                 "GFLOP/s", f"{100 * achieved / peak:.1f}% of peak"))


# ------------------------------------------------------------------------------------------
# robench run --all


def timed(cmd, env, output: list = None) -> float:
    """Return the wall time of a command; its stdout is appended to ``output`` if given."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    if output is not None:
        output.append(proc.stdout)
    return dt


def bench_run_all(rows: list, keep=None):
    robench = [sys.executable, "-m", "robench"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ROBENCH_CACHE_DIR": f"{tmp}/cache"}
        printed = []
        cold = timed(robench + ["run", "--all", "--db", f"{tmp}/a.db"], env, printed)
        if keep:  # the cold run's database and what it printed, e.g. to publish the leaderboard
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(f"{tmp}/a.db", Path(keep) / "robench.db")
            (Path(keep) / "run-all.txt").write_text(printed[0])
        warm = timed(robench + ["run", "--all", "--db", f"{tmp}/a.db"], env)
        one = timed(robench + ["run", "--all", "-j", "1", "--db", f"{tmp}/b.db"], env)
        two = timed(robench + ["run", "--all", "-j", "2", "--db", f"{tmp}/c.db"], env)
    rows.append(("run --all, cold (empty cache and db)", f"{cold:.1f} s", "goal < 600 s"))
    rows.append(("run --all, warm rerun", f"{warm:.2f} s", f"goal: {GOALS['warm']}"))
    rows.append(("run --all, 1 vs 2 workers (warm cache)", f"{one:.1f} s vs {two:.1f} s",
                 f"speed-up {one / two:.2f}x (goal {GOALS['workers']})"))


# ------------------------------------------------------------------------------------------
# scaling


def bench_scale(jobs: int, rows: list):
    from robench.config import RunConfig
    from robench.plugins import make_registry
    from robench.runner import execute
    from robench.store import Store

    reg = make_registry(modules=["bench_plugins"], load_entrypoints=False)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("digits", "mnist-5k", "synthetic-20k", "synthetic-50k"):
            n = reg.load_dataset(name).n_samples
            store = Store(Path(tmp) / f"{name}.db")
            t0 = time.perf_counter()
            execute(RunConfig(datasets=[name], models=["mlp"], clusterers=["kmeans"],
                              metrics=["rho"], repeats=2, executor="process", jobs=jobs),
                    reg, store)
            dt = time.perf_counter() - t0
            rows.append((f"size: {name} (n={n}), mlp, 6 trials", f"{dt:.1f} s",
                         f"{1e3 * dt / n:.2f} ms per sample (incl. clustering)"))
        for r in (1, 2, 4, 8):
            store = Store(Path(tmp) / f"rep{r}.db")
            t0 = time.perf_counter()
            execute(RunConfig(datasets=["digits"], models=["mlp", "cnn-1"], clusterers=["kmeans"],
                              metrics=["rho"], repeats=r, executor="process", jobs=jobs),
                    reg, store)
            dt = time.perf_counter() - t0
            rows.append((f"repeats: digits, mlp+cnn-1, R={r} ({6 * r} trials)", f"{dt:.1f} s",
                         f"{dt / (6 * r):.2f} s per trial"))


def bench_help(rows: list):
    cmd = shutil.which("robench") or sys.executable
    args = [cmd, "--help"] if cmd.endswith("robench") else [cmd, "-m", "robench", "--help"]
    best = min(timed(args, dict(os.environ)) for _ in range(5))
    rows.append(("robench --help (best of 5)", f"{best:.2f} s", f"goal: {GOALS['help']}"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sections = ["naive", "flops", "all", "scale", "help"]
    p.add_argument("--only", action="append", choices=sections, help="run only these sections")
    p.add_argument("--skip", action="append", choices=sections, default=[], help="skip sections")
    p.add_argument("--repeats", type=int, default=10, help="repeats for the naive comparison")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--keep", metavar="DIR", default=None,
                   help="all: keep the cold run's database and printed output in DIR")
    args = p.parse_args()
    chosen = [s for s in (args.only or sections) if s not in args.skip]
    if "flops" in chosen and "naive" not in chosen:
        chosen.insert(0, "naive")

    import platform

    import robench

    rows, extra = [], {}
    t0 = time.perf_counter()
    for section in chosen:
        print(f"... {section}", file=sys.stderr, flush=True)
        if section == "naive":
            bench_naive(args.repeats, args.jobs, rows, extra)
        elif section == "flops":
            bench_flops(rows, extra)
        elif section == "all":
            bench_run_all(rows, args.keep)
        elif section == "scale":
            bench_scale(args.jobs, rows)
        elif section == "help":
            bench_help(rows)
    width = max(len(r[0]) for r in rows)
    w2 = max([len("measured")] + [len(r[1]) for r in rows])
    from robench.provenance import platform_description

    cpu = platform_description().partition("; CPU: ")[2]
    print(f"robench {robench.__version__} benchmark on {platform.node()}: {os.cpu_count()} cores "
          f"({cpu}), python {platform.python_version()}, "
          f"{time.perf_counter() - t0:.0f} s in all")
    print(f"{'what':<{width}}  {'measured':<{w2}}  verdict")
    print(f"{'-' * width}  {'-' * w2}  {'-' * 30}")
    for what, measured, verdict in rows:
        print(f"{what:<{width}}  {measured:<{w2}}  {verdict}")


if __name__ == "__main__":
    main()
