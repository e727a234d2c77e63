"""Memory at CIFAR-10 size: the compact data path against the float32 path, side by side.

Generates a CIFAR-10-sized data set (60,000 x 3 x 32 x 32 uint8 images, 10 classes, 2 true
sources per class) as an npz file, parses it once into the robench cache, then runs the same
command twice on it, each with a fresh database:

    robench run -d npz:cifar-sized.npz -m mlp -c oracle -r 1 --metric rho
                --executor process -j 2 --set train.max_epochs=1

* float32: ``ROBENCH_COMPACT_DATA=0``, the path before issue 21: every process holds X as
  float32 (737 MB), read whole from the cache;
* compact: the default: X stays uint8 pixels (184 MB), memory-mapped from the cache (above
  ``ROBENCH_MMAP_BYTES``, 64 MiB) and shared by the workers, converted to float32 per batch.

While a run is going, the driver and every worker process are sampled every 0.1 s: peak RSS
(the kernel's high-water mark, VmHWM) and the largest PSS seen (shared pages divided among the
processes that map them). A worker's RSS includes what importing torch maps (~0.5-0.6 GB with
the CUDA build of torch on this machine, whatever the data), so the table also gives the idle
baseline of a process that imported the same modules and the peak above it. Seconds are the
trials' own times (one epoch plus one prediction pass over the 60,000 rows).

Usage:
    flock /tmp/robench-bench.lock python benchmarks/memory.py
    python benchmarks/bench.py --only memory
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N, SHAPE, CLASSES, SOURCES = 60_000, (3, 32, 32), 10, 2


def make_cifar_sized(path: Path, seed: int = 0) -> Path:
    """Write a CIFAR-10-sized npz: class-coloured blocks at source-specific places, noise."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, CLASSES * SOURCES, N)
    y = groups // SOURCES
    X = rng.integers(0, 64, (N, *SHAPE), dtype=np.uint8)
    for g in range(CLASSES * SOURCES):
        rows = np.flatnonzero(groups == g)
        c, s = divmod(g, SOURCES)
        top = 4 + 12 * s
        X[rows, c % 3, top:top + 10, 2 * c:2 * c + 12] = 200 + 5 * c
    np.savez(path, X=X, y=y, groups=groups)
    return path


def _status(pid: int) -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS")):
                    key, value = line.split(":")
                    out[key] = int(value.split()[0]) * 1024
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


def _children(pid: int) -> list:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def monitored(cmd: list, env: dict) -> dict:
    """Run ``cmd``; return the driver's and each worker's peak RSS and largest PSS, in bytes."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peaks: dict = {}
    t0 = time.perf_counter()
    while proc.poll() is None:
        for pid in [proc.pid] + _children(proc.pid):
            st = _status(pid)
            if not st:
                continue
            p = peaks.setdefault(pid, {"hwm": 0, "pss": 0, "cmd": _cmdline(pid)})
            p["hwm"] = max(p["hwm"], st.get("VmHWM", 0))
            p["pss"] = max(p["pss"], st.get("Pss", 0))
        time.sleep(0.1)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-2000:]}")
    driver = peaks.pop(proc.pid, {"hwm": 0, "pss": 0})
    workers = {pid: p for pid, p in peaks.items()
               if "resource_tracker" not in p["cmd"] and p["hwm"] > 50 << 20}
    return {"driver": driver, "workers": workers, "seconds": time.perf_counter() - t0,
            "stdout": out}


IDLE = ("import resource, sys; sys._robench_called_from_test = True; import torch, sklearn; "
        "import robench.train, robench.trials, robench.plugins; "
        "robench.plugins.make_registry(load_entrypoints=False); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)")


def bench_memory(rows: list, jobs: int = 2, keep: dict = None) -> dict:
    """Append the memory table's rows to ``rows``; return the raw figures."""
    mb = lambda b: b / 2**20  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        npz = make_cifar_sized(tmp / "cifar-sized.npz")
        gen = time.perf_counter() - t0
        env = {**os.environ, "ROBENCH_CACHE_DIR": str(tmp / "cache")}
        env.pop("ROBENCH_COMPACT_DATA", None)
        # parse once into the cache (both paths read the same entry)
        subprocess.run([sys.executable, "-c",
                        "import sys; sys._robench_called_from_test = True\n"
                        "from robench.plugins import make_registry\n"
                        f"make_registry(load_entrypoints=False).get('datasets', 'npz:{npz}')"],
                       env=env, check=True)
        idle = int(subprocess.run([sys.executable, "-c", IDLE], env=env, check=True,
                                  capture_output=True, text=True).stdout.strip())
        cmd = [sys.executable, "-m", "robench", "run", "-d", f"npz:{npz}", "-m", "mlp", "-c",
               "oracle", "-r", "1", "--metric", "rho", "--executor", "process", "-j", str(jobs),
               "--set", "train.max_epochs=1"]
        figures = {"generate_seconds": gen, "idle_rss": idle}
        for mode, extra in (("float32", {"ROBENCH_COMPACT_DATA": "0"}), ("compact", {})):
            db = tmp / f"{mode}.db"
            res = monitored(cmd + ["--db", str(db)], {**env, **extra})
            conn = sqlite3.connect(db)
            trials = conn.execute("SELECT seconds, epochs, history FROM trials ORDER BY key").fetchall()
            conn.close()
            res["trial_seconds"] = [t[0] for t in trials]
            res["epochs"] = [t[1] for t in trials]
            res["accuracy_history"] = [json.loads(t[2]) for t in trials]
            figures[mode] = res
        f, c = figures["float32"], figures["compact"]
        wf = max(p["hwm"] for p in f["workers"].values())
        wc = max(p["hwm"] for p in c["workers"].values())
        pf = max(p["pss"] for p in f["workers"].values())
        pc = max(p["pss"] for p in c["workers"].values())
        rows.append(("memory: data set", f"{N}x{'x'.join(map(str, SHAPE))} uint8",
                     f"generated in {gen:.1f} s; float32 737 MB, uint8 184 MB"))
        rows.append(("memory: driver peak RSS, float32 vs compact",
                     f"{mb(f['driver']['hwm']):.0f} vs {mb(c['driver']['hwm']):.0f} MB",
                     f"ratio {c['driver']['hwm'] / f['driver']['hwm']:.2f}"))
        for mode, res in (("float32", f), ("compact", c)):
            each = ", ".join(f"{mb(p['hwm']):.0f}" for p in res["workers"].values())
            rows.append((f"memory: worker peak RSS each, {mode}", f"{each} MB",
                         f"{len(res['workers'])} workers"))
        rows.append(("memory: worker peak RSS (max), float32 vs compact",
                     f"{mb(wf):.0f} vs {mb(wc):.0f} MB",
                     f"ratio {wc / wf:.2f} (goal <= 0.33)"))
        rows.append(("memory: worker peak RSS above an idle worker",
                     f"{mb(wf - idle):.0f} vs {mb(wc - idle):.0f} MB",
                     f"ratio {(wc - idle) / (wf - idle):.2f}; idle (torch imported) "
                     f"{mb(idle):.0f} MB"))
        rows.append(("memory: worker largest PSS, float32 vs compact",
                     f"{mb(pf):.0f} vs {mb(pc):.0f} MB", f"ratio {pc / pf:.2f} (shared pages split)"))
        sf, sc = np.mean(f["trial_seconds"]), np.mean(c["trial_seconds"])
        rows.append(("memory: seconds per trial (1 epoch + 60k predictions), float32 vs compact",
                     f"{sf:.1f} vs {sc:.1f} s", f"ratio {sc / sf:.2f}"))
        rows.append(("memory: run wall time, float32 vs compact",
                     f"{f['seconds']:.1f} vs {c['seconds']:.1f} s",
                     "same trials: " + ("identical histories" if f["accuracy_history"]
                                        == c["accuracy_history"] else "HISTORIES DIFFER")))
        if keep is not None:
            keep.update(figures)
        return figures


if __name__ == "__main__":
    rows: list = []
    bench_memory(rows)
    width = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    for what, measured, verdict in rows:
        print(f"{what:<{width}}  {measured:<{w2}}  {verdict}")
