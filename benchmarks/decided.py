"""The figure that matters: the share of model pairs decided per headline table against CPU-minutes.

One run of the racing ``robench run --all --budget 10m`` (in a fresh database; the cache is the
user's, so sources and parsed data may be warm: said in the output) gives its wall time (the
fixed quick ``robench run --all``, the default, is the "quick" row's trials). Then, from the
trials that run stored, without training anything more, for every headline table that races
(every metric that declares a paired comparison: rho per data set and clusterer, coverage per
data set):

* the **fixed designs**: a fixed profile at R repeats is the first R repeats of the same
  trials (a trial is keyed by its repeat index: repeat r is the same trial whatever R), so its
  decisions are the paired test of :func:`robench.stats.paired.compare_all` (the test the
  ranks use, at 5%, one look) over repeats 0..R-1 of every model, and its CPU-minutes the
  recorded seconds of those trials. R is each profile's repeats for that metric (quick 3,
  standard 15 for rho; coverage.repeats 3 and 5); a profile whose R exceeds what every model
  of the table has stored is not shown (the race stopped models before it). The stored trials
  were trained with the run's profile (quick training): the standard row is the standard
  profile's *repeats*, not its longer training;
* the **race**: its own decisions look by look (``details.adaptive.history`` of the stored
  scores) against the recorded seconds of the trials each look had used.

Usage: ``python benchmarks/decided.py`` (runs ``robench run --all --budget 10m``), or
``python benchmarks/decided.py --db PATH --wall SECONDS`` (reads a database an earlier run of
it wrote and states that wall time as given). ``benchmarks/bench.py --only decided`` calls
:func:`bench_decided`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def run_default(workdir: Path) -> dict:
    """Run ``robench run --all --budget 10m`` into ``workdir/robench.db``; return its wall
    seconds, the load averages before and after, its exit code and its stdout."""
    db = workdir / "robench.db"
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "robench", "run", "--all", "--budget", "10m", "--db", str(db)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return {"db": db, "wall": wall, "load": (load0[0], os.getloadavg()[0]),
            "code": proc.returncode, "stdout": proc.stdout,
            "command": "robench run --all --budget 10m"}


def _profiles(spec) -> dict:
    """Return {profile: repeats} of a paired metric's fixed designs."""
    from robench.run.config import REPEATS
    from robench.run.config import knob_sections
    from robench.plugins import get_registry

    knob = spec.paired.repeats_knob
    if not knob:
        return {p: REPEATS[p] for p in ("quick", "standard")}
    section, _, name = knob.partition(".")
    knobs = {k.name: k for k in knob_sections(get_registry())[section][1]}
    return {p: int(knobs[name].value_for(p)) for p in ("quick", "standard")}


def replay(db: Path) -> list:
    """Return, per racing headline table in ``db``, its fixed-design and race points:
    ``{"metric", "table", "models", "pairs", "points": [(label, decided, cpu_seconds)]}``."""
    from robench.plugins import get_registry
    from robench.stats.paired import compare_all
    from robench.storage.store import Store

    reg = get_registry()
    store = Store(db, readonly=True)
    try:
        scores = store.scores()
        trials = [t for t in store.trials() if t["status"] == "ok"]
    finally:
        store.close()
    out = []
    for spec in reg.all("metrics"):
        if spec.paired is None:
            continue
        heads = [s for s in scores if s["metric"] == spec.name and s["score"] == spec.paired.score
                 and isinstance(s.get("details"), dict) and "adaptive" in s["details"]]
        tables: dict = {}
        for s in heads:
            tables.setdefault((s["dataset"], s.get("clusterer") or ""), []).append(s)
        for (dataset, clusterer), rows in sorted(tables.items()):
            info = rows[0]["details"]["adaptive"]
            unranked = set(info.get("unranked") or {})
            models = [m for m in info.get("repeats_by_model", {}) if m not in unranked]
            if len(models) < 2:
                continue
            mine = [t for t in trials if t["protocol"] == spec.protocol
                    and t["dataset"] == dataset and (t.get("clusterer") or "") == clusterer
                    and t["model"] in models]
            top = max(int(t["repeat"]) for t in mine) + 1 if mine else 0
            x = np.full((len(models), top), np.nan)
            i = np.full((len(models), top), np.nan)
            secs = np.zeros((len(models), top))
            for t in mine:
                k, r = models.index(t["model"]), int(t["repeat"])
                secs[k, r] += float(t.get("seconds") or 0.0)  # every trial of the repeat
                got = spec.paired.values(t)
                if got is not None:
                    (x if got[0] == "x" else i)[k, r] = got[1]
            if np.isnan(i).all():
                i = np.where(np.isfinite(x), 1.0, np.nan)
            n_pairs = len(models) * (len(models) - 1) // 2
            points = []
            have = int(min((np.isfinite(x[k]) & np.isfinite(i[k])).sum() for k in
                           range(len(models))))
            for profile, r in _profiles(spec).items():
                if r > have:
                    continue
                res = compare_all(x[:, :r], i[:, :r], precision=info.get("precision"),
                                  cycle=info.get("cycle"),
                                  higher_is_better=spec.higher_is_better)
                points.append((f"{profile} ({r} repeats, fixed)",
                               int((res["status"] != 0).sum()), float(secs[:, :r].sum())))
            for look in info.get("history") or []:
                reps = look["repeats"]
                cpu = sum(float(secs[models.index(m), :n].sum()) for m, n in reps.items()
                          if m in models)
                said = [v for v in (look.get("pairs") or {}).values() if v != "undecided"]
                points.append((f"race look at {look['look']}", len(said), cpu))
            out.append({"metric": spec.name, "table": f"{dataset}/{clusterer}" if clusterer
                        else dataset, "models": models, "pairs": n_pairs, "points": points,
                        "stopped": info.get("stopped")})
    return out


def figure_rows(tables: list) -> list:
    """Return the benchmark's rows (what, measured, verdict) of :func:`replay`'s tables."""
    rows = []
    for t in tables:
        pts = "; ".join(f"{label}: {d}/{t['pairs']} at {cpu / 60:.1f} CPU-min"
                        for label, d, cpu in t["points"])
        best = max((d for _, d, _ in t["points"]), default=0)
        rows.append((f"decided: {t['metric']} {t['table']}", pts,
                     f"{best / t['pairs']:.0%} of pairs at best; race stopped: {t['stopped']}"))
    return rows


def bench_decided(rows: list, extra: dict, db: str = None, wall: float = None) -> None:
    """Append the figure's rows: the racing run's wall time, then each table's points."""
    if db is None:
        work = Path(tempfile.mkdtemp(prefix="robench-decided-"))
        ran = run_default(work)
        db = ran["db"]
        rows.append(("racing `robench run --all --budget 10m` (fresh database, the user's cache)",
                     f"{ran['wall']:.0f} s wall, exit {ran['code']}",
                     f"load average {ran['load'][0]:.1f} before, {ran['load'][1]:.1f} after"))
        extra["decided_stdout"] = ran["stdout"]
    else:
        rows.append((f"racing `robench run --all --budget 10m` (read from {db})",
                     f"{wall:.0f} s wall (as given)" if wall else "wall not given",
                     "not re-run here"))
    tables = replay(Path(db))
    rows.extend(figure_rows(tables))
    extra["decided"] = tables


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, help="read this database instead of running")
    p.add_argument("--wall", type=float, default=None, help="with --db: its run's wall seconds")
    args = p.parse_args()
    sys._robench_called_from_test = True  # never pick up installed third-party plugins here
    rows, extra = [], {}
    bench_decided(rows, extra, args.db, args.wall)
    width = max(len(r[0]) for r in rows)
    for what, measured, verdict in rows:
        print(f"{what:<{width}}  {measured}  |  {verdict}")


if __name__ == "__main__":
    main()
