"""robench performance benchmark: prints one table of figures measured side by side in one run.

Sections (each can be skipped):

* naive   - the source-aware protocol (mnist-5k; mlp and cnn-2; R repeats of inclusive,
            exclusive and random) through robench's process executor vs a naive reference
            written here the way a researcher would: a sequential PyTorch loop per trial over
            a TensorDataset DataLoader with default threads, same epochs, same early-stopping
            rule and the same partitions, cnn-2 as a textbook NCHW module (same layers, same
            initial weights); and again with robench's own (channels-last) module, which
            isolates the harness's gain. Reports the speed-ups and whether the accuracies
            agree. With --old CHECKOUT the same trials also run on that checkout's robench;
            with --rounds N both robench sides run N times, alternating; old and new are
            compared round by round (the median round is reported).
* startup - the first vs the next cnn-2 trial in a fresh process (old code and this one).
* adaptive - mnist-5k x the five built-in models: --until decided (max --adaptive-repeats 32,
            --adaptive-precision 0.025) vs the fixed number of repeats that reaches the same
            precision (derived from the measured paired spreads), in one store: trials,
            recorded trial-seconds, rankings, agreement (docs/adaptive.md).
* projection - run --all --profile paper projected from the planner's plan: one shortened trial
            of every (protocol, data set, model) group measured here (benchmarks/projection.py).
* flops   - achieved training throughput of those robench trials in FLOP/s against this
            machine's peak, measured as a large fp32 matmul on all cores in the same run.
* all     - `robench run --all` (default profile): cold wall time (empty cache and database),
            warm rerun, and the speed-up from 1 to 2 workers (empty database, warm cache).
* scale   - how time grows with data set size (digits, mnist-5k, synthetic-sources at 20k and
            50k samples) and with the number of repeats.
* memory  - CIFAR-10-sized data (60,000 x 3 x 32 x 32): peak RSS of the driver and of each
            worker (anonymous and file-backed), PSS, USS, the torch-import baseline, seconds
            per trial, the float32 path against the compact (uint8,
            memory-mapped) path in one run (benchmarks/memory.py).
* svm     - the svm model on mnist-5k (fit on 3,600 rows, one thread): libsvm's row-by-row
            predict against robench's block-kernel predict of all 5,000 rows, the same fitted
            model in one run; seconds (best of 3), the ratio, and whether the labels agree.
* help    - `robench --help` wall time.
* batched - trials of one model trained together (robench.learn.batched) vs one at a time, the
            same trials in one run: mnist-5k, mlp and cnn-2, --batched-repeats repeats of each
            partition kind, process executor, --batched-device (default cpu); seconds,
            trials/s, the ratio, mean accuracies.

Usage:
    python benchmarks/bench.py                      # everything (about an hour on 2 cores idle: the projection ~26 min, adaptive ~9 min)
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
    "naive": ">= 1.6x over the naive loop",
    "old": ">= 1.3x the old code",
    "adaptive": "same ranking at <= 1/3 of the fixed design's trials",
    "workers": ">= 1.8x from 1 to 2 workers",
    "warm": "warm rerun of run --all < 2 s",
    "help": "robench --help < 0.5 s",
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


def robench_part(repeats: int, jobs: int) -> dict:
    """Run the naive section's trials through robench (this interpreter's robench): seconds.

    Also called as ``bench.py --robench-part R J`` under another checkout's PYTHONPATH (the
    old code, ``--old``), so both sides run the same trials in the same benchmark run.
    """
    from robench.run.config import RunConfig
    from robench.plugins import make_registry
    from robench.run.runner import execute
    from robench.storage.store import Store

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
        seconds = time.perf_counter() - t0
        trials = [t for t in store.trials(model=["mlp", "cnn-2"]) if t["status"] == "ok"]
        assert not report.failed, report.failed[:1]
    return {"seconds": seconds, "trials": trials,
            "trial_seconds": {m: sum(t["seconds"] for t in trials if t["model"] == m)
                              for m in ("mlp", "cnn-2")}}


def old_robench_part(old: str, repeats: int, jobs: int) -> dict:
    """Run :func:`robench_part` with the robench of checkout ``old`` (a subprocess)."""
    import json

    env = {**os.environ, "PYTHONPATH": old}
    proc = subprocess.run([sys.executable, __file__, "--robench-part", str(repeats), str(jobs)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"old robench ({old}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_naive(repeats: int, jobs: int, rows: list, extra: dict, old=None, rounds: int = 1):
    import torch

    from robench.builtin.datasets import load_mnist_5k
    from robench.builtin.models import CNN_CHANNELS
    from robench.plugins import make_registry
    from robench.families.source_aware import protocol as source_aware
    from robench.stats.seeds import derived_seed
    from robench.data.splitters import KIND_CODES
    from robench.learn.train import MLP, ConvNet

    reg = make_registry(load_entrypoints=False)
    # With --old: the old code's run and this checkout's alternate, `rounds` times (load on a
    # shared machine drifts within a run); then the naive loop. Old and new are compared
    # round by round (each pair ran back to back) and the round with the median ratio is
    # reported; the naive loop is compared with this checkout's median wall time.
    olds, news = [], []
    for _ in range(max(1, rounds)):
        if old:
            olds.append(old_robench_part(old, repeats, jobs))
        news.append(robench_part(repeats, jobs))
    part = sorted(news, key=lambda p: p["seconds"])[(len(news) - 1) // 2]  # the (lower) median
    robench_s, trials = part["seconds"], part["trials"]
    walls = {"old": [p["seconds"] for p in olds], "new": [p["seconds"] for p in news]}
    pairs = sorted(zip(olds, news), key=lambda on: on[0]["seconds"] / on[1]["seconds"])
    if old:
        extra["old"], paired = pairs[(len(pairs) - 1) // 2]  # the (lower) median ratio
    ds = load_mnist_5k()
    shape = ds.image_shape
    def textbook_cnn():
        """cnn-2 as a research script writes it: NCHW, nn.MaxPool2d; robench's layers and
        their creation order (so the same initial weights), pool before ReLU like ConvNet."""
        from torch import nn

        c1, c2 = CNN_CHANNELS[:2]
        h, w = shape[1] // 4, shape[2] // 4
        return nn.Sequential(
            nn.Unflatten(1, tuple(shape)),
            nn.Conv2d(shape[0], c1, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
            nn.Flatten(), nn.Linear(c2 * h * w, 128), nn.ReLU(), nn.Linear(128, ds.n_classes))

    modules = {
        "mlp": lambda: MLP(ds.n_features, ds.n_classes, hidden=(256, 128)),
        "cnn-2": textbook_cnn,
    }
    naive = {}
    torch.set_num_threads(os.cpu_count() or 1)  # a research script leaves torch's default
    seconds = {"mlp": 0.0, "cnn-2": 0.0}

    def naive_loop(module_for, models):
        out = {}
        for t in trials:
            if t["model"] not in models:
                continue
            fit_idx, val_idx, test_idx = source_aware.partition(t["spec"], ds, reg)
            seed = derived_seed(t["seed"], t["repeat"], KIND_CODES[t["kind"]])
            t1 = time.perf_counter()
            out[t["key"]] = naive_trial(module_for[t["model"]], ds.X, ds.y, fit_idx, val_idx,
                                        test_idx, seed=seed, budget=t["params"]["train"])
            seconds[t["model"]] += time.perf_counter() - t1
        return out

    t0 = time.perf_counter()
    naive = naive_loop(modules, ("mlp", "cnn-2"))
    naive_s = time.perf_counter() - t0
    naive_mlp_s = seconds["mlp"]
    # the same loop with robench's own (channels-last) cnn-2 module: the harness's gain alone
    seconds["cnn-2"] = 0.0
    naive_loop({"cnn-2": lambda: ConvNet(shape, ds.n_classes, channels=CNN_CHANNELS[:2],
                                         fc_width=128)}, ("cnn-2",))
    same_module_s = naive_mlp_s + seconds["cnn-2"]

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
    if len(news) > 1:
        rows.append((f"robench runs of the naive section's trials ({len(news)} rounds)",
                     " / ".join(f"{side} " + ", ".join(f"{w:.1f}" for w in ws) + " s"
                                for side, ws in walls.items() if ws),
                     "alternating old, new; " + ("old/new per round " + ", ".join(
                         f"{o['seconds'] / n['seconds']:.2f}x" for o, n in zip(olds, news))
                         + ": the median round is below" if olds else "the median is below")))
    rows.append(("source-aware mnist-5k mlp+cnn-2",
                 f"robench {robench_s:.1f} s ({len(trials)} trials, {jobs} workers) vs naive "
                 f"{naive_s:.1f} s", f"speed-up {ratio:.2f}x (goal {GOALS['naive']})"))
    rows.append(("... naive loop with robench's cnn-2 module",
                 f"robench {robench_s:.1f} s vs naive {same_module_s:.1f} s",
                 f"speed-up {same_module_s / robench_s:.2f}x (harness alone, same kernels)"))
    extra["trials"] = trials
    extra["robench_s"] = robench_s
    extra["new_trial_seconds"] = part["trial_seconds"]
    if old:
        b = extra["old"]
        rows.append(("same trials, old code (--old) vs this checkout",
                     f"old {b['seconds']:.1f} s vs new {paired['seconds']:.1f} s wall; worker "
                     f"seconds per trial mlp {b['trial_seconds']['mlp'] / (3 * repeats):.2f} -> "
                     f"{paired['trial_seconds']['mlp'] / (3 * repeats):.2f}, cnn-2 "
                     f"{b['trial_seconds']['cnn-2'] / (3 * repeats):.2f} -> "
                     f"{paired['trial_seconds']['cnn-2'] / (3 * repeats):.2f}",
                     f"throughput {b['seconds'] / paired['seconds']:.2f}x (goal {GOALS['old']})"))
        for model in ("mlp", "cnn-2"):
            o = {(t["kind"], t["repeat"]): t["accuracy"] for t in b["trials"]
                 if t["model"] == model}
            n = {(t["kind"], t["repeat"]): t["accuracy"] for t in trials if t["model"] == model}
            same = sum(o[k] == n.get(k) for k in o)
            rows.append((f"old vs new results, {model}", f"{same} of {len(o)} trials with "
                         "identical test accuracy",
                         "model version unchanged" if model == "mlp" else
                         "model version 3: channels-last kernels round differently"))


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
    from robench.learn.train import MLP, ConvNet

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


def bench_run_all(rows: list, keep=None, workers: bool = True):
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
        if workers:
            one = timed(robench + ["run", "--all", "-j", "1", "--db", f"{tmp}/b.db"], env)
            two = timed(robench + ["run", "--all", "-j", "2", "--db", f"{tmp}/c.db"], env)
    rows.append(("run --all, cold (empty cache and db)", f"{cold:.1f} s", "goal < 600 s"))
    rows.append(("run --all, warm rerun", f"{warm:.2f} s", f"goal: {GOALS['warm']}"))
    if workers:
        rows.append(("run --all, 1 vs 2 workers (warm cache)", f"{one:.1f} s vs {two:.1f} s",
                     f"speed-up {one / two:.2f}x (goal {GOALS['workers']})"))


# ------------------------------------------------------------------------------------------
# worker start-up: the first trial in a fresh process, old code vs this checkout

_FIRST_TRIAL = """
import json, sys, time
t0 = time.perf_counter()
sys._robench_called_from_test = True
import torch
torch.set_num_threads(1)
from robench.run.config import RunConfig
from robench.plugins import make_registry
from robench.run.runner import plan_run
from robench.run.trials import TrialEnv
from robench.families.source_aware import protocol as sa
reg = make_registry(load_entrypoints=False)
cfg = RunConfig(datasets=["mnist-5k"], models=["cnn-2"], clusterers=["kmeans"],
                metrics=["rho"], repeats=1, executor="local")
plan = plan_run(cfg, reg)
for protocol, combo in plan.prepare:
    protocol.prepare(combo, cfg, reg, reg.load_dataset("mnist-5k"))
spec = next(s for s in plan.specs.values() if s["kind"] == "exclusive")
env = TrialEnv(reg)
env.dataset("mnist-5k")
t1 = time.perf_counter(); sa.run(spec, env)
t2 = time.perf_counter(); sa.run(spec, env)
t3 = time.perf_counter()
import robench
print(json.dumps({"first": t2 - t1, "second": t3 - t2,
                  "dynamo": "torch._dynamo" in sys.modules, "robench": robench.__file__}))
"""


def bench_startup(rows: list, old=None):
    """First vs second cnn-2 trial in a fresh process (one thread), old code and this one."""
    import json

    sides = ([("old", old)] if old else []) + [("new", str(HERE.parent))]
    for name, path in sides:
        env = {**os.environ, "PYTHONPATH": path}
        # cwd outside both checkouts: `python -c` puts the cwd first on sys.path, which
        # would import this checkout's robench for the old side too
        proc = subprocess.run([sys.executable, "-c", _FIRST_TRIAL], env=env,
                              capture_output=True, text=True, cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append((f"first trial in a fresh process ({name} code), cnn-2",
                     f"{r['first']:.2f} s vs {r['second']:.2f} s for the next",
                     f"first-trial extra {r['first'] - r['second']:+.2f} s; torch._dynamo "
                     f"{'imported' if r['dynamo'] else 'not imported'} ({r['robench']})"))


# ------------------------------------------------------------------------------------------
# adaptive repeats vs a fixed number


def _table_accuracies(store, models: list, repeats: int):
    """Return (x, i) of shape (1, models, repeats): mnist-5k / kmeans accuracies per repeat."""
    x = np.full((1, len(models), repeats), np.nan)
    i = np.full_like(x, np.nan)
    for m, model in enumerate(models):
        for t in store.trials(model=[model]):
            if (t["protocol"] != "source-aware" or t["status"] != "ok"
                    or t["clusterer"] != "kmeans" or t["repeat"] >= repeats):
                continue
            if t["kind"] == "exclusive":
                x[0, m, t["repeat"]] = t["accuracy"]
            elif t["kind"] == "inclusive":
                i[0, m, t["repeat"]] = t["accuracy"]
    return x, i


def planned_fixed_repeats(sd_diffs, precision: float, level: float = 0.95) -> int:
    """Return the fixed design's repeats that decide every adjacent pair at ``precision``.

    A fixed design does not know the differences in advance; to decide every pair (ordered,
    or equivalent within ±precision) whatever its true difference, its interval's half-width
    ``t(n-1) * sd / sqrt(n)`` must be at most precision / 2 for the most variable pair (a
    difference interval containing 0 then lies within ±precision). The usual sample-size
    calculation, with the per-repeat sd of each pair's paired difference.
    """
    from robench.stats.intervals import t_quantile

    sd = max(sd_diffs)
    n = 2
    while t_quantile(level, n - 1) * sd / np.sqrt(n) > precision / 2:
        n += 1
    return n


def decided_at(d, sd, precision: float, level: float = 0.95) -> int:
    """Return the smallest fixed n whose interval would decide a pair of difference d (oracle)."""
    from robench.stats.intervals import t_quantile

    n = 2
    while True:
        half = t_quantile(level, n - 1) * sd / np.sqrt(n)
        if half < abs(d) or abs(d) + half < precision or n > 10_000:
            return n
        n += 1


def bench_adaptive(rows: list, extra: dict, max_repeats: int, jobs: int, precision: float,
                   start_from=None):
    """mnist-5k, five built-in models, kmeans: --until decided vs a fixed number of repeats.

    One store. The adaptive run goes first (timed: it trains everything it uses). The fixed
    design's repeats are derived from the adaptive run's paired spreads
    (:func:`planned_fixed_repeats`, capped at ``max_repeats``); it then runs in the same
    store, reusing the repeats the adaptive run already trained (repeats are keyed by index),
    so its wall time is not measured directly: both sides are compared by the recorded
    seconds of the trials they use (trial-seconds / workers = wall on a perfectly packed
    machine), and the adaptive side's measured wall is shown beside. ``start_from``: a
    database whose stored trials are reused (copied first; nothing is timed then).
    """
    from robench.run.adaptive import run_until_decided
    from robench.run.config import RunConfig
    from baselines import tie_ranks
    from robench.plugins import make_registry
    from robench.run.runner import execute
    from robench.stats.paired import rank_text
    from robench.stats.sequential import paired_difference, table_look
    from robench.storage.store import Store

    reg = make_registry(load_entrypoints=False)
    models = ["svm", "mlp", "cnn-1", "cnn-2", "cnn-3"]

    def cfg(repeats):
        return RunConfig(datasets=["mnist-5k"], models=models, clusterers=["kmeans"],
                         metrics=["rho"], repeats=repeats, executor="process", jobs=jobs)

    def trial_seconds(store, reps: dict) -> tuple:
        n, secs = 0, 0.0
        for t in store.trials(model=models):
            if t["protocol"] == "source-aware" and t["repeat"] < reps[t["model"]] and (
                    t["clusterer"] in ("kmeans", "")):
                n += 1
                secs += t["seconds"] or 0.0
        return n, secs

    with tempfile.TemporaryDirectory() as tmp:
        if start_from:
            shutil.copy(start_from, Path(tmp) / "bench.db")
        store = Store(Path(tmp) / "bench.db")
        t0 = time.perf_counter()  # sources first, so the sides time training only
        execute(RunConfig(datasets=["mnist-5k"], models=["svm"], clusterers=["kmeans"],
                          metrics=["rho"], repeats=1, executor="local"), reg, store)
        prep_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        adaptive = run_until_decided(cfg(max_repeats), reg, store, precision=precision)
        a_wall = time.perf_counter() - t0
        info = adaptive.adaptive[0]
        a_reps = info["repeats_by_model"]
        a_trials, a_secs = trial_seconds(store, a_reps)
        # the fixed design: its repeats from the paired spreads the adaptive run measured
        n_all = max(a_reps.values())
        x, i = _table_accuracies(store, models, n_all)
        order = [models.index(m) for m in info["order"]]
        sds, diffs = [], []
        for a, b in zip(order, order[1:]):
            pd = paired_difference(x[0, a], i[0, a], x[0, b], i[0, b], 0.95)
            sds.append(float(pd["se"] * np.sqrt(pd["n"])))
            diffs.append(float(pd["d"]))
        r_plan = planned_fixed_repeats(sds, precision)
        r_oracle = max(decided_at(d, sd, precision) for d, sd in zip(diffs, sds))
        r_fixed = min(r_plan, max_repeats)
        t0 = time.perf_counter()
        execute(cfg(r_fixed), reg, store)
        f_wall_extra = time.perf_counter() - t0
        f_trials, f_secs = trial_seconds(store, {m: r_fixed for m in models})
        x, i = _table_accuracies(store, models, r_fixed)
        look = table_look(x, i, precision, cycle=5)
        f_order = [models[k] for k in look["order"][0]]
        words = {0: "undecided", 1: "ordered", -1: "ordered", 2: "equivalent"}
        by_pair = {frozenset((models[a], models[b])): words[int(c)]
                   for (a, b), c in zip(look["pairs"], look["status"][0])}
        f_status = [by_pair[frozenset(p)] for p in zip(f_order, f_order[1:])]
        f_ranks = {models[k]: rank_text(int(b), int(w))
                   for k, (b, w) in enumerate(zip(look["best"][0], look["worst"][0]))}
        rho = {s["model"]: s for s in store.scores(metric="rho") if s["score"] == "rho"
               and "adaptive" not in (s["details"] or {})}
        plain = tie_ranks([rho[m]["value"] for m in f_order], [rho[m]["ci_low"] for m in f_order],
                          [rho[m]["ci_high"] for m in f_order])
        store.close()
    sign = {"ordered": ">", "equivalent": "~", "undecided": "?"}

    def chain(order, statuses):
        return order[0] + "".join(f" {sign[s]} {m}" for m, s in zip(order[1:], statuses))

    a_by_pair = {frozenset(p["pair"]): p["status"] for p in info["pairs"]}
    a_status = [a_by_pair.get(frozenset(p), "undecided")
                for p in zip(info["order"], info["order"][1:])]
    rows.append((f"adaptive setup: mnist-5k x 5 models, kmeans, precision {precision}",
                 f"looks {info['looks_planned']}, level {info['level']:.4f} per look",
                 f"sources and data prepared first ({prep_s:.0f} s, in neither side)"))
    rows.append(("adaptive: repeats per model, why it stopped",
                 ", ".join(f"{m} {r}" for m, r in a_reps.items()), info["stopped"]))
    rows.append(("fixed design's repeats (derived)",
                 f"{r_fixed} (planned {r_plan}: 95% paired half-width <= precision/2 for the "
                 f"most variable pair, sd {max(sds):.4f}"
                 + (f"; capped at the maximum {max_repeats})" if r_plan > max_repeats else ")"),
                 f"an oracle knowing the differences would need {r_oracle}"))
    rows.append(("adaptive vs fixed: trials",
                 f"adaptive {a_trials} vs fixed {f_trials}",
                 f"{a_trials / f_trials:.2f} of the trials (goal {GOALS['adaptive']})"))
    rows.append(("adaptive vs fixed: trial-seconds (recorded) / wall",
                 f"adaptive {a_secs:.0f} s ({a_secs / jobs:.0f} s on {jobs} workers; measured "
                 f"wall {a_wall:.0f} s) vs fixed {f_secs:.0f} s ({f_secs / jobs:.0f} s)",
                 f"{a_secs / f_secs:.2f} of the trial-seconds (fixed reused the adaptive "
                 f"trials: {f_wall_extra:.0f} s wall for the rest)"))
    rows.append(("adaptive ranking (paired decisions, corrected level)",
                 chain(info["order"], a_status),
                 "rank intervals " + ", ".join(f"{m} {info['ranks'][m]}" for m in info["order"])))
    rows.append((f"fixed ranking at {r_fixed} repeats (paired decisions, 95%)",
                 chain(f_order, f_status),
                 "rank intervals " + ", ".join(f"{m} {f_ranks[m]}" for m in f_order)))
    rows.append((f"plain run at {r_fixed} repeats (overlapping 95% rho CIs tie)",
                 ", ".join(f"{r}. {m} {rho[m]['value']:.3f}" for m, r in zip(f_order, plain)),
                 "what robench run prints"))
    same_order = info["order"] == f_order
    agree = same_order and all(info["ranks"][m] == f_ranks[m] for m in models)
    differ = []
    if same_order:
        differ = [f"{a} vs {b}: adaptive {sa}, fixed {sf}" for (a, b), sa, sf in zip(
            zip(f_order, f_order[1:]), a_status, f_status) if sa != sf]
    contradict = any({sa, sf} == {"ordered", "equivalent"} for sa, sf in zip(a_status, f_status))
    rows.append(("rankings agree (order and ranks)",
                 "yes" if agree else ("same order, " + "; ".join(differ) if same_order
                                      else "ORDER DIFFERS"),
                 "no decision contradicts the other side's" if same_order and not contradict
                 else "a decision contradicts the other side's"))
    extra["adaptive"] = {"trials": a_trials, "fixed_trials": f_trials,
                         "repeats_by_model": a_reps,
                         "undecided_at_max": [m for p in info["pairs"]
                                              if p["status"] == "undecided" for m in p["pair"]],
                         "max_repeats": max_repeats, "precision": precision}


# ------------------------------------------------------------------------------------------
# the paper profile, projected


#: The old code's trial time over this checkout's when --old did not run in this run: issue
#: 20's idle benchmark (docs/profile.md, 2026-11-25, 08fc6f2 vs 0a81169): throughput 1.23x on
#: the same mlp + cnn-2 source-aware trials. A stored figure, applied to every group but the
#: paper CNNs', whose old code (version 2) benchmarks/paper_cnns.py measured against this one.
STORED_OLD_RATIO = 1.23
#: benchmarks/paper_cnns.py, old (version 2, 8856819's cnns.py) over new, medians of 3
#: alternating rounds (docs/profile.md "The paper CNNs"); the Bayesian ones kept version 2.
PAPER_CNN_OLD_RATIO = {"lenet": 1.00, "alexnet": 1.20, "3conv3fc": 1.25}
PAPER_CNNS = ("lenet", "alexnet", "3conv3fc", "bayesian-lenet", "bayesian-alexnet",
              "bayesian-3conv3fc")


def bench_projection(rows: list, extra: dict, jobs: int):
    """Project `run --all --profile paper` from measured seconds of every trial group."""
    from dataclasses import replace

    import projection as P
    from robench.families.source_aware.rho import METRIC
    from robench.run.runner import plan_run

    cfg, plan, reg = P.paper_plan()
    by_protocol = {}
    for s in plan.specs.values():
        by_protocol[s["protocol"]] = by_protocol.get(s["protocol"], 0) + 1
    found = P.groups(plan)
    load = os.getloadavg()[0]

    def progress(what, ident, r):
        print(f"    {what} {'/'.join(ident)}: {r['seconds']:.1f} s {r.get('status', '')} "
              f"{r.get('error') or ''}", file=sys.stderr, flush=True)

    measured = P.measure(plan, jobs=min(jobs, 2), progress=progress)
    proj = P.project(measured)
    cpu = sum(g["measured"]["cpu"] for g in measured["groups"].values()) + \
        sum(p["cpu"] for p in measured["prepare"].values())
    rows.append(("paper plan: run --all --profile paper (robench.run.runner.plan_run)",
                 f"{len(plan.specs)} trials in {len(found)} groups",
                 ", ".join(f"{k} {v}" for k, v in sorted(by_protocol.items()))))
    rows.append(("projection's measurement (one shortened trial per group)",
                 f"{measured['seconds']:.0f} s wall, {cpu:.0f} worker CPU s, "
                 f"load average {load:.1f} at its start",
                 f"{len(measured['groups'])} trials at {P.MEASURE_EPOCHS} epoch(s) (VAEs "
                 f"{P.MEASURE_VAE_EPOCHS}; clusterability caps {P.REDUCED_CAPS}) + "
                 f"{len(measured['prepare'])} source preparations in full"))
    for failed, err in proj["failed"]:
        rows.append((f"projection group FAILED: {'/'.join(failed)}", "charged its seconds",
                     str(err)[:120]))
    per = {}
    for g, r in proj["groups"].items():
        acc = per.setdefault(g[0], {"n": 0, "s": 0.0, "x": 0.0, "top": []})
        acc["n"] += r["n"]
        acc["s"] += r["seconds"]
        acc["x"] += r["extrapolated"]
        acc["top"].append((r["seconds"], g, r["per_trial"]))
    for protocol, acc in sorted(per.items(), key=lambda kv: -kv[1]["s"]):
        top = sorted(acc["top"], reverse=True)[:2]
        rows.append((f"... {protocol}: {acc['n']} trials",
                     f"{acc['s'] / 3600:.0f} worker-h "
                     f"({100 * acc['x'] / max(acc['s'], 1e-9):.0f}% extrapolated)",
                     "largest: " + "; ".join(f"{g[1]} {g[2]} {s / 3600:.0f} h ({pt:.0f} s x "
                                             f"{proj['groups'][g]['n']})" for s, g, pt in top)))
    workers = 2
    now_h = P.wall_hours(proj, workers)
    worker_h = proj["trial_seconds"] / 3600
    rows.append(("run --all --profile paper, projected (every trial)",
                 f"{now_h:.0f} h on {workers} workers ({worker_h:.0f} worker-h + "
                 f"{proj['prepare_seconds'] / 60:.0f} min of source preparation)",
                 f"{proj['trials']} of {len(plan.specs)} trials from measured seconds; "
                 f"{100 * proj['extrapolated'] / proj['trial_seconds']:.0f}% extrapolated "
                 "(epochs to 60 / shifted-cv 100, VAE epochs, attack/corruption/multicut caps); "
                 "every epoch charged: an upper bound under early stopping"))
    # before this issue: this run's --old ratio if the naive section measured one, else stored
    if extra.get("old"):
        ratio, how = extra["old"]["seconds"] / extra["robench_s"], "--old measured in this run"
    else:
        ratio, how = STORED_OLD_RATIO, "stored figure: idle old-vs-new throughput, profile.md"
    before = sum(r["seconds"] * (PAPER_CNN_OLD_RATIO.get(g[2], 1.0) if g[2] in PAPER_CNNS
                                 else ratio) for g, r in proj["groups"].items())
    before_h = (before / workers + proj["prepare_seconds"]) / 3600
    rows.append(("... before this issue (0a81169)",
                 f"{before_h:.0f} h on {workers} workers",
                 f"groups of built-in models x {ratio:.2f} ({how}); paper CNNs x "
                 + ", ".join(f"{m} {r:.2f}" for m, r in PAPER_CNN_OLD_RATIO.items())
                 + " (benchmarks/paper_cnns.py), Bayesian x 1.00 (unchanged)"))
    # adaptive repeats: --until decided runs every metric but rho at the maximum repeats
    # (robench.run.adaptive); only trials no other metric plans can stop early
    others = plan_run(replace(cfg, metrics=[m for m in cfg.metrics if m != METRIC]), reg)
    rho_only = [k for k in plan.specs if k not in others.specs]
    ad = extra.get("adaptive")
    rows.append(("... with --until decided (run --all)",
                 f"{now_h:.0f} h on {workers} workers",
                 f"{len(rho_only)} trials only rho plans: lost-test and adequacy plan every "
                 "rho trial and --until decided runs them at the maximum repeats"))
    rho_plan = plan_run(replace(cfg, metrics=[METRIC]), reg)
    rho_s = sum(proj["groups"][P.group_of(s)]["per_trial"] for s in rho_plan.specs.values())
    if ad:
        # models still undecided at the adaptive section's maximum go on to the paper's
        # repeats, the others stop where they stopped there (an upper bound on the adaptive run)
        from robench.run.config import REPEATS

        r_paper = REPEATS["paper"]
        reps = {m: (r_paper if m in ad["undecided_at_max"] else r)
                for m, r in ad["repeats_by_model"].items()}
        share = sum(reps.values()) / (len(reps) * r_paper)
        note = (f"repeats at {share:.2f} of {r_paper} (the adaptive section's stops on "
                f"mnist-5k, max {ad['max_repeats']}, precision {ad.get('precision')}), "
                "applied to every rho table")
    else:
        share, note = 1.0, "the adaptive section did not run: no stops measured, shown at 1.0"
    rows.append(("... --metric rho --profile paper, fixed vs --until decided",
                 f"{len(rho_plan.specs)} trials: {rho_s / workers / 3600:.0f} h vs "
                 f"{share * rho_s / workers / 3600:.0f} h on {workers} workers", note))
    train_share = 1 - sum(r["fixed"] * r["n"] for r in proj["groups"].values()) \
        / proj["trial_seconds"]
    for w in (8, 32, 128):
        rows.append((f"... on {w} workers (Dask)",
                     f"{proj['trials'] / w:.0f} trials per worker, {P.wall_hours(proj, w):.1f} h",
                     "trials are independent: wall ~ worker-seconds / workers + preparation"
                     + (f"; {100 * train_share:.0f}% of worker-seconds are training epochs "
                        "(what a GPU speeds up), the rest per-trial fixed work" if w == 8
                        else "")))


# ------------------------------------------------------------------------------------------
# scaling


def bench_scale(jobs: int, rows: list):
    from robench.run.config import RunConfig
    from robench.plugins import make_registry
    from robench.run.runner import execute
    from robench.storage.store import Store

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


def bench_batched(rows: list, repeats: int, jobs: int, device: str = "cpu"):
    """Trials of one model trained together vs one at a time: the same trials, one run.

    mnist-5k, source-aware protocol, ``repeats`` repeats of each partition kind, for the mlp
    (where batching is on by default on a CPU) and cnn-2 (where it is not: batched
    convolutions are grouped convolutions, slow on a CPU), through the process executor with
    ``jobs`` workers, ``ROBENCH_BATCH`` off and on alternately in fresh stores (sources found
    once beforehand, so both arms time training, prediction and storage only).
    """
    from robench.plugins import make_registry
    from robench.run.config import RunConfig
    from robench.run.runner import execute
    from robench.storage.store import Store

    reg = make_registry(load_entrypoints=False)
    with tempfile.TemporaryDirectory() as tmp:
        warm = Store(Path(tmp) / "warm.db")
        execute(RunConfig(datasets=["mnist-5k"], models=["svm"], clusterers=["kmeans"],
                          metrics=["rho"], repeats=1, executor="local"), reg, warm)
        for model in ("mlp", "cnn-2"):
            took, acc = {}, {}
            for policy in ("off", "on"):
                store = Store(Path(tmp) / f"{model}-{policy}.db")
                cfg = RunConfig(datasets=["mnist-5k"], models=[model], clusterers=["kmeans"],
                                metrics=["rho"], repeats=repeats, executor="process",
                                jobs=jobs, batch=policy, device=device)
                t0 = time.perf_counter()
                report = execute(cfg, reg, store)
                took[policy] = time.perf_counter() - t0
                assert not report.failed, report.failed[:1]
                acc[policy] = [t["accuracy"] for t in store.trials() if t["status"] == "ok"]
                store.close()
            n = len(acc["on"])
            where = f"-j {jobs}" + ("" if device == "cpu" else f", {device}")
            rows.append((f"batched: mnist-5k {model}, {n} trials, {where}, one at a time",
                         f"{took['off']:.1f} s", f"{n / took['off']:.2f} trials/s"))
            rows.append((f"batched: mnist-5k {model}, {n} trials, {where}, trained together",
                         f"{took['on']:.1f} s",
                         f"{took['off'] / took['on']:.2f}x one at a time; mean accuracy "
                         f"{np.mean(acc['on']):.4f} vs {np.mean(acc['off']):.4f}"))


def bench_help(rows: list):
    cmd = shutil.which("robench") or sys.executable
    args = [cmd, "--help"] if cmd.endswith("robench") else [cmd, "-m", "robench", "--help"]
    best = min(timed(args, dict(os.environ)) for _ in range(5))
    rows.append(("robench --help (best of 5)", f"{best:.2f} s", f"goal: {GOALS['help']}"))


def bench_svm(rows: list):
    from robench.builtin.models import SVMClassifier
    from robench.plugins import make_registry
    from robench.run.executors import limit_threads

    limit_threads()  # as a trial runs: one thread (torch, OpenMP, BLAS)
    ds = make_registry(load_entrypoints=False).load_dataset("mnist-5k")
    X = ds.rows(np.arange(len(ds.y))).reshape(len(ds.y), -1)
    y = np.asarray(ds.y)
    fit = np.random.default_rng(0).permutation(len(y))[:3600]
    clf = SVMClassifier(seed=0).fit(X[fit], y[fit], None, None)

    def best(fn):
        out, times = None, []
        for _ in range(3):
            t0 = time.perf_counter()
            out = fn(X)
            times.append(time.perf_counter() - t0)
        return out, min(times)

    ref, t_ref = best(clf.model_.predict)
    new, t_new = best(clf.predict)
    rows.append(("svm predict, 5,000 mnist-5k rows: libsvm / block kernel",
                 f"{t_ref:.2f} s / {t_new:.2f} s = {t_ref / t_new:.1f}x",
                 "labels identical" if np.array_equal(ref, new) else "LABELS DIFFER"))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sections = ["naive", "flops", "startup", "help", "adaptive", "all", "projection", "scale",
                "memory", "batched", "decided", "svm"]
    p.add_argument("--only", action="append", choices=sections, help="run only these sections")
    p.add_argument("--skip", action="append", choices=sections, default=[], help="skip sections")
    p.add_argument("--repeats", type=int, default=10, help="repeats for the naive comparison")
    p.add_argument("--rounds", type=int, default=1,
                   help="naive: run robench's side this many times (alternating with --old's "
                        "side) and compare the median wall times")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    p.add_argument("--keep", metavar="DIR", default=None,
                   help="all: keep the cold run's database and printed output in DIR")
    p.add_argument("--old", metavar="CHECKOUT", default=None,
                   help="naive, startup: also run the same trials with the robench of this "
                        "checkout (e.g. a git worktree of the commit before a change)")
    p.add_argument("--adaptive-repeats", type=int, default=32,
                   help="adaptive: the maximum repeats (the fixed design's are derived, at "
                        "most this)")
    p.add_argument("--adaptive-precision", type=float, default=0.025,
                   help="adaptive: --precision of the adaptive run and of the fixed design")
    p.add_argument("--adaptive-from", metavar="DB", default=None,
                   help="adaptive: start from a copy of this database's stored trials (to "
                        "re-analyse an earlier run; its wall times then mean nothing)")
    p.add_argument("--no-workers", action="store_true",
                   help="all: skip the 1 vs 2 workers comparison (two more full runs)")
    p.add_argument("--batched-repeats", type=int, default=10,
                   help="batched: repeats per partition kind (trials = 3x this per model)")
    p.add_argument("--batched-device", default="cpu",
                   help="batched: the device (cpu, cuda, ...) both arms train on")
    p.add_argument("--robench-part", nargs=2, type=int, metavar=("R", "J"),
                   help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.robench_part:  # a subprocess of --old: this interpreter's robench, JSON out
        import json

        print(json.dumps(robench_part(*args.robench_part), default=str))
        return
    chosen = [s for s in (args.only or sections) if s not in args.skip]
    if "flops" in chosen and "naive" not in chosen:
        chosen.insert(0, "naive")

    rows, extra = [], {}
    done = 0
    t0 = time.perf_counter()
    for section in chosen:
        print(f"... {section} ({time.perf_counter() - t0:.0f} s so far)", file=sys.stderr,
              flush=True)
        try:
            run_section(section, args, rows, extra)
        except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
            import traceback

            traceback.print_exc()
            rows.append((section, "FAILED", f"{type(exc).__name__}: {exc}"[:200]))
        for what, measured, verdict in rows[done:]:  # as they come: a long run killed late
            print(f"  {what} | {measured} | {verdict}", file=sys.stderr, flush=True)
        done = len(rows)
    _print_table(rows, t0)


def run_section(section, args, rows, extra):
    if section == "naive":
        bench_naive(args.repeats, args.jobs, rows, extra, old=args.old, rounds=args.rounds)
    elif section == "startup":
        bench_startup(rows, args.old)
    elif section == "adaptive":
        bench_adaptive(rows, extra, args.adaptive_repeats, args.jobs, args.adaptive_precision,
                       args.adaptive_from)
    elif section == "projection":
        bench_projection(rows, extra, args.jobs)
    elif section == "flops":
        bench_flops(rows, extra)
    elif section == "all":
        bench_run_all(rows, args.keep, workers=not args.no_workers)
    elif section == "scale":
        bench_scale(args.jobs, rows)
    elif section == "memory":
        from memory import bench_memory

        bench_memory(rows, jobs=min(args.jobs, 2))
    elif section == "help":
        bench_help(rows)
    elif section == "svm":
        bench_svm(rows)
    elif section == "batched":
        bench_batched(rows, args.batched_repeats, args.jobs, args.batched_device)
    elif section == "decided":  # benchmarks/decided.py: pairs decided per CPU-minute, run --all
        __import__("decided").bench_decided(rows, extra)


def _print_table(rows, t0):
    import platform

    import robench

    width = max(len(r[0]) for r in rows)
    w2 = max([len("measured")] + [len(r[1]) for r in rows])
    from robench.process.provenance import platform_description

    cpu = platform_description().partition("; CPU: ")[2]
    commit = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    print(f"robench {robench.__version__} (commit {commit}) benchmark on {platform.node()}: "
          f"{os.cpu_count()} cores ({cpu}), python {platform.python_version()}, quick profile, "
          f"{time.perf_counter() - t0:.0f} s in all")
    print(f"{'what':<{width}}  {'measured':<{w2}}  verdict")
    print(f"{'-' * width}  {'-' * w2}  {'-' * 30}")
    for what, measured, verdict in rows:
        print(f"{what:<{width}}  {measured:<{w2}}  {verdict}")


if __name__ == "__main__":
    main()
