"""Write the results figures of docs/ from a named results database (``robench report``).

Every figure in the documentation lives in a generated block of a Markdown file::

    <!-- generated: report:rho:mnist-5k -->
    ... rewritten by `robench report`, never by hand ...
    <!-- /generated -->

:func:`generate` reads the database read-only, renders each block from the registered
metrics (their ``report`` and ``claims``, which each family supplies) and rewrites only the
text between the markers; the prose around them is left as it is. Every block opens with a
stamp naming the database, the profile, the commit and the machine of the runs its scores
came from, so a figure can always be traced to what produced it.

Block names (``KIND[:ARG[:ARG]]``):

``report:METRIC[:DATASET]``
    The metric's own report (what ``robench results --metric METRIC`` prints), as text.
``scores:METRIC[:DATASET[:SCORE,SCORE...]]``
    A Markdown table of the stored score rows, with their intervals.
``claims[:METRIC]``
    The papers' claims decided on the scores (:mod:`robench.claims`), one row each.
``NAME@PROFILE``
    Any of these from the runs of one profile only; left as it is when the database has no
    run of that profile (so ``docs/claims.md``, pinned to ``standard``, survives a quick
    ``run --all``).
``runs``
    The runs in the database: command, profile, commit, machine, wall time, trials.
``seconds``
    Trial seconds per data set, protocol and model (what the runs cost).

The core names no family: a metric that is not registered, or has no rows in the database,
renders a one-line note saying so instead of a figure.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[^>]*?) -->)\n(?P<body>.*?)(?P<close><!-- /generated -->)",
    re.S,
)
OPEN_MARK = re.compile(r"<!-- generated: ([^>]*?) -->")
CLOSE_MARK = "<!-- /generated -->"
#: Commands longer than this are cut in the runs table (the database keeps them whole).
COMMAND_WIDTH = 120
KINDS = ("report", "scores", "claims", "runs", "seconds")


class DocgenError(ValueError):
    """A marked block cannot be generated; the message names the file and the block."""


@dataclass
class Results:
    """What a results database holds, read once: score rows, runs and trial seconds."""

    label: str
    scores: list
    runs: dict
    trials: list = field(default_factory=list)

    def profile_of(self, run_id) -> str:
        """Return the profile of a run ("?" if unknown)."""
        run = self.runs.get(run_id)
        return _profile(run) if run else "?"

    def only(self, profile: Optional[str]) -> "Results":
        """Return the results of the runs with this profile (all of them for None)."""
        if profile is None:
            return self
        keep = {i for i in self.runs if self.profile_of(i) == profile}
        return Results(self.label, [r for r in self.scores if r.get("run_id") in keep],
                       {i: r for i, r in self.runs.items() if i in keep},
                       [t for t in self.trials if t.get("run_id") in keep])

    def rows(self, metric: Optional[str] = None, dataset: Optional[str] = None) -> list:
        """Return the score rows, optionally of one metric and data set.

        Where the database holds the same score from several configurations (e.g. a quick
        and a standard run), only the latest run's row is returned.
        """
        latest: dict = {}
        for r in self.scores:
            if (metric is not None and r["metric"] != metric) or (
                    dataset is not None and r["dataset"] != dataset):
                continue
            ident = (r["dataset"], r["model"], r["clusterer"] or "", r["metric"], r["score"])
            if ident not in latest or (r.get("run_id") or 0) >= (latest[ident].get("run_id")
                                                                   or 0):
                latest[ident] = r
        return list(latest.values())

    def seconds(self) -> list:
        """Return trial seconds per (data set, protocol, model): trials, total, mean."""
        groups: dict = {}
        for t in self.trials:
            groups.setdefault((t["dataset"], t["protocol"], t["model"] or ""), []).append(
                float(t["seconds"]))
        return [{"dataset": d, "protocol": p, "model": m, "trials": len(v), "total": sum(v),
                 "mean": sum(v) / len(v)} for (d, p, m), v in sorted(groups.items())]


def load(path, label: Optional[str] = None) -> Results:
    """Read a results database read-only (the file is never changed) into :class:`Results`."""
    from robench.store import decode_row

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results database at {path}; run `robench run` first")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA query_only = ON")
        try:
            scores = [decode_row("scores", dict(r)) for r in conn.execute(
                "SELECT * FROM scores ORDER BY dataset, metric, clusterer, model, score")]
            runs = {r["id"]: decode_row("runs", dict(r))
                    for r in conn.execute("SELECT * FROM runs ORDER BY id")}
            trials = [dict(r) for r in conn.execute(
                "SELECT run_id, dataset, protocol, model, seconds FROM trials "
                "WHERE status = 'ok' AND seconds IS NOT NULL")]
        except sqlite3.DatabaseError as exc:
            raise DocgenError(f"{path} is not a robench results database ({exc})") from None
    finally:
        conn.close()
    return Results(label or str(path), scores, runs, trials)


# -- stamps ---------------------------------------------------------------------------------


def _profile(run: dict) -> str:
    cfg = run.get("config") or {}
    return str(cfg.get("profile") or "?") if isinstance(cfg, dict) else "?"


def _wall(run: dict) -> Optional[float]:
    try:
        a = datetime.fromisoformat(str(run["started_at"]).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(run["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    return (b - a).total_seconds()


def _commit(run: dict) -> str:
    rev = run.get("git_rev")
    return rev[:10] if rev else "unknown"


def stamp(results: Results, rows: Optional[list] = None) -> str:
    """Return the stamp line of a block: database, profile(s), commit(s), machine(s), runs.

    With ``rows``, only the runs those score rows were computed in are named; without, every
    run in the database.
    """
    ids = (sorted({r["run_id"] for r in rows if r.get("run_id") is not None})
           if rows is not None else sorted(results.runs))
    runs = [results.runs[i] for i in ids if i in results.runs]

    def joined(values):
        seen = list(dict.fromkeys(values))
        return ", ".join(seen) if seen else "unknown"

    dates = sorted({str(r.get("started_at") or "")[:10] for r in runs} - {""})
    when = dates[0] if len(dates) == 1 else (f"{dates[0]} to {dates[-1]}" if dates else "?")
    run_ids = (", ".join(str(i) for i in ids) if len(ids) <= 6
               else f"{ids[0]}-{ids[-1]} ({len(ids)} runs)")
    return (f"*Generated by `robench report` from `{results.label}`: profile "
            f"{joined(_profile(r) for r in runs)}; commit {joined(_commit(r) for r in runs)}; "
            f"machine {joined(str(r.get('platform') or 'unknown') for r in runs)}; "
            f"run {run_ids or '-'} ({when}). Do not edit by hand.*")


# -- blocks ---------------------------------------------------------------------------------


def _num(v, pct: bool = False, digits: int = 3) -> str:
    if v is None or isinstance(v, bool) or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, (int, float)):
        return f"{100 * v:.1f}" if pct else f"{v:.{digits}f}"
    return str(v)


def _md_table(header: list, rows: list) -> list:
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return out


def _metric(registry, name: str):
    try:
        return registry.get("metrics", name)
    except LookupError:
        return None


def _missing(what: str, metric: str) -> list:
    return [f"No {what} in this database: run `robench run --metric {metric}` and regenerate."]


def render_report(results: Results, registry, metric: str, dataset: Optional[str]) -> list:
    """Return the lines of a ``report:`` block."""
    rows = results.rows(metric, dataset)
    if not rows:
        return [stamp(results, []), ""] + _missing(
            f"scores of metric '{metric}'" + (f" on '{dataset}'" if dataset else ""), metric)
    spec = _metric(registry, metric)
    if spec is not None and spec.report is not None:
        lines = "\n".join(spec.report(rows)).split("\n")
    else:
        lines = [f"{r['dataset']} {r['model']} {r['clusterer'] or ''} {r['score']} "
                 f"{_num(r.get('value'))} [{_num(r.get('ci_low'))}, {_num(r.get('ci_high'))}]"
                 for r in rows]
    while lines and not lines[0].strip():
        lines.pop(0)
    return [stamp(results, rows), "", "```text", *[ln.rstrip() for ln in lines], "```"]


def render_scores(results: Results, metric: str, dataset: Optional[str],
                  names: Optional[list]) -> list:
    """Return the lines of a ``scores:`` block: one Markdown row per score."""
    rows = [r for r in results.rows(metric, dataset) if not names or r["score"] in names]
    if not rows:
        return [stamp(results, []), ""] + _missing(
            f"scores of metric '{metric}'" + (f" on '{dataset}'" if dataset else ""), metric)
    if names:
        rows.sort(key=lambda r: (r["dataset"], r["clusterer"] or "", r["model"],
                                 names.index(r["score"])))
    table = [[r["dataset"], r["model"] or "-", r["clusterer"] or "-", r["score"],
              _num(r.get("value")),
              "-" if r.get("ci_low") is None or r.get("ci_high") is None
              else f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}]",
              r.get("n") if r.get("n") is not None else "-"] for r in rows]
    return [stamp(results, rows), ""] + _md_table(
        ["data set", "model", "clusterer", "score", "value", "95% CI", "n"], table)


def render_claims(results: Results, registry, metric: Optional[str]) -> list:
    """Return the lines of a ``claims`` block: one Markdown row per claim with its verdict."""
    from robench.claims import evaluate

    rows = results.rows(metric)
    claims = evaluate(registry, rows)
    if not claims:
        return [stamp(results, rows), ""] + _missing("scores that decide a claim",
                                                     metric or "NAME")
    table = [[c.paper, c.claim, c.paper_figure, c.dataset, c.figure, f"**{c.verdict}**",
              c.why] for c in claims]
    counts = Counter(c.verdict for c in claims)
    summary = ", ".join(f"{n} {v}" for v, n in counts.most_common())
    return [stamp(results, rows), "", f"{len(claims)} claims: {summary}.", ""] + _md_table(
        ["paper", "claim", "paper's figure", "data set", "robench's figure (95% CI)",
         "verdict", "why"], table)


def render_runs(results: Results) -> list:
    """Return the lines of a ``runs`` block: one row per run with its wall time."""
    table = []
    for run in results.runs.values():
        wall = _wall(run)
        command = str(run.get("command") or "")
        if len(command) > COMMAND_WIDTH:
            command = command[:COMMAND_WIDTH - 4] + " ..."
        table.append([run["id"], f"`{command}`", _profile(run), _commit(run),
                      run.get("platform") or "unknown",
                      "-" if wall is None else f"{wall:.1f}",
                      run.get("n_planned") if run.get("n_planned") is not None else "-",
                      run.get("n_ok") if run.get("n_ok") is not None else "-",
                      run.get("n_failed") if run.get("n_failed") is not None else "-",
                      run.get("status") or "-"])
    return [stamp(results), ""] + _md_table(
        ["run", "command", "profile", "commit", "machine", "wall s", "planned", "ran ok",
         "failed", "status"], table)


def render_seconds(results: Results) -> list:
    """Return the lines of a ``seconds`` block: trial seconds per data set, protocol, model."""
    groups = results.seconds()
    table = [[r["dataset"], r["protocol"], r["model"] or "-", r["trials"], f"{r['total']:.1f}",
              f"{r['mean']:.2f}"] for r in groups]
    total = sum(r["total"] for r in groups)
    return [stamp(results), "", f"{sum(r['trials'] for r in groups)} trials, "
            f"{total:.0f} worker-seconds in all (one worker's seconds; runs use one worker per "
            "core).", ""] + _md_table(
        ["data set", "protocol", "model", "trials", "seconds", "per trial"], table)


def split_name(name: str) -> tuple:
    """Return (block name, profile or None) of ``NAME[@PROFILE]``."""
    base, at, profile = name.partition("@")
    return base.strip(), (profile.strip() or None) if at else None


def render(name: str, results: Results, registry) -> Optional[list]:
    """Return the lines of the block called ``name`` (without its markers).

    ``NAME@PROFILE`` renders only what runs of that profile stored, and returns None (keep
    the block as it is) when the database holds no such run: a page of standard-profile
    figures is not overwritten by a quick run's database.
    """
    from robench.config import PROFILES

    name, profile = split_name(name)
    if profile is not None:
        if profile not in PROFILES:
            raise DocgenError(f"block '{name}@{profile}': unknown profile '{profile}'; known: "
                              + ", ".join(PROFILES))
        results = results.only(profile)
        if not results.runs:
            _check_name(name, registry)
            return None
    _check_name(name, registry)
    kind, *args = [part.strip() for part in name.split(":")]
    if kind in ("report", "scores"):
        dataset = args[1] if len(args) > 1 and args[1] else None
        if kind == "report":
            return render_report(results, registry, args[0], dataset)
        names = [s for s in args[2].split(",") if s] if len(args) > 2 else None
        return render_scores(results, args[0], dataset, names)
    if kind == "claims":
        return render_claims(results, registry, args[0] if args else None)
    return render_runs(results) if kind == "runs" else render_seconds(results)


def _check_name(name: str, registry) -> None:
    kind, *args = [part.strip() for part in name.split(":")]
    if kind not in KINDS:
        raise DocgenError(f"unknown block '{name}'; blocks are "
                          + ", ".join(f"'{k}'" for k in KINDS) + " (robench.docgen)")
    if kind in ("report", "scores"):
        if not args or not args[0]:
            raise DocgenError(f"block '{name}' needs a metric: {kind}:METRIC[:DATASET]")
        if _metric(registry, args[0]) is None:
            raise DocgenError(f"block '{name}': no metric '{args[0]}' is registered")
    elif kind == "claims":
        if args and _metric(registry, args[0]) is None:
            raise DocgenError(f"block '{name}': no metric '{args[0]}' is registered")
    elif args:
        raise DocgenError(f"block '{name}' takes no arguments")


# -- files ----------------------------------------------------------------------------------


def check_markers(text: str, where: str) -> None:
    """Raise DocgenError unless every opening marker has its own closing one."""
    depth, line_no = 0, 0
    for line_no, line in enumerate(text.splitlines(), 1):
        if OPEN_MARK.search(line):
            if depth:
                raise DocgenError(f"{where}:{line_no}: a generated block opens inside another")
            depth = 1
        if CLOSE_MARK in line:
            if not depth:
                raise DocgenError(f"{where}:{line_no}: '{CLOSE_MARK}' without an opening marker")
            depth = 0
    if depth:
        raise DocgenError(f"{where}: a generated block is not closed with '{CLOSE_MARK}'")


def rewrite(text: str, results: Results, registry, where: str = "<text>",
            kept: Optional[list] = None) -> tuple:
    """Return (new text, block names) with every generated block of ``text`` re-rendered.

    Blocks pinned to a profile the database has no run of are left as they are and their
    names appended to ``kept``.
    """
    check_markers(text, where)
    names = []

    def sub(match):
        name = match.group("name").strip()
        names.append(name)
        try:
            body = render(name, results, registry)
        except DocgenError as exc:
            raise DocgenError(f"{where}: {exc}") from None
        if body is None:
            if kept is not None:
                kept.append(name)
            return match.group(0)
        return f"{match.group('open')}\n" + "\n".join(body) + f"\n{match.group('close')}"

    return BLOCK.sub(sub, text), names


def generate(db_path, out_dir, registry=None, label: Optional[str] = None,
             check: bool = False) -> list:
    """Rewrite the generated blocks of every ``*.md`` under ``out_dir`` from ``db_path``.

    Returns ``[(path, block names, changed, kept)]`` for the files that have blocks, ``kept``
    naming the blocks pinned to a profile the database has no run of (left as they are).
    With ``check``, nothing is written (changed says which files are stale).
    """
    if registry is None:
        from robench.plugins import get_registry

        registry = get_registry()
    out = Path(out_dir)
    if not out.is_dir():
        raise FileNotFoundError(f"no directory {out} to write the documentation into")
    results = load(db_path, label)
    done = []
    for path in sorted(out.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if "<!-- generated:" not in text:
            continue
        kept: list = []
        new, names = rewrite(text, results, registry, where=str(path), kept=kept)
        changed = new != text
        if changed and not check:
            path.write_text(new, encoding="utf-8")
        done.append((path, names, changed, kept))
    return done


def as_json(done: list) -> str:
    """Return ``generate``'s result as JSON (for scripts)."""
    return json.dumps([{"file": str(p), "blocks": n, "changed": c, "kept": k}
                       for p, n, c, k in done], indent=2)
