"""Write robench's reference durations: what `robench run --dry-run` projects from where the
results database holds nothing like the plan (a fresh directory).

    python benchmarks/reference_durations.py --db standard.db:1 --db robench.db:1 \
        --out robench/run/reference_durations.json

Each ``--db PATH[:RUN,RUN...]`` contributes the mean seconds of its successful trials per data
set, model, protocol, kind and epoch budget (``Store.trial_durations``), restricted to the
named runs (take the runs of an idle machine: load changes the seconds several times over).
Groups that several databases hold are pooled, weighted by their trial counts. The file is
stamped with the runs' commit, machine and date, which `--dry-run` prints beside the
projection.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from robench.storage.store import Store  # noqa: E402

KEY = ("dataset", "model", "protocol", "kind", "max_epochs")


def read(spec: str) -> tuple:
    """Return (duration rows, stamps of the runs used) of one ``PATH[:RUN,...]``."""
    path, _, runs = spec.partition(":")
    ids = [int(r) for r in runs.split(",")] if runs else None
    with Store(path, readonly=True) as store:
        rows = [dict(r) for r in store.trial_durations(runs=ids)]
        stamps = store.runs(ids)
    return rows, stamps


def pool(groups: list) -> list:
    """Return one row per key: the trial-weighted mean seconds over the databases."""
    out: dict = {}
    for r in groups:
        k = tuple(r[c] for c in KEY)
        s, n = out.get(k, (0.0, 0))
        out[k] = (s + float(r["seconds"]) * int(r["n"]), n + int(r["n"]))
    return [{**dict(zip(KEY, k)), "seconds": round(s / n, 4), "n": n}
            for k, (s, n) in sorted(out.items(), key=lambda kv: tuple(map(str, kv[0])))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", action="append", required=True, metavar="PATH[:RUN,...]")
    p.add_argument("--out", default=str(ROOT / "robench" / "run" / "reference_durations.json"))
    args = p.parse_args(argv)
    rows, stamps = [], []
    for spec in args.db:
        r, s = read(spec)
        rows += r
        stamps += [{**x, "database": Path(spec.partition(":")[0]).name} for x in s]
    commits = sorted({str(s["git_rev"] or "?")[:10] for s in stamps})
    machines = sorted({s["platform"] or "?" for s in stamps})
    profiles = sorted({(s["config"] or {}).get("profile", "?") for s in stamps})  # decoded
    measured = {"commit": ", ".join(commits), "machine": "; ".join(machines),
                "date": max((s["started_at"] or "")[:10] for s in stamps) if stamps else "",
                "profiles": profiles,
                "runs": [f"{s['database']} run {s['id']}" for s in stamps]}
    pooled = pool(rows)
    body = ",\n".join("  " + json.dumps(r, sort_keys=True) for r in pooled)  # a row a line
    Path(args.out).write_text('{"measured": ' + json.dumps(measured, sort_keys=True)
                              + ',\n "rows": [\n' + body + "\n]}\n")
    print(f"wrote {args.out}: {len(pooled)} groups from {sum(r['n'] for r in pooled)} trials "
          f"({', '.join(measured['runs'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
