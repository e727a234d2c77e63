"""Where one source-aware trial's time goes (mnist-5k, one torch thread), and a worker's start-up.

Usage (sources for mnist-5k/kmeans are found and cached on the first call):
    python benchmarks/profile_trial.py phases cnn-2   # trial time: training, evaluation passes
    python benchmarks/profile_trial.py ops mlp        # torch.profiler: top ops by self CPU time
    python benchmarks/profile_trial.py workers        # process pool: seconds until 2 workers can train

The figures and what they mean are in docs/profile.md.
"""

from __future__ import annotations

import sys
import time

sys._robench_called_from_test = True  # never pick up installed third-party plugins here


def _trial(model: str):
    from robench.run.config import RunConfig
    from robench.plugins import make_registry
    from robench.run.trials import TrialEnv
    from robench.run.runner import plan_run

    reg = make_registry(load_entrypoints=False)
    cfg = RunConfig(datasets=["mnist-5k"], models=[model], clusterers=["kmeans"],
                    metrics=["rho"], repeats=1, executor="local")
    plan = plan_run(cfg, reg)
    for protocol, combo in plan.prepare:  # find (or load cached) sources
        protocol.prepare(combo, cfg, reg, reg.load_dataset("mnist-5k"))
    spec = next(s for s in plan.specs.values() if s["kind"] == "exclusive")
    return spec, TrialEnv(reg)


def phases(model: str, repeats: int = 3) -> None:
    """Print each trial's wall time and the evaluation passes inside it."""
    import torch

    from robench.learn import train
    from robench.families.source_aware import protocol as source_aware

    torch.set_num_threads(1)
    spec, env = _trial(model)
    t = time.perf_counter()
    source_aware.run(spec, env)
    print(f"first trial in this process: {time.perf_counter() - t:.2f} s (includes one-off "
          "imports such as torch._dynamo on the first optimizer)")
    spent = {}
    for name in ("_loss_and_accuracy", "predict"):
        fn = getattr(train.TorchClassifier, name)

        def timed(self, *a, _fn=fn, _name=name, **k):
            t0 = time.perf_counter()
            try:
                return _fn(self, *a, **k)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t0

        setattr(train.TorchClassifier, name, timed)
    for _ in range(repeats):
        spent.clear()
        t = time.perf_counter()
        res = source_aware.run(spec, env)
        total = time.perf_counter() - t
        print(f"{model}: trial {total:.2f} s, {res['epochs']} epochs, {res['n_train']} fit rows; "
              f"validation passes (and a train-accuracy pass where fit makes one) "
              f"{spent.get('_loss_and_accuracy', 0):.2f} s, "
              f"predict on all rows {spent.get('predict', 0):.2f} s")


def ops(model: str) -> None:
    """Print torch.profiler's top operators of one (warm) trial."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from robench.families.source_aware import protocol as source_aware

    torch.set_num_threads(1)
    spec, env = _trial(model)
    source_aware.run(spec, env)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        source_aware.run(spec, env)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def _ready_probe(_):
    t = time.time()
    from robench.plugins import make_registry

    make_registry(load_entrypoints=False).get("protocols", "source-aware")
    t1 = time.time()
    import torch

    t2 = time.time()
    from robench.learn.train import FusedAdam  # torch.optim.Adam would import torch._dynamo here

    FusedAdam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    t3 = time.time()
    return {"protocol": round(t1 - t, 2), "import torch": round(t2 - t1, 2),
            "first optimizer": round(t3 - t2, 2), "sklearn loaded": "sklearn" in sys.modules,
            "torch._dynamo loaded": "torch._dynamo" in sys.modules}


def workers() -> None:
    """Print the seconds from creating robench's process pool until 2 workers can train."""
    from robench.run.executors import ProcessExecutor
    from robench.plugins import make_registry

    ex = ProcessExecutor(make_registry(load_entrypoints=False), jobs=2)
    t0 = time.time()
    pool = ex._new_pool(2)
    res = [f.result() for f in [pool.submit(_ready_probe, i) for i in range(2)]]
    print(f"2 spawn workers ready to train after {time.time() - t0:.2f} s: {res}")
    pool.shutdown()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "phases"
    if what == "workers":
        workers()
    elif what == "ops":
        ops(sys.argv[2] if len(sys.argv) > 2 else "cnn-2")
    else:
        phases(sys.argv[2] if len(sys.argv) > 2 else "cnn-2")
