"""``robench run --until decided``: repeats in rounds until every table's order is decided.

It works for any metric that declares the paired comparison it supports
(``MetricSpec.paired``, a :class:`robench.specs.PairedComparison`: its headline score is a
ratio of two per-repeat means whose repeat r every model shares; rho declares it with
AccX / AccI). A table is one (metric, data set, clusterer) with its models ranked by that
score (for rho: rho). The run looks at the
tables after 6, 12, 24, ... repeats (:func:`robench.stats.sequential.looks`, up to ``--repeats`` or
the profile's repeats). At every look the models are ordered by their rho estimate and each
adjacent pair gets a paired interval for its difference rho_a - rho_b
(:func:`robench.stats.sequential.paired_difference`: the models of a repeat share its partitions,
so their difference varies far less than either), at the corrected level ``1 - 0.05 / K`` for
K planned looks. A pair is *ordered* when that interval excludes 0, *equivalent* when it lies
within ``±--precision``; only the models of an undecided pair get the next look's repeats, and
a table stops when no pair is undecided, or at the maximum. Each model's own rho interval
(Fieller's) is reported at the same corrected level, so it keeps >= 95% coverage wherever its
model stopped.

Repeats are trials keyed by their index, so a later look only runs the repeats the earlier
ones did not, and an interrupted run resumes from the store: rerunning replays the same looks
on the same stored trials, hence the same decisions. Every score of a table records
``details.design = "adaptive"`` and ``details.adaptive``: the repeats its model used and why
it stopped there (``repeats``, ``model_stopped``), the table's reason (``stopped``), the order,
the ranks the pair decisions give (``ranks``), every adjacent pair with its status,
difference, interval and common repeats (``pairs``), the planned and taken looks, the level.

Metrics without a paired comparison asked for in the same run are run once at the maximum
repeats, as a plain run would (``--metric rho`` runs rho alone).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Optional

import numpy as np

from robench.run.runner import ConfigError, Plan, RunReport, execute, plan_run
from robench.stats.paired import rank_text
from robench.stats.ranks import chance_level, chance_margin, chance_reason
from robench.stats.sequential import (ALPHA, EQUIVALENT, FIRST_LOOK, ORDERED, PRECISION, UNDECIDED,
                                      corrected_level, looks_for, stop_reason, table_look)

#: The decision rule's name, stored with every score (and in its inputs fingerprint): paired
#: delta-method differences, Hall's skew correction, Bonferroni over the looks.
RULE = "all-pairs-balanced-t-or-betting-holm-bonferroni"


def paired_metrics(metrics: list, registry) -> list:
    """Return the names among ``metrics`` whose MetricSpec declares a paired comparison."""
    return [m for m in metrics if registry.get("metrics", m).paired is not None]


def annotate(scores: list, level: float, adaptive: dict, interval: Callable) -> list:
    """Return scores with intervals at ``level`` and ``details.adaptive`` on every score.

    ``interval(score, level)`` is the metric's :attr:`PairedComparison.interval` (an
    :class:`robench.stats.intervals.Interval` or None for a score it has none for). The
    fixed-sample 95% interval the metric computed is kept in ``details`` as
    ``interval_fixed_sample``: after a sequential stop it does not have its nominal coverage.
    """
    out = []
    for s in scores:
        details = dict(s.details or {})
        iv = interval(s, level)
        if iv is not None:
            details["interval_fixed_sample"] = details.get("interval")
            details["interval"] = iv.as_dict()
            s = replace(s, ci_low=iv.low, ci_high=iv.high)
        details["adaptive"] = adaptive
        details["design"] = "adaptive"
        out.append(replace(s, details=details))
    return out


def _table_plan(cfg, registry, metric: str, table: tuple, model: str, n: int) -> Plan:
    dataset, clusterer = table
    sub = replace(cfg, metrics=[metric], datasets=[dataset], clusterers=[clusterer],
                  models=[model], repeats=n, explicit={})
    return plan_run(sub, registry)


def _merge(plans: list) -> Plan:
    merged = Plan()
    for p in plans:
        for k, spec in p.specs.items():
            merged.specs.setdefault(k, spec)
        merged.groups.extend(p.groups)
        merged.skipped.extend(p.skipped)
        merged.prepare.extend(x for x in p.prepare if x not in merged.prepare)
        merged.configurations.update(p.configurations)
    return merged


def check_decided(cfg, precision: float = PRECISION, registry=None) -> list:
    """Return the paired metrics of ``cfg``, or raise ConfigError if ``--until decided``
    cannot run this configuration (before any file is opened: the CLI calls it before the
    database)."""
    if registry is None:
        from robench.plugins import get_registry

        registry = get_registry()
    paired = paired_metrics(cfg.metrics, registry)
    if not paired:
        raise ConfigError("--until decided stops the tables of a metric that declares a paired "
                          f"comparison (MetricSpec.paired; rho does), and none of "
                          f"{', '.join(cfg.metrics)} does: add --metric rho")
    if not (isinstance(precision, (int, float)) and 0 < precision < float("inf")):
        raise ConfigError(f"--precision must be a finite number > 0, got {precision}")
    return paired


def run_until_decided(cfg, registry, store, *, precision: float = PRECISION,
                      alpha: float = ALPHA, command: str = "robench run --until decided",
                      on_event: Optional[Callable] = None, rescore: bool = False) -> RunReport:
    """Run the paired metrics' tables look by look until each is decided; return the report.

    ``cfg.repeats`` is the maximum. The report counts the trials of every round; its
    ``scores`` are the final scores of each paired metric (annotated, :func:`annotate`) and
    the scores of any other metric in ``cfg.metrics``; ``adaptive`` (an attribute added to the
    report) lists each table's decision.
    """
    paired = check_decided(cfg, precision, registry)
    t0 = time.perf_counter()
    if not cfg.knobs:
        cfg.resolve(registry)
    state = {"keys": set(), "ran": 0, "failed": [], "skipped": [], "scores": [],
             "tables": [], "report": None}

    others = [m for m in cfg.metrics if m not in paired]
    if others:
        other_cfg = replace(cfg, metrics=others)
        other_plan = plan_run(other_cfg, registry)
        report = execute(other_cfg, registry, store, command=command, on_event=on_event,
                         rescore=rescore, plan=other_plan)
        _add(state, report, other_plan)
        state["failed"] += report.failed
        state["skipped"] += report.skipped
        state["scores"] += report.scores
        if report.interrupted:
            return _final(state, t0)
    for metric in paired:
        _decide(cfg, registry, store, registry.get("metrics", metric), state,
                precision=precision, alpha=alpha, command=command, on_event=on_event,
                rescore=rescore)
        if state["report"].interrupted:
            break
    return _final(state, t0)


def _decide(cfg, registry, store, spec, state: dict, *, precision: float, alpha: float,
            command: str, on_event: Optional[Callable], rescore: bool) -> None:
    """Run one paired metric's tables look by look; add its trials and scores to ``state``."""
    metric = spec.name
    emit = on_event or (lambda *a, **k: None)
    # looks at whole cycles of the balanced held-out design where the metric has sources
    plan_looks = looks_for(cfg.repeats, FIRST_LOOK, cfg.k if spec.uses_clusterer else None)
    level = corrected_level(len(plan_looks), alpha)
    margin = chance_margin()
    first = plan_run(replace(cfg, metrics=[metric], repeats=plan_looks[0]), registry)
    state["skipped"] += first.skipped
    tables = list(dict.fromkeys((g.combo.dataset.name, g.combo.clusterer.name)
                                for g in first.groups))
    if not tables:  # nothing applicable: a plain run records the skips
        report = execute(replace(cfg, metrics=[metric], repeats=plan_looks[0]), registry,
                         store, command=command, on_event=on_event, plan=first)
        _add(state, report, first)
        state["failed"] += report.failed
        return
    models = {t: [g.combo.model.name for g in first.groups
                  if (g.combo.dataset.name, g.combo.clusterer.name) == t] for t in tables}
    pending = list(tables)
    history = {t: [] for t in tables}
    current = {}  # (table, model) -> its group at the repeats it has so far
    final = {}  # table -> (groups, adaptive details)
    need = {t: list(models[t]) for t in tables}  # the models of each table to extend
    dropped: dict = {}  # table -> {model: why it is not ranked}: it gets no more repeats
    report = None
    for j, n in enumerate(plan_looks):
        if not pending:
            break
        emit("look", look=j + 1, looks=len(plan_looks), repeats=n,
             tables=[f"{d}/{c}" for d, c in pending])
        plans = {(t, m): _table_plan(cfg, registry, metric, t, m, n)
                 for t in pending for m in need[t]}
        merged = _merge(list(plans.values()))
        merged.skipped = []
        report = execute(replace(cfg, metrics=[metric], repeats=n), registry, store,
                         command=command, on_event=on_event, plan=merged, score=False)
        _add(state, report, merged)
        state["failed"] += report.failed
        if report.interrupted:
            return
        for (t, m), p in plans.items():
            current[(t, m)] = (p.groups[0], n)
        last = j == len(plan_looks) - 1
        for t in list(pending):
            ms = models[t]
            facts = _per_repeat(store, [current[(t, m)][0] for m in ms], n, spec.paired.values)
            x, i = facts["x"], facts["i"]
            # the chance guard first: a model not shown above chance + margin at a look is
            # not compared, gets no more repeats and is listed unranked with the reason
            guard = {m: _guard(i[0, k], facts["chance"], facts["basis"], level, margin)
                     for k, m in enumerate(ms)}
            for m in ms:
                if m in dropped.setdefault(t, {}):
                    guard[m] = (dropped[t][m], False)
                elif guard[m][0] is not None:
                    dropped[t][m] = guard[m][0]
            ranked = [m for m in ms if guard[m][0] is None]
            idx = [ms.index(m) for m in ranked]
            if ranked:
                res = table_look(x[:, idx], i[:, idx], precision, alpha, spec.higher_is_better,
                                 cycle=facts["cycle"], looks=len(plan_looks))
            else:  # nothing to rank: nothing to decide
                res = {"estimate": np.zeros((1, 0)), "pairs": [], "status": np.zeros((1, 0)),
                       "best": np.zeros((1, 0)), "worst": np.zeros((1, 0)),
                       "decided": np.array([True]), "open": np.zeros((1, 0), bool)}
            estimate = {m: _num(res["estimate"][0][k]) for k, m in enumerate(ranked)}
            order = sorted(ranked, key=lambda m: (estimate[m] is None,
                                                  -(estimate[m] or 0) if spec.higher_is_better
                                                  else (estimate[m] or 0)))
            pairs = []
            for k, (a, b) in enumerate(res["pairs"]):
                code = int(res["status"][0][k])
                pairs.append({"pair": [ranked[a], ranked[b]], "status": STATUS_WORDS[code],
                              "above": ranked[a] if code == 1 else ranked[b] if code == -1
                              else None})
            unclear = [m for m in ms if guard[m][0] is not None and guard[m][1]]
            decided = bool(res["decided"][0]) and not unclear
            statuses = [p["status"] for p in pairs]
            reason = stop_reason(statuses, decided, n, plan_looks[-1])
            if reason is None and last:
                reason = "maximum repeats reached, undecided"
            repeats = {m: current[(t, m)][1] for m in ms}
            history[t].append({"look": n, "repeats": repeats, "decided": decided,
                               "unranked": {m: guard[m][0] for m in ms if guard[m][0]},
                               "pairs": {f"{p['pair'][0]} ~ {p['pair'][1]}":
                                         p["above"] and f"{p['above']} above" or p["status"]
                                         for p in pairs}})
            open_ = {ranked[k] for k in range(len(ranked)) if res["open"][0][k]}
            need[t] = [m for m in ms if m in open_ or m in unclear]
            if reason is None:
                continue
            pending.remove(t)
            intervals = {m: rank_text(int(res["best"][0][k]), int(res["worst"][0][k]))
                         for k, m in enumerate(ranked)}
            adaptive = {
                "design": "adaptive", "rule": RULE, "score": spec.paired.score,
                "max_repeats": plan_looks[-1], "looks_planned": plan_looks,
                "looks_taken": plan_looks[:j + 1], "level": level, "alpha": alpha,
                "precision": precision, "cycle": facts["cycle"], "chance_margin": margin,
                "stopped": reason, "order": order, "ranks": intervals,
                "unranked": {m: guard[m][0] for m in ms if guard[m][0]},
                "pairs": pairs, "repeats_by_model": repeats, "history": history[t],
            }
            groups = []
            for m in ms:
                g, reps = current[(t, m)]
                mine = {**adaptive, "repeats": reps, "rank": intervals.get(m),
                        "model_stopped": (guard[m][0] if guard[m][0] else
                                          _model_reason(m, pairs, reps, reason))}
                groups.append(replace(g, options={"adaptive": {
                    "repeats": reps, "looks_planned": plan_looks, "level": level,
                    "precision": precision, "rule": RULE}},
                    finish=lambda s, a=mine: annotate(s, level, a, spec.paired.interval)))
            final[t] = (groups, {**adaptive, "repeats": max(repeats.values()),
                                 "trials": sum(len(g.keys) for g in groups)})
            emit("decided", table=f"{t[0]}/{t[1]}", repeats=repeats, reason=reason)

    from robench.run.scoring import score_groups

    groups = [g for t in tables if t in final for g in final[t][0]]
    versions = {metric: registry.component_version("metrics", metric)}
    new, _, _ = score_groups(groups, store, report.run_id, versions=versions, rescore=rescore)
    state["scores"] += new
    state["tables"] += [{"metric": metric, "dataset": t[0], "clusterer": t[1], **final[t][1]}
                        for t in tables if t in final]


#: Pair status codes of :func:`robench.stats.paired.compare_all` in words.
STATUS_WORDS = {0: UNDECIDED, 1: ORDERED, -1: ORDERED, 2: EQUIVALENT}


def _guard(inclusive, chance, basis: str, level: float, margin: float) -> tuple:
    """Return (why a model is not ranked or None, False).

    The chance guard of every ranking path (:func:`robench.stats.ranks.chance_reason`) on the
    model's inclusive accuracies so far, with their t interval at the run's corrected level.
    A model that fails it at a look is not ranked and gets no more repeats (the driver keeps
    the reason): a random-label model costs one look's repeats, never the real models'.
    """
    from robench.stats.intervals import mean_interval

    vals = [float(v) for v in inclusive if np.isfinite(v)]
    if chance is None:
        return None, False
    iv = mean_interval(vals, level, bounds=(0.0, 1.0)) if vals else None
    value = float(np.mean(vals)) if vals else None
    why = chance_reason(value, iv.low if iv else None, iv.high if iv else None, chance, basis,
                        values=vals, margin=margin,
                        interval_reason=(iv.as_dict().get("reason") if iv else "no repeats"))
    return why, False


def _num(v) -> Optional[float]:
    v = float(v)
    return v if np.isfinite(v) else None


def _per_repeat(store, groups: list, n: int, values: Callable) -> dict:
    """Return the paired comparison's values per repeat and what the tests need of the trials.

    ``x``, ``i`` of shape (1, models, n): ``values(trial)`` is the metric's
    :attr:`PairedComparison.values` (for rho: the exclusive accuracy as x, the inclusive as
    i; a model without any i is a plain mean, i = 1), NaN where a model's repeat was not run
    (it stopped earlier) or its trial failed. ``cycle``: the balanced design's cycle when
    every trial with one recorded the same (None otherwise: the betting test); ``chance``,
    ``basis``: the chance accuracy of the test sets (1/classes, or the majority-class rate
    where higher, :func:`robench.stats.ranks.chance_level`).
    """
    x = np.full((1, len(groups), n), np.nan)
    i = np.full((1, len(groups), n), np.nan)
    cycles, balanced, classes, shares = set(), True, 0, []
    for m, g in enumerate(groups):
        clus = g.key_dict.get("clusterer")
        for t in store.trials(keys=g.keys):
            r = t.get("repeat")
            if (t["status"] != "ok" or r is None or r >= n
                    or (clus is not None and t.get("clusterer") != clus)):
                continue
            got = values(t)
            if got is None:
                continue
            side, value = got
            (x if side == "x" else i)[0, m, r] = value
            extra = t.get("extra") if isinstance(t.get("extra"), dict) else {}
            if side == "x":
                if (t.get("params") or {}).get("held_out") == "balanced" and extra.get("cycle"):
                    cycles.add(int(extra["cycle"]))
                else:
                    balanced = False
            else:
                classes = max(classes, len(t.get("per_class") or []))
                counts = extra.get("test_class_counts")
                if isinstance(counts, list) and counts and sum(counts) > 0:
                    shares.append(max(counts) / sum(counts))
        if np.isnan(i[0, m]).all():  # a plain mean: no trial gives a denominator
            i[0, m] = np.where(np.isfinite(x[0, m]), 1.0, np.nan)
    cycle = cycles.pop() if balanced and len(cycles) == 1 else None
    majority = sum(shares) / len(shares) if shares else None
    chance, basis = chance_level(classes or None, majority) if classes else (None, "")
    return {"x": x, "i": i, "cycle": cycle, "chance": chance, "basis": basis}


def _model_reason(model: str, pairs: list, repeats: int, table_reason: str) -> str:
    """Return why one model of a stopped table stopped where it did."""
    mine = [p for p in pairs if model in p["pair"]]
    if not mine or any(p["status"] == UNDECIDED for p in mine):
        return table_reason
    said = ", ".join(
        f"{p['above']} > {[m for m in p['pair'] if m != p['above']][0]}" if p["above"]
        else f"{p['pair'][0]} ~ {p['pair'][1]}" for p in mine)
    return f"its pairs decided at {repeats} repeats ({said})"


def _add(state: dict, report: RunReport, plan: Plan) -> None:
    state["keys"].update(plan.specs)
    state["ran"] += report.n_ran
    state["report"] = report


def _final(state: dict, t0: float) -> RunReport:
    """Return one report for every round: distinct trials planned, run and stored before."""
    report = state["report"]
    n_planned = len(state["keys"])
    return RunReport(report.run_id, n_planned, n_planned - state["ran"], state["ran"],
                     state["failed"], state["skipped"], state["scores"],
                     time.perf_counter() - t0, report.interrupted, adaptive=state["tables"])
