"""``robench run --until decided``: repeats in rounds until every table's order is decided.

A table is one (metric, data set, clusterer) of a metric that declares a paired comparison
(``MetricSpec.paired``); docs/adaptive.md has the looks, the decision rule, the budget and what
every score stores.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Optional

import numpy as np

from robench.run import configurations
from robench.run import runner as _runner
from robench.run.configurations import configuration_row, fingerprint
from robench.run.ranking import refresh_ranks
from robench.run.config import REPEATS
from robench.run.runner import ConfigError, Plan, RunReport, plan_run
from robench.stats.paired import rank_text
from robench.stats.ranks import chance_level, chance_margin, chance_reason, equivalence_margin
from robench.stats.sequential import (ALPHA, EQUIVALENT, FIRST_LOOK, ORDERED, PRECISION, UNDECIDED,
                                      cycle_looks, decide_power, look_alphas, paired_difference,
                                      repeats_for_power, stop_reason, table_look)
from robench.plugins import get_registry
from robench.run.estimate import Durations, load_reference
from robench.run.scoring import score_groups
from robench.stats.intervals import mean_interval

#: How alpha is spent across the looks (:func:`robench.stats.sequential.spent`): Pocock-type,
#: 0.018 at the first of the looks 10, 15, ..., 40 (docs/adaptive.md, "Level").
SPENDING = "pocock"

#: The decision rule's name, stored with every score (and in its inputs fingerprint).
RULE = "all-pairs-skew-corrected-t-holm-pocock-spending-every-cycle"


def paired_metrics(metrics: list, registry) -> list:
    """Return the names among ``metrics`` whose MetricSpec declares a paired comparison."""
    return [m for m in metrics if registry.get("metrics", m).paired is not None]


def racing_metrics(registry) -> list:
    """Return the names of the registered metrics that can race (declare a paired comparison)."""
    return sorted(spec.name for spec in registry.all("metrics") if spec.paired is not None)


def annotate(scores: list, level: float, adaptive: dict, interval: Callable) -> list:
    """Return scores with intervals at ``level`` (``interval(score, level)``:
    :attr:`PairedComparison.interval`) and ``details.adaptive`` on every score."""
    out = []
    for s in scores:
        details = dict(s.details or {})
        if (iv := interval(s, level)) is not None:
            details["interval_fixed_sample"] = details.get("interval")
            details["interval"] = iv.as_dict()
            s = replace(s, ci_low=iv.low, ci_high=iv.high)
        details["adaptive"] = adaptive
        details["design"] = "adaptive"
        out.append(replace(s, details=details))
    return out


def _merge(plans: list) -> Plan:
    merged = Plan()
    for p in plans:
        for k, spec in p.specs.items():
            merged.specs.setdefault(k, spec)
        merged.groups.extend(p.groups)
        merged.prepare.extend(x for x in p.prepare if x not in merged.prepare)
        merged.configurations.update(p.configurations)
    return merged


def check_decided(cfg, precision: Optional[float] = None, registry=None) -> list:
    """Return the paired metrics of ``cfg``; raise ConfigError if ``--until decided`` cannot
    run it (the CLI calls it before opening the database)."""
    registry = get_registry() if registry is None else registry
    if not (paired := paired_metrics(cfg.metrics, registry)):
        can = racing_metrics(registry)
        raise ConfigError("--until decided races the tables of a metric that declares a paired "
                          f"comparison (MetricSpec.paired), and none of {', '.join(cfg.metrics)} "
                          "does: " + (f"add --metric {' or --metric '.join(can)}" if can else
                                      "no registered metric does"))
    if precision is not None and not (isinstance(precision, (int, float))
                                      and 0 < precision < float("inf")):
        raise ConfigError(f"--precision must be a finite number > 0, got {precision}")
    return paired


def with_repeats(cfg, spec, n: int):
    """Return ``cfg`` asking for ``n`` repeats of ``spec``'s metric (or of its ``repeats_knob``)."""
    knob = spec.paired.repeats_knob if spec.paired is not None else None
    if not knob:
        return replace(cfg, repeats=n)
    section, _, name = knob.partition(".")
    settings = {k: dict(v) for k, v in (cfg.settings or {}).items()}
    settings.setdefault(section, {})[name] = int(n)
    return replace(cfg, settings=settings, knobs={})


def run_until_decided(cfg, registry, store, *, precision: Optional[float] = None,
                      alpha: float = ALPHA, command: str = "robench run --until decided",
                      on_event: Optional[Callable] = None, rescore: bool = False,
                      budget: Optional[float] = None, max_repeats: Optional[int] = None,
                      plain_first: bool = False, plan: Optional[Plan] = None) -> RunReport:
    """Race the paired metrics' tables look by look until each is decided; return the report.

    ``max_repeats`` defaults to ``cfg.repeats``, ``budget`` is in seconds, ``plain_first`` is
    the main job's order (docs/adaptive.md, "Rounds, elimination and the budget").
    """
    race = _RaceRun(cfg, registry, store, precision=precision, alpha=alpha, command=command,
                    on_event=on_event, rescore=rescore, budget=budget, max_repeats=max_repeats)
    if plain_first:
        race.plain = plan or plan_run(cfg, registry)
    return race.run()


class _RaceRun:
    """One race: its rounds, the other metrics' plain run, and one report for all of them."""

    def __init__(self, cfg, registry, store, *, precision: Optional[float], alpha: float,
                 command: str, on_event: Optional[Callable], rescore: bool,
                 budget: Optional[float], max_repeats: Optional[int]):
        paired = check_decided(cfg, precision, registry)
        self.t0 = time.perf_counter()
        self.deadline = None if budget is None else time.monotonic() + float(budget)
        if not cfg.knobs:
            cfg.resolve(registry)
        self.cfg, self.registry, self.store = cfg, registry, store
        self.command, self.on_event, self.rescore = command, on_event, rescore
        self.others = [m for m in cfg.metrics if m not in paired]
        self.races = [_Race(cfg, registry, store, registry.get("metrics", m),
                            max_repeats or cfg.repeats, precision=precision, alpha=alpha,
                            on_event=on_event)
                      for m in paired]
        self.keys: set = set()
        self.ran, self.failed, self.scores, self.tables = 0, [], [], []
        self.skipped = [s for race in self.races for s in race.skipped]
        self.last: Optional[RunReport] = None
        self.budget_spent, self.durations = False, None
        self.plain: Optional[Plan] = None  # the main job: this plain run first
        self.plain_scores: list = []

    def run(self) -> RunReport:
        """Run the race to its end (decided, the maximum, the budget or an interrupt)."""
        if self.plain is not None and not self._run_plain():
            return self._report()
        for race in self.races:
            if not race.all_tables and self.plain is None:
                # a paired metric with no table here: a plain run records its skips
                cfg = race.config(race.plan_looks[0])
                self._execute(cfg, plan_run(cfg, self.registry))
        # the order: docs/adaptive.md, "Rounds"
        if not self._pending() and not self._run_others():
            return self._report()
        j, outcome = 0, "next"
        while outcome == "next" and self._pending():
            outcome, j = self._round(j), j + 1
        if outcome != "interrupted":
            self._finish()
        return self._report()

    def _pending(self) -> list:
        return [r for r in self.races if r.pending]

    def _execute(self, cfg, plan: Plan, **options) -> RunReport:
        report = _runner.execute(cfg, self.registry, self.store, command=self.command,
                                 on_event=self.on_event, plan=plan, **options)
        self.keys.update(plan.specs)
        self.ran += report.n_ran
        self.last = report
        self.failed += report.failed
        return report

    def _run_plain(self) -> bool:  # the main job's: every metric, no deadline
        report = self._execute(self.cfg, self.plain, rescore=self.rescore)
        self.skipped = list(report.skipped)
        self.plain_scores = list(report.scores)
        self.others = []
        return not report.interrupted

    def _run_others(self) -> bool:  # the metrics without a paired comparison, once
        if not self.others:
            return True
        cfg = replace(self.cfg, metrics=list(self.others))
        report = self._execute(cfg, plan_run(cfg, self.registry), rescore=self.rescore,
                               deadline=self.deadline)
        self.skipped += report.skipped
        self.scores += report.scores
        self.budget_spent |= report.budget_spent
        self.others = []
        return not report.interrupted

    def _spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _durations(self):
        if self.durations is None:
            self.durations = Durations(self.store.trial_durations(),
                                       fallback=Durations(load_reference()[0]))
        return self.durations

    def _round(self, j: int) -> str:
        """Take look j of every pending table; return "next", "stop" or "interrupted"."""
        due = self._pending()
        plans = {(race, t, m): p for race in due for (t, m), p in race.look_plans(j).items()}
        if self.deadline is not None:
            # the first look of every table is kept whatever it costs (in the cheapest order);
            # later looks only where they fit
            plans = _fit_budget(plans, self.store, self._durations(), self.deadline,
                                self.cfg.jobs, drop=j > 0 or self.plain is not None)
        if not plans:  # nothing fits: every table left stops at its last look
            return self._stop_all(due, self.deadline is not None)
        for race in due:
            race.announce(j, {t for r, t, _ in plans if r is race})
        merged = _merge(list(plans.values()))  # no skips: each race reports its own once
        metrics = list(dict.fromkeys(race.metric for race, _, _ in plans))
        n = max(race.plan_looks[min(j, len(race.plan_looks) - 1)] for race in due)
        report = self._execute(replace(self.cfg, metrics=metrics, repeats=n), merged,
                               score=False, deadline=self.deadline,
                               order=_table_order(plans) if self.deadline is not None else None)
        if report.interrupted:
            return "interrupted"
        spent = report.budget_spent or self._spent()
        for race in due:
            race.after_look(j, {t for r, t, _ in plans if r is race})
        if j == 0 and not self._run_others():
            return "interrupted"
        return self._stop_all(due, True) if spent or self._spent() else "next"

    def _stop_all(self, due: list, spent: bool) -> str:
        self.budget_spent = spent
        for race in due:
            for t in list(race.pending):
                race.stop_table(t, "undecided: the time budget is spent")
        return "stop"

    def _finish(self) -> None:
        """Price what would decide the open tables, then score every table."""
        if self.durations is not None or any(r.open_tables() for r in self.races):
            for race in self.races:
                race.price_next_looks(self._durations())
        if self.last is None:
            return
        raced = set()
        for race in self.races:
            self.scores += race.score(self.last.run_id, self.rescore)
            self.tables += race.tables()
            raced |= {(race.metric, t[0], t[1]) for t in race.all_tables if race.final.get(t)}
        # the main job: a table the race did not look at keeps its plain scores
        self.scores += [s for s in self.plain_scores
                        if (s.metric, s.dataset, s.clusterer or "") not in raced]
        if raced:
            refresh_ranks(self.store, self.registry)  # the raced tables' ranks, stored once

    def _not_run(self) -> int:
        """Return how many planned trials neither ran nor were stored (a budget, an interrupt)."""
        report = self.last
        if not (self.budget_spent or report.budget_spent or report.interrupted):
            return 0
        ok = self.store.ok_trial_keys(self.keys)
        failed = {f.get("key") for f in self.failed} - ok
        return max(len(self.keys) - len(ok) - len(failed), 0)

    def _report(self) -> RunReport:
        """Return one report for every round: distinct trials planned, run and stored before."""
        report, n_planned, not_run = self.last, len(self.keys), self._not_run()
        return RunReport(report.run_id, n_planned, n_planned - self.ran - not_run, self.ran,
                         self.failed, self.skipped, self.scores, time.perf_counter() - self.t0,
                         report.interrupted, adaptive=self.tables,
                         budget_spent=self.budget_spent or report.budget_spent,
                         n_not_run=not_run, main_job=self.plain is not None)


def _fit_budget(plans: dict, store, durations, deadline: float, jobs: int,
                drop: bool = True) -> dict:
    """Return the look plans whose tables fit the time left (with ``drop`` False: all of
    them), the most pairs expected decided (:meth:`_Race.gain`) per projected second first;
    a table that does not fit is stopped with its cost recorded."""
    by_table: dict = {}
    for (race, t, m), p in plans.items():
        by_table.setdefault((race, t), []).append(((race, t, m), p))
    stored = store.ok_trial_keys([k for p in plans.values() for k in p.specs])
    cost = {}
    for rt, entries in by_table.items():
        specs = {k: s for _, p in entries for k, s in p.specs.items() if k not in stored}
        cost[rt] = _seconds(specs.values(), durations, 1.0)
    left = (deadline - time.monotonic()) * max(int(jobs), 1)
    keep: dict = {}
    for rt in sorted(by_table, key=lambda rt: -rt[0].gain(rt[1]) / max(cost[rt], 1e-9)):
        race, t = rt
        if cost[rt] <= left or not drop:
            left -= cost[rt]
            keep.update(dict(by_table[rt]))
        else:
            race.stop_table(t, "undecided: its next look does not fit the time budget",
                            next_seconds=cost[rt])
    return keep


def _seconds(specs, durations, default: float) -> float:
    """Return the projected seconds of ``specs`` (one without an estimate: the others' mean)."""
    est = [durations.estimate(s)[0] for s in specs]
    known = [e for e in est if e is not None]
    fill = sum(known) / len(known) if known else default
    return sum(e if e is not None else fill for e in est)


def _paired_kinds(plan: Plan, kinds: Optional[tuple], base: int) -> Plan:
    """Return ``plan`` without the trials of kinds not in ``kinds`` past the profile's ``base``
    repeats (for rho: no random-split trial)."""
    drop = {k for k, s in plan.specs.items()
            if kinds and s.get("kind") is not None and s.get("kind") not in kinds
            and int(s.get("repeat") or 0) >= base}
    if not drop:
        return plan
    return replace(plan, specs={k: s for k, s in plan.specs.items() if k not in drop},
                   groups=[replace(g, keys=[k for k in g.keys if k not in drop])
                           for g in plan.groups])


def _table_order(plans: dict) -> Callable:
    """Return a budgeted round's order: table by table, so a deadline leaves whole tables."""
    rank: dict = {}
    for k, p in enumerate(plans.values()):
        rank.update({key: k for key in p.specs if key not in rank})
    return lambda specs: sorted(specs, key=lambda s: rank.get(s["key"], len(rank)))


class _Race:
    """One paired metric's tables, look by look (the state :func:`run_until_decided` drives)."""

    def __init__(self, cfg, registry, store, spec, top: int, *, precision: Optional[float],
                 alpha: float, on_event: Optional[Callable]):
        self.cfg, self.registry, self.store, self.spec = cfg, registry, store, spec
        self.metric = spec.name
        # the equivalence margin: --precision, else the metric's own (ROBENCH_MARGIN overrides)
        self.precision = precision if precision is not None else equivalence_margin(
            spec.name, spec.paired.margin or PRECISION)
        self.alpha, self.emit = alpha, on_event or (lambda *a, **k: None)
        # the looks and the alpha spent at each (docs/adaptive.md, "The rule")
        self.plan_looks = cycle_looks(top, cfg.k if spec.uses_clusterer else None, FIRST_LOOK)
        self.alphas = look_alphas(self.plan_looks, self.plan_looks[-1], alpha, SPENDING)
        # one configuration for every score of a raced table, whatever look its model
        # stopped at: the race up to its maximum repeats (a view shows the table whole)
        self.configuration = {**configurations.describe(self.config(self.plan_looks[-1]), spec,
                                                         registry), "raced": SPENDING}
        self.margin = chance_margin()
        first = plan_run(self.config(self.plan_looks[0]), registry)
        self.skipped = first.skipped
        self.models: dict = {}  # table -> its models
        for g in first.groups:
            t = (g.combo.dataset.name, g.combo.clusterer.name if g.combo.clusterer else "")
            self.models.setdefault(t, []).append(g.combo.model.name)
        self.all_tables = list(self.models)
        self.pending = list(self.all_tables)
        self.history = {t: [] for t in self.all_tables}
        self.current: dict = {}  # (table, model) -> (its group, repeats it has so far)
        self.final: dict = {}  # table -> (groups, adaptive details)
        self.need = {t: list(self.models[t]) for t in self.all_tables}
        self.dropped: dict = {}  # table -> {model: why it is not ranked}
        self.last: dict = {}  # table -> the evaluation of its last look
        self.plans: dict = {}
        self.next_cost: dict = {}  # table -> projected seconds of its next look

    def config(self, n: int):
        """Return the run's configuration for this metric alone at ``n`` repeats."""
        return with_repeats(replace(self.cfg, metrics=[self.metric]), self.spec, n)

    def _n(self, j: int) -> int:
        return self.plan_looks[min(j, len(self.plan_looks) - 1)]

    def _level(self, j: int) -> float:
        """Return look j's confidence level, 1 - the alpha spent at it."""
        return 1.0 - self.alphas[min(max(j, 0), len(self.alphas) - 1)]

    def look_plans(self, j: int) -> dict:
        """Return {(table, model): plan} of look j for the pending tables' open models."""
        n = self._n(j)
        self.plans = {(t, m): self._plan(t, m, n) for t in self.pending for m in self.need[t]}
        return self.plans

    def announce(self, j: int, tables: set) -> None:
        """Say that look j starts for ``tables`` (those the budget left in it)."""
        if j < len(self.plan_looks) and tables:
            self.emit("look", look=j + 1, looks=len(self.plan_looks), repeats=self._n(j),
                      tables=[self._label(t) for t in self.pending if t in tables])

    def _label(self, t: tuple) -> str:
        return f"{self.metric}: {t[0]}/{t[1]}" if t[1] else f"{self.metric}: {t[0]}"

    def _plan(self, table: tuple, model: str, n: int) -> Plan:
        dataset, clusterer = table
        sub = replace(self.cfg, metrics=[self.metric], datasets=[dataset],
                      clusterers=[clusterer] if clusterer else self.cfg.clusterers,
                      models=[model], explicit={})
        return _paired_kinds(plan_run(with_repeats(sub, self.spec, n), self.registry),
                             self.spec.paired.kinds, REPEATS.get(self.cfg.profile, 0))

    def gain(self, table: tuple) -> float:
        """Return the pairs of ``table`` its next look is expected to decide: the sum of its
        undecided pairs' next-look power, or before its first look its number of pairs."""
        if (last := self.last.get(table)) is None:
            m = len(self.models[table])
            return float(m * (m - 1) // 2)
        powers = [(p.get("outlook") or {}).get("next_power") for p in last["pairs"]
                  if p["status"] == UNDECIDED]
        return float(sum(p for p in powers if p is not None and np.isfinite(p)))

    def after_look(self, j: int, looked: set) -> None:
        """Evaluate look j on the tables that took it; stop the decided ones."""
        n = self._n(j)
        for (t, m), p in self.plans.items():
            if t in looked:
                self.current[(t, m)] = (p.groups[0], n)
        final_look = j >= len(self.plan_looks) - 1
        for t in [t for t in self.pending if t in looked]:
            ev = self._evaluate(t, n, j)
            self.last[t] = ev
            self.history[t].append(ev["history"])
            reason = (stop_reason([p["status"] for p in ev["pairs"]], ev["decided"], n,
                                  self.plan_looks[-1])
                      or ("maximum repeats reached, undecided" if final_look else None))
            self.need[t] = ev["need"]
            if reason is not None:
                self._stop(t, reason, j)

    def _evaluate(self, t: tuple, n: int, j: int) -> dict:
        spec = self.spec
        ms = [m for m in self.models[t] if (t, m) in self.current]
        facts = _per_repeat(self.store, [self.current[(t, m)][0] for m in ms], n,
                            spec.paired.values)
        x, i = facts["x"], facts["i"]
        # the chance guard first (docs/adaptive.md, "The rule")
        level = self._level(j)
        dropped = self.dropped.setdefault(t, {})
        for k, m in enumerate(ms):
            if m not in dropped:
                why = _guard(i[0, k], facts["chance"], facts["basis"], level, self.margin)
                if why is not None:
                    dropped[m] = why
        unranked = {m: dropped[m] for m in ms if dropped.get(m)}
        ranked = [m for m in ms if m not in dropped]
        idx = [ms.index(m) for m in ranked]
        if ranked:
            res = table_look(x[:, idx], i[:, idx], self.precision, 1.0 - level,
                             spec.higher_is_better, cycle=facts["cycle"], looks=1)
        else:  # nothing to rank: nothing to decide
            res = {**dict.fromkeys(("estimate", "status", "best", "worst", "open"),
                                   np.zeros((1, 0))), "pairs": [], "decided": np.array([True])}
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
            if code == 0:
                pairs[-1]["outlook"] = self._outlook(x[0, idx[a]], i[0, idx[a]], x[0, idx[b]],
                                                     i[0, idx[b]], j, len(res["pairs"]),
                                                     facts["cycle"])
        repeats = {m: self.current[(t, m)][1] for m in ms}
        open_ = {ranked[k] for k in range(len(ranked)) if res["open"][0][k]}
        decided = bool(res["decided"][0])
        return {
            "any": bool(np.isfinite(x).any()), "decided": decided, "pairs": pairs,
            "order": order, "cycle": facts["cycle"], "repeats": repeats, "unranked": unranked,
            "ranks": {m: rank_text(int(res["best"][0][k]), int(res["worst"][0][k]))
                      for k, m in enumerate(ranked)},
            "need": [m for m in ms if m in open_],
            "history": {"look": n, "repeats": repeats, "decided": decided, "unranked": unranked,
                        "pairs": {f"{p['pair'][0]} ~ {p['pair'][1]}":
                                  p["above"] and f"{p['above']} above" or p["status"]
                                  for p in pairs}},
        }

    def _outlook(self, xa, ia, xb, ib, j: int, n_pairs: int, cycle: Optional[int]) -> dict:
        """Return an undecided pair's difference and spread so far, the next look's power and
        the repeats for 80% power (at the next look's level over the table's pairs)."""
        got = paired_difference(xa, ia, xb, ib, self._level(j), skew_corrected=False)
        d, se, n = float(got["d"]), float(got["se"]), int(got["n"])
        if not (np.isfinite(d) and np.isfinite(se) and n >= 2):
            return {"difference": None, "se": None, "n": n, "next_repeats": None,
                    "next_power": None, "repeats_80": None}
        sd = se * np.sqrt(n)
        nxt = j + 1 if j + 1 < len(self.plan_looks) else None
        alpha = (1.0 - self._level(j + 1)) / max(n_pairs, 1)
        power = decide_power(d, sd, self.plan_looks[nxt], alpha, self.precision) if nxt else None
        need = repeats_for_power(d, sd, alpha, self.precision, step=cycle or 1)
        return {"difference": round(d, 5), "se": round(se, 5), "n": n,
                "next_repeats": self.plan_looks[nxt] if nxt else None,
                "next_power": None if power is None else round(power, 3), "repeats_80": need}

    def stop_table(self, t: tuple, reason: str, next_seconds: Optional[float] = None) -> None:
        """Stop ``t`` before its next look (the budget): it keeps its last look's decision."""
        if next_seconds is not None:
            self.next_cost[t] = float(next_seconds)
        if t in self.pending:
            self._stop(t, reason, len(self.history[t]) - 1)

    def _stop(self, t: tuple, reason: str, j: int) -> None:
        self.pending.remove(t)
        ev = self.last.get(t)
        if ev is None or not ev["any"]:  # no trial of it is stored: nothing to decide or score
            self.final[t] = None
            self.emit("decided", table=self._label(t), repeats={}, reason=reason)
            return
        pairs, level, spec = ev["pairs"], self._level(j), self.spec
        adaptive = {
            "design": "adaptive", "rule": RULE, "score": self.spec.paired.score,
            "max_repeats": self.plan_looks[-1], "looks_planned": self.plan_looks,
            "looks_taken": self.plan_looks[:max(j, 0) + 1], "level": level,
            "alpha": self.alpha, "alpha_look": 1.0 - level, "spending": SPENDING,
            "precision": self.precision, "cycle": ev["cycle"],
            "chance_margin": self.margin, "stopped": reason, "order": ev["order"],
            "ranks": ev["ranks"], "unranked": ev["unranked"], "pairs": pairs,
            "repeats_by_model": ev["repeats"], "history": self.history[t],
        }
        groups = []
        for m in [m for m in self.models[t] if (t, m) in self.current]:
            g, reps = self.current[(t, m)]
            mine = {**adaptive, "repeats": reps, "rank": ev["ranks"].get(m), "model_stopped":
                    ev["unranked"].get(m) or _model_reason(m, pairs, reps, reason)}
            options = {"adaptive": {"repeats": reps, "looks_planned": self.plan_looks,
                                    "level": level, "precision": self.precision, "rule": RULE}}
            groups.append(replace(g, configuration=fingerprint(self.configuration),
                                  options=options, finish=lambda s, a=mine: annotate(
                                      s, level, a, spec.paired.interval)))
        self.final[t] = (groups, {**adaptive, "repeats": max(ev["repeats"].values()),
                                  "trials": sum(len(g.keys) for g in groups)})
        self.emit("decided", table=self._label(t), repeats=ev["repeats"], reason=reason)

    def open_tables(self) -> list:
        return [t for t, f in self.final.items()
                if f is not None and any(p["status"] == UNDECIDED for p in f[1]["pairs"])]

    def price_next_looks(self, durations) -> None:
        """Record, per table left undecided, its next look and its projected seconds."""
        for t in self.open_tables():
            groups, info = self.final[t]
            taken = len(info["looks_taken"])
            if taken >= len(self.plan_looks):
                info["next_look"] = None
                continue
            n = self.plan_looks[taken]
            need = self.last[t]["need"]
            if t not in self.next_cost:
                specs = {k: s for m in need for k, s in self._plan(t, m, n).specs.items()}
                stored = self.store.ok_trial_keys(list(specs))
                self.next_cost[t] = _seconds([s for k, s in specs.items() if k not in stored],
                                             durations, 0.0)
            info["next_look"] = {"repeats": n, "models": need,
                                 "seconds": round(self.next_cost[t], 3)}

    def score(self, run_id: int, rescore: bool) -> list:
        groups = [g for t in self.all_tables if self.final.get(t) for g in self.final[t][0]]
        if not groups:
            return []
        self.store.save_configuration(configuration_row(self.configuration, run_id))
        versions = {self.metric: self.registry.component_version("metrics", self.metric)}
        return score_groups(groups, self.store, run_id, versions=versions, rescore=rescore)[0]

    def tables(self) -> list:
        return [{"metric": self.metric, "dataset": t[0], "clusterer": t[1], **self.final[t][1]}
                for t in self.all_tables if self.final.get(t)]


#: Pair status codes of :func:`robench.stats.paired.compare_all` in words.
STATUS_WORDS = {0: UNDECIDED, 1: ORDERED, -1: ORDERED, 2: EQUIVALENT}


def _guard(inclusive, chance, basis: str, level: float, margin: float) -> Optional[str]:
    """Return why a model is not ranked (the chance guard on its inclusive accuracies), or None."""
    vals = [float(v) for v in inclusive if np.isfinite(v)]
    if chance is None:
        return None
    iv = mean_interval(vals, level, bounds=(0.0, 1.0)) if vals else None
    return chance_reason(float(np.mean(vals)) if vals else None, iv.low if iv else None,
                         iv.high if iv else None, chance, basis, values=vals, margin=margin,
                         interval_reason=(iv.as_dict().get("reason") if iv else "no repeats"))


def _num(v) -> Optional[float]:
    v = float(v)
    return v if np.isfinite(v) else None


def _per_repeat(store, groups: list, n: int, values: Callable) -> dict:
    """Return the paired comparison's values per repeat, ``x`` and ``i`` (1, models, n; NaN
    where a repeat did not run or failed), the balanced design's ``cycle`` (or None), and
    ``chance`` and ``basis`` (:func:`robench.stats.ranks.chance_level`)."""
    x, i = np.full((1, len(groups), n), np.nan), np.full((1, len(groups), n), np.nan)
    cycles, balanced, classes, shares = set(), True, 0, []
    for m, g in enumerate(groups):
        clus = g.key_dict.get("clusterer")
        for t in store.trials(keys=g.keys):
            r = t.get("repeat")
            if (t["status"] != "ok" or r is None or r >= n
                    or (clus is not None and t.get("clusterer") != clus)):
                continue
            if (got := values(t)) is None:
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
