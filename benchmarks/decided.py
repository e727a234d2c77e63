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

``python benchmarks/decided.py --rules PATH [--max-repeats 40]`` replays the race of two rules
on the same stored trials of a fixed run with many repeats (``robench run -r 40 ...``), per
table, side by side (:func:`rule_tables`): **4e263f3's** (doubling looks at whole cycles,
10, 20, 40, every test at alpha / K, Bonferroni over the K planned looks; equivalence within
0.01; every trial kind trained at every look, rho's random split included) and **now**
(:mod:`robench.run.adaptive`: a look at every complete cycle, alpha spent across them by
:data:`robench.run.adaptive.SPENDING`, the metric's margin, only the paired kinds past the
quick profile's repeats). Both race with elimination (only models of an undecided pair get
the next look) and use today's paired test (:func:`robench.stats.paired.compare_all`); at
4e263f3 independent repeats (coverage) were tested by the betting test, which decided no pair
at any affordable number of repeats (issue 49): its coverage columns are therefore an upper
bound on what 4e263f3 decided. A table's CPU is the recorded seconds of the trials each rule
would have trained. Printed: decided pairs, CPU-minutes and decided pairs per CPU-minute,
per table and in all.
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


#: 4e263f3's race: its looks, level split and default equivalence margin.
OLD_RULE = {"name": "4e263f3: doubling looks, Bonferroni over them, margin 0.01, every kind",
            "spending": None, "margin": 0.01, "all_kinds": True}


def _per_repeat(spec, trials: list, models: list, top: int) -> tuple:
    """Return (x, i, cpu of the paired kinds, cpu of the other kinds), each (models, top)."""
    x = np.full((len(models), top), np.nan)
    i = np.full((len(models), top), np.nan)
    paired_cpu = np.zeros((len(models), top))
    other_cpu = np.zeros((len(models), top))
    kinds = spec.paired.kinds
    for t in trials:
        k, r = models.index(t["model"]), int(t["repeat"])
        if r >= top:
            continue
        used = not kinds or t.get("kind") in kinds
        (paired_cpu if used else other_cpu)[k, r] += float(t.get("seconds") or 0.0)
        got = spec.paired.values(t)
        if got is not None:
            (x if got[0] == "x" else i)[k, r] = got[1]
    if np.isnan(i).all():
        i = np.where(np.isfinite(x), 1.0, np.nan)
    return x, i, paired_cpu, other_cpu


def _race(x, i, cycle, margin: float, spending, higher: bool) -> tuple:
    """Race one stored table (models, R) as benchmarks/simulations.py's ``run_sequential``
    does; return (pairs decided, repeats each model used)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from simulations import run_sequential

    final = run_sequential(x[None], i[None], max_repeats=x.shape[1], precision=margin,
                           cycle=cycle, spending=spending, higher_is_better=higher)
    return int((final["status"][0] != 0).sum()), final["repeats"][0]


def rule_tables(db: Path, max_repeats: int = 40) -> list:
    """Return, per racing table of ``db`` whose models all have ``max_repeats`` repeats, what
    4e263f3's rule and today's decide and the CPU-seconds of the trials each trains."""
    from robench.plugins import get_registry
    from robench.run.adaptive import SPENDING
    from robench.run.config import REPEATS
    from robench.stats.ranks import equivalence_margin
    from robench.stats.sequential import PRECISION
    from robench.storage.store import Store

    reg = get_registry()
    store = Store(db, readonly=True)
    try:
        trials = [t for t in store.trials() if t["status"] == "ok"
                  and t.get("repeat") is not None]
    finally:
        store.close()
    base = REPEATS["quick"]
    out = []
    for spec in reg.all("metrics"):
        if spec.paired is None:
            continue
        mine = [t for t in trials if t["protocol"] == spec.protocol]
        tables: dict = {}
        for t in mine:
            if spec.paired.values(t) is not None:
                tables.setdefault((t["dataset"], t.get("clusterer") or ""), set()).add(t["model"])
        for (dataset, clusterer), models in sorted(tables.items()):
            models = sorted(models)
            rows = [t for t in mine if t["dataset"] == dataset and t["model"] in models
                    and (t.get("clusterer") or "") in (clusterer, "")]
            x, i, pc, oc = _per_repeat(spec, rows, models, max_repeats)
            complete = np.isfinite(x).all(1) & np.isfinite(i).all(1)
            if len(models) < 2 or not complete.all():
                continue
            cycles = {int(t["extra"]["cycle"]) for t in rows if isinstance(t.get("extra"), dict)
                      and t["extra"].get("cycle") and t.get("kind") == "exclusive"}
            cycle = cycles.pop() if len(cycles) == 1 and spec.uses_clusterer else None
            entry = {"metric": spec.name, "table": f"{dataset}/{clusterer}" if clusterer
                     else dataset, "pairs": len(models) * (len(models) - 1) // 2}
            for name, margin, spending, all_kinds in (
                    ("old", OLD_RULE["margin"], None, True),
                    ("new", equivalence_margin(spec.name, spec.paired.margin or PRECISION),
                     SPENDING, False)):
                decided, reps = _race(x, i, cycle, margin, spending, spec.higher_is_better)
                cpu = sum(float(pc[k, :n].sum() + oc[k, :n if all_kinds else min(n, base)].sum())
                          for k, n in enumerate(reps))
                entry[name] = {"decided": decided, "cpu": cpu, "margin": margin,
                               "repeats": [int(n) for n in reps]}
            out.append(entry)
    return out


def rule_rows(tables: list) -> list:
    """Return the printed rows of :func:`rule_tables`: per table and in all, decided pairs,
    CPU-minutes and decided pairs per CPU-minute under each rule, and the ratio."""
    rows = []
    tot = {"old": [0, 0.0], "new": [0, 0.0]}

    def rate(d, cpu):
        return d / (cpu / 60) if cpu > 0 else float("nan")

    for t in tables + [None]:
        if t is None:
            name, pairs = "all tables", sum(x["pairs"] for x in tables)
            got = {k: {"decided": v[0], "cpu": v[1]} for k, v in tot.items()}
        else:
            name, pairs, got = f"{t['metric']} {t['table']}", t["pairs"], t
            for k in tot:
                tot[k][0] += t[k]["decided"]
                tot[k][1] += t[k]["cpu"]
        o, n = got["old"], got["new"]
        ro, rn = rate(o["decided"], o["cpu"]), rate(n["decided"], n["cpu"])
        ratio = (f"{rn / ro:.1f}x" if ro > 0 else
                 ("new decides, old none" if n["decided"] else "neither decides"))
        rows.append((f"rules: {name}",
                     f"4e263f3 {o['decided']}/{pairs} in {o['cpu'] / 60:.1f} CPU-min "
                     f"({ro:.2f}/min); now {n['decided']}/{pairs} in {n['cpu'] / 60:.1f} "
                     f"CPU-min ({rn:.2f}/min)", ratio))
    return rows


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
    p.add_argument("--rules", default=None, metavar="DB",
                   help="replay 4e263f3's race rule and today's on this database's stored trials")
    p.add_argument("--max-repeats", type=int, default=40, help="with --rules: the race's maximum")
    args = p.parse_args()
    sys._robench_called_from_test = True  # never pick up installed third-party plugins here
    rows, extra = [], {}
    if args.rules:
        rows = rule_rows(rule_tables(Path(args.rules), args.max_repeats))
    else:
        bench_decided(rows, extra, args.db, args.wall)
    width = max(len(r[0]) for r in rows)
    for what, measured, verdict in rows:
        print(f"{what:<{width}}  {measured}  |  {verdict}")


if __name__ == "__main__":
    main()
