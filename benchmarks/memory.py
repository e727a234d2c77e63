"""Memory at CIFAR-10 size: the compact data path against the float32 path, side by side.

Generates a CIFAR-10-sized data set (60,000 x 3 x 32 x 32 uint8 images, 10 classes, 2 true
sources per class) as an npz file, parses it once into the robench cache, then runs the same
command twice on it, each with a fresh database:

    robench run -d npz:cifar-sized.npz -m mlp -c oracle -r 1 --metric rho
                --executor process -j 2 --set train.max_epochs=1

* float32: ``ROBENCH_COMPACT_DATA=0``, the path before issue 21: every process holds X as
  float32 (737 MB), read whole from the cache, and every trial copies its splits;
* compact: the default: X stays uint8 pixels (184 MB), memory-mapped from the cache (above
  ``ROBENCH_MMAP_BYTES``, 64 MiB) and never loaded whole; models read mini-batches by index
  (``robench.data.Rows``, rows read from the file with ``preadv``), converted to float32 per
  batch.

While a run is going, the driver and every worker process are sampled every 0.05 s from
/proc: peak RSS (the kernel's high-water mark, VmHWM, which no sampling can miss), the largest
RssAnon and RssFile seen, the largest PSS (shared pages divided among the processes that map
them) and USS (pages no other process maps: Private_Clean + Private_Dirty). What counts: RSS
counts every resident page a process maps, shared or not, so the file-backed pages of torch's
libraries (~230 MB with the CUDA build) count in full in every worker; PSS charges each process
its share; USS is what ending the process would free.

A worker's RSS includes what importing torch maps (~0.5 GB with the CUDA build on this
machine, whatever the data), so the table also gives two baselines measured in their own
processes: ``import torch`` alone, and an idle worker (robench's worker start-up, then
``robench.learn.train``, which imports torch: what a worker holds before its first trial), and each
worker's peak above the idle worker. Seconds are the trials' own times (one epoch plus the
evaluation passes over the 60,000 rows).

VmHWM includes the end of a worker's life: a process that imported the CUDA build of torch
and exits normally runs its libraries' C++ teardown, which maps ~110-130 MB more of their file
pages (``python -c "import torch"``: 520 MB before exit, 648 MB at exit), so a worker's peak
can be set at exit rather than by its trials (README, Memory).

Usage (about 1 minute on an idle 2-core machine: the two runs ~30 s, generating the data,
parsing it into the cache and the baselines the rest):
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
    """Return the memory figures of ``pid`` from /proc, in bytes ({} once it has ended)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM", "VmRSS", "RssAnon", "RssFile")):
                    key, value = line.split(":")
                    out[key] = int(value.split()[0]) * 1024
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Pss:", "Private_Clean:", "Private_Dirty:")):
                    key, value = line.split(":")
                    out[key] = int(value.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    out["Uss"] = out.pop("Private_Clean", 0) + out.pop("Private_Dirty", 0)
    return out


#: What the table reports per process: the largest value seen of each /proc figure.
FIGURES = {"hwm": "VmHWM", "anon": "RssAnon", "file": "RssFile", "pss": "Pss", "uss": "Uss"}


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
                            text=True)  # small outputs: the pipes never fill
    peaks: dict = {}
    t0 = time.perf_counter()
    while proc.poll() is None:
        for pid in [proc.pid] + _children(proc.pid):
            st = _status(pid)
            if not st:
                continue
            p = peaks.setdefault(pid, {**dict.fromkeys(FIGURES, 0), "cmd": _cmdline(pid)})
            for name, key in FIGURES.items():
                p[name] = max(p[name], st.get(key, 0))
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-2000:]}")
    driver = peaks.pop(proc.pid, dict.fromkeys(FIGURES, 0))
    workers = {pid: p for pid, p in peaks.items()
               if "resource_tracker" not in p["cmd"] and p["hwm"] > 50 << 20}
    return {"driver": driver, "workers": workers, "seconds": time.perf_counter() - t0,
            "stdout": out}


BASELINE = ("import json, sys; sys._robench_called_from_test = True\n"
            "{code}\n"
            "st = {{}}\n"
            "for line in open('/proc/self/status'):\n"
            "    k, _, v = line.partition(':')\n"
            "    st[k] = int(v.split()[0]) * 1024 if k in ('VmHWM', 'RssAnon', 'RssFile') else 0\n"
            "for line in open('/proc/self/smaps_rollup'):\n"
            "    k, _, v = line.partition(':')\n"
            "    st[k] = int(v.split()[0]) * 1024 if k == 'Pss' else st.get(k, 0)\n"
            "print(json.dumps({{'hwm': st['VmHWM'], 'anon': st['RssAnon'], "
            "'file': st['RssFile'], 'pss': st['Pss']}}))")
#: ``import torch`` alone, and a worker before its first trial (its start-up as the process
#: executor runs it, then robench.learn.train, which imports torch).
BASELINES = {
    "torch": "import torch",
    "idle worker": ("import robench.run.executors as ex\n"
                    "ex.init_worker({'load_entrypoints': False}, None)\n"
                    "import robench.learn.train"),
}


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
        base = {name: json.loads(subprocess.run(
                    [sys.executable, "-c", BASELINE.format(code=code)], env=env, check=True,
                    capture_output=True, text=True).stdout.strip().splitlines()[-1])
                for name, code in BASELINES.items()}
        idle = base["idle worker"]["hwm"]
        cmd = [sys.executable, "-m", "robench", "run", "-d", f"npz:{npz}", "-m", "mlp", "-c",
               "oracle", "-r", "1", "--metric", "rho", "--executor", "process", "-j", str(jobs),
               "--set", "train.max_epochs=1"]
        figures = {"generate_seconds": gen, "idle_rss": idle, "baselines": base}
        for mode, extra in (("float32", {"ROBENCH_COMPACT_DATA": "0"}), ("compact", {})):
            db = tmp / f"{mode}.db"
            res = monitored(cmd + ["--db", str(db)], {**env, **extra})
            conn = sqlite3.connect(db)
            trials = conn.execute("SELECT seconds, epochs, history, correct FROM trials "
                                  "ORDER BY key").fetchall()
            conn.close()
            res["trial_seconds"] = [t[0] for t in trials]
            res["epochs"] = [t[1] for t in trials]
            res["accuracy_history"] = [json.loads(t[2]) for t in trials]
            res["correct"] = [t[3] for t in trials]
            figures[mode] = res
        f, c = figures["float32"], figures["compact"]

        def worst(res, what):
            return max(p[what] for p in res["workers"].values())

        def one(p):
            return (f"RSS {mb(p['hwm']):.0f} (anon {mb(p['anon']):.0f} + file "
                    f"{mb(p['file']):.0f}), PSS {mb(p['pss']):.0f}"
                    + (f", USS {mb(p['uss']):.0f}" if "uss" in p else "") + " MB")

        rows.append(("memory: data set", f"{N}x{'x'.join(map(str, SHAPE))} uint8",
                     f"generated in {gen:.1f} s; float32 737 MB, uint8 184 MB"))
        for name, p in base.items():
            rows.append((f"memory: baseline, {name} (own process)", one(p), "before any data"))
        for mode, res in (("float32", f), ("compact", c)):
            rows.append((f"memory: driver, {mode}", one(res["driver"]), "peaks"))
            for i, p in enumerate(res["workers"].values(), 1):
                rows.append((f"memory: worker {i}, {mode}", one(p),
                             f"peak RSS {mb(p['hwm'] - idle):+.0f} MB vs the idle worker"))
        rows.append(("memory: driver peak RSS, float32 vs compact",
                     f"{mb(f['driver']['hwm']):.0f} vs {mb(c['driver']['hwm']):.0f} MB",
                     f"ratio {c['driver']['hwm'] / f['driver']['hwm']:.2f}"))
        wf, wc = worst(f, "hwm"), worst(c, "hwm")
        rows.append(("memory: worker peak RSS (max), float32 vs compact",
                     f"{mb(wf):.0f} vs {mb(wc):.0f} MB",
                     f"ratio {wc / wf:.2f} (goal <= 0.33: "
                     + ("met" if wc / wf <= 1 / 3 else "NOT met") + ")"))
        rows.append(("memory: worker peak RSS above the idle worker",
                     f"{mb(wf - idle):.0f} vs {mb(wc - idle):.0f} MB",
                     f"ratio {(wc - idle) / (wf - idle):.2f}; idle worker {mb(idle):.0f} MB"))
        for what, label in (("pss", "PSS (shared pages split)"),
                            ("uss", "USS (private pages)"),
                            ("anon", "RssAnon")):
            rows.append((f"memory: worker largest {label}, float32 vs compact",
                         f"{mb(worst(f, what)):.0f} vs {mb(worst(c, what)):.0f} MB",
                         f"ratio {worst(c, what) / worst(f, what):.2f}"))
        sf, sc = np.mean(f["trial_seconds"]), np.mean(c["trial_seconds"])
        rows.append(("memory: seconds per trial (1 epoch + evaluation passes), float32 vs compact",
                     f"{sf:.1f} vs {sc:.1f} s", f"ratio {sc / sf:.2f}"))
        same = (f["accuracy_history"] == c["accuracy_history"] and f["correct"] == c["correct"])
        rows.append(("memory: run wall time, float32 vs compact",
                     f"{f['seconds']:.1f} vs {c['seconds']:.1f} s",
                     "same trials: " + ("identical histories and predictions" if same
                                        else "RESULTS DIFFER")))
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
