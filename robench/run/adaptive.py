"""``robench run --until decided``: repeats in rounds until every table's order is decided.

It works for any metric that declares the paired comparison it supports
(``MetricSpec.paired``, a :class:`robench.specs.PairedComparison`: its headline score is a
ratio of two per-repeat means whose repeat r every model shares; rho declares it with
AccX / AccI). A table is one (metric, data set, clusterer) with its models ranked by that
score (for rho: rho).

**Looks.** A table with sources is looked at after every complete rotation cycle of the
balanced held-out design (10, 15, 20, ... repeats for 5 sources per class,
:func:`robench.stats.sequential.cycle_looks`); one of independent repeats at 6, 12, 24, ...
Alpha is spent across the looks (:data:`SPENDING`, Lan-DeMets Pocock-type,
:func:`robench.stats.sequential.look_alphas`), so look j tests at its own level
``1 - alpha_j`` and no table orders a wrong pair at any look with probability above alpha.

**Decisions.** At every look every pair of models gets the one paired test
(:func:`robench.stats.sequential.table_look`: Hall's skew-corrected t over the per-repeat
differences, Holm over the pairs, two one-sided tests for equivalence within the metric's
margin, ``PairedComparison.margin``, or ``--precision``). Only the models of an undecided
pair get the next look's repeats, and only the trial kinds the test uses
(``PairedComparison.kinds``: for rho no random-split trial past the profile's repeats); a
table stops when no pair is undecided, at the maximum, or when its next look no longer fits
a ``budget`` (the tables closest to a decision per second first). An undecided pair records
what would decide it: its difference, standard error, the power of the next look and the
repeats for 80% power. Each model's own interval is reported at the level of the look its
table stopped at (a repeated confidence interval: it keeps >= 95% coverage wherever the
table stopped).

Repeats are trials keyed by their index, so a later look only runs the repeats the earlier
ones did not, and an interrupted run resumes from the store: rerunning replays the same looks
on the same stored trials, hence the same decisions. Every score of a table records
``details.design = "adaptive"`` and ``details.adaptive``: the repeats its model used and why
it stopped there (``repeats``, ``model_stopped``), the table's reason (``stopped``), the order,
the ranks the pair decisions give (``ranks``), every pair with its status (``pairs``), the
planned and taken looks, the look's level (``level``, ``alpha_look``), ``spending``, the margin
(``precision``).

Metrics without a paired comparison asked for in the same run are run once at the profile's
repeats, as a plain run would (``--metric rho`` runs rho alone).
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
#: so every look keeps a large part of the fixed test's level: at a look every cycle of 5
#: repeats from 10 to 40, 0.018 at the first and 0.013-0.015 at each later one (Bonferroni
#: over the old planned looks 10, 20, 40 gave each 0.017, three looks instead of seven).
#: tests/stats/test_sequential.py pins the error rate of both spending functions.
SPENDING = "pocock"

#: The decision rule's name, stored with every score (and in its inputs fingerprint): paired
#: delta-method differences, Hall's skew correction, Holm over the pairs, a look at every
#: complete cycle with alpha spent across the looks.
RULE = "all-pairs-skew-corrected-t-holm-pocock-spending-every-cycle"


def paired_metrics(metrics: list, registry) -> list:
    """Return the names among ``metrics`` whose MetricSpec declares a paired comparison."""
    return [m for m in metrics if registry.get("metrics", m).paired is not None]


def racing_metrics(registry) -> list:
    """Return the names of the registered metrics that can race (declare a paired comparison)."""
    return sorted(spec.name for spec in registry.all("metrics") if spec.paired is not None)


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


def check_decided(cfg, precision: Optional[float] = None, registry=None) -> list:
    """Return the paired metrics of ``cfg``, or raise ConfigError if ``--until decided``
    cannot run this configuration (before any file is opened: the CLI calls it before the
    database)."""
    if registry is None:
        registry = get_registry()
    paired = paired_metrics(cfg.metrics, registry)
    if not paired:
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
    """Return ``cfg`` asking for ``n`` repeats of ``spec``'s metric: the run's ``repeats``, or
    the knob its paired comparison names (``PairedComparison.repeats_knob``)."""
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
                      budget: Optional[float] = None,
                      max_repeats: Optional[int] = None, plain_first: bool = False,
                      plan: Optional[Plan] = None) -> RunReport:
    """Race the paired metrics' tables look by look until each is decided; return the report.

    ``max_repeats`` (default ``cfg.repeats``) is the most repeats a paired metric's model
    gets; every other metric of ``cfg.metrics`` runs once at ``cfg.repeats``, as a plain run
    would, right after the first looks. The looks of all paired metrics run in rounds (round
    j: every undecided table's j-th look, the trials of all of them in one executor pass), so
    no metric waits for another's last look. ``budget`` (seconds, ``--budget``): no trial
    starts once it is spent (:func:`robench.run.runner.execute`'s deadline); from the second
    round on, a table's next look is taken only if its projected cost (the trials' durations
    stored in ``store``, else robench's reference durations) fits what is left, the tables
    with the lowest cost per undecided pair first; a table left out stops "undecided: time
    budget" with the cost of its next look recorded (``next_look``). ``plain_first`` (the
    main job, :func:`robench.run.execution.main_job`): the plain run of ``cfg`` (``plan``, or
    its plan) runs first and whole, every metric at the profile's repeats, with no deadline;
    the race then takes every look that fits what the budget leaves, and a table it could not
    look at keeps its plain scores. The report's
    ``scores`` are the final scores of each paired metric (annotated, :func:`annotate`) and
    the other metrics' scores; ``adaptive`` lists each table's decision.
    """
    race = _RaceRun(cfg, registry, store, precision=precision, alpha=alpha, command=command,
                    on_event=on_event, rescore=rescore, budget=budget,
                    max_repeats=max_repeats)
    if plain_first:
        race.plain = plan or plan_run(cfg, registry)
    return race.run()


class _RaceRun:
    """One race: its rounds, the other metrics' plain run, and one report for all of them."""

    def __init__(self, cfg, registry, store, *, precision: Optional[float], alpha: float,
                 command: str,
                 on_event: Optional[Callable], rescore: bool, budget: Optional[float],
                 max_repeats: Optional[int]):
        paired = check_decided(cfg, precision, registry)
        self.t0 = time.perf_counter()
        self.deadline = None if budget is None else time.monotonic() + float(budget)
        if not cfg.knobs:
            cfg.resolve(registry)
        self.cfg, self.registry, self.store = cfg, registry, store
        self.command, self.on_event, self.rescore = command, on_event, rescore
        self.others = [m for m in cfg.metrics if m not in paired]
        top = max_repeats or cfg.repeats
        self.races = [_Race(cfg, registry, store, registry.get("metrics", m), top,
                            precision=precision, alpha=alpha, on_event=on_event)
                      for m in paired]
        self.keys: set = set()
        self.ran = 0
        self.failed: list = []
        self.skipped = [s for race in self.races for s in race.skipped]
        self.scores: list = []
        self.tables: list = []
        self.last: Optional[RunReport] = None
        self.budget_spent = False
        self.durations = None
        self.plain: Optional[Plan] = None  # the main job: this plain run first
        self.plain_scores: list = []

    def run(self) -> RunReport:
        """Run the race to its end (decided, the maximum, the budget or an interrupt)."""
        if self.plain is not None and not self._run_plain():
            return self._report()
        for race in self.races:
            if not race.all_tables and self.plain is None:
                self._run_inapplicable(race)
        # the order: every paired table's first look (the headline tables, all undecided),
        # then the other metrics, then the further looks where they fit
        if not self._pending() and not self._run_others():
            return self._report()
        j = 0
        while self._pending():
            outcome = self._round(j)
            if outcome == "interrupted":
                return self._report()
            if outcome == "stop":
                break
            j += 1
        self._finish()
        return self._report()

    def _pending(self) -> list:
        return [r for r in self.races if r.pending]

    def _execute(self, cfg, plan: Plan, **options) -> RunReport:
        """Run ``plan`` through the runner and count it in this race's report."""
        report = _runner.execute(cfg, self.registry, self.store, command=self.command,
                                 on_event=self.on_event, plan=plan, **options)
        self.keys.update(plan.specs)
        self.ran += report.n_ran
        self.last = report
        self.failed += report.failed
        return report

    def _run_inapplicable(self, race) -> None:
        """A paired metric with no table here: a plain run records its skips."""
        cfg = with_repeats(replace(self.cfg, metrics=[race.metric]), race.spec,
                           race.plan_looks[0])
        self._execute(cfg, plan_run(cfg, self.registry))

    def _run_plain(self) -> bool:
        """Run the plain run of every metric first (the main job), with no deadline; return
        False if it was interrupted. Its skips are the run's; the other metrics are done."""
        report = self._execute(self.cfg, self.plain, rescore=self.rescore)
        self.skipped = list(report.skipped)
        self.plain_scores = list(report.scores)
        self.others = []
        return not report.interrupted

    def _run_others(self) -> bool:
        """Run the metrics without a paired comparison once, as a plain run; return False if
        it was interrupted."""
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

    def _round_plans(self, due: list, j: int) -> dict:
        """Return {(race, table, model): plan} of round j, fitted to the budget if any."""
        plans = {}
        for race in due:
            plans.update({(race, t, m): p for (t, m), p in race.look_plans(j).items()})
        if self.deadline is not None:
            # the first look of every table is kept whatever it costs (in the cheapest order);
            # later looks only where they fit
            plans = _fit_budget(plans, self.store, self._durations(), self.deadline,
                                self.cfg.jobs, drop=j > 0 or self.plain is not None)
        return plans

    def _round(self, j: int) -> str:
        """Take look j of every pending table; return "next", "stop" or "interrupted"."""
        due = self._pending()
        plans = self._round_plans(due, j)
        if not plans:  # nothing fits: every table left stops at its last look
            self.budget_spent = self.deadline is not None
            for race in due:
                race.stop_all(j, "undecided: the time budget is spent")
            return "stop"
        for race in due:
            race.announce(j, {t for r, t, _ in plans if r is race})
        merged = _merge(list(plans.values()))
        merged.skipped = []
        metrics = list(dict.fromkeys(race.metric for race, _, _ in plans))
        n = max(race.plan_looks[min(j, len(race.plan_looks) - 1)] for race in due)
        report = self._execute(replace(self.cfg, metrics=metrics, repeats=n), merged,
                               score=False, deadline=self.deadline,
                               order=_table_order(plans) if self.deadline is not None else None)
        if report.interrupted:
            return "interrupted"
        spent = report.budget_spent or self._spent()
        for race in due:
            race.after_look(j, {t for r, t, _ in plans if r is race}, spent=spent)
        if j == 0 and not self._run_others():
            return "interrupted"
        if spent or self._spent():
            self.budget_spent = True
            for race in due:
                race.stop_all(j, "undecided: the time budget is spent")
            return "stop"
        return "next"

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
        report = self.last
        n_planned, not_run = len(self.keys), self._not_run()
        return RunReport(report.run_id, n_planned, n_planned - self.ran - not_run, self.ran,
                         self.failed, self.skipped, self.scores,
                         time.perf_counter() - self.t0, report.interrupted,
                         adaptive=self.tables,
                         budget_spent=self.budget_spent or report.budget_spent,
                         n_not_run=not_run, main_job=self.plain is not None)


def _fit_budget(plans: dict, store, durations, deadline: float, jobs: int,
                drop: bool = True) -> dict:
    """Return the look plans whose tables fit the time left, those whose next look is expected
    to decide the most pairs per second first (with ``drop`` False: all of them, in that
    order).

    A table's cost is the projected seconds of its trials not stored yet (``durations``;
    a trial without an estimate costs the mean of those with one), shared by ``jobs``
    workers; its gain the pairs its next look is expected to decide (:meth:`_Race.gain`: the
    sum of its undecided pairs' next-look power; before its first look, its undecided pairs).
    A table that does not fit is stopped by its race with the cost recorded.
    """
    by_table: dict = {}
    for (race, t, m), p in plans.items():
        by_table.setdefault((race, t), []).append(((race, t, m), p))
    stored = store.ok_trial_keys([k for p in plans.values() for k in p.specs])
    cost = {}
    for rt, entries in by_table.items():
        specs = {k: s for _, p in entries for k, s in p.specs.items() if k not in stored}
        est = [durations.estimate(s)[0] for s in specs.values()]
        known = [e for e in est if e is not None]
        fill = sum(known) / len(known) if known else 1.0
        cost[rt] = sum(e if e is not None else fill for e in est)
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


def _paired_kinds(plan: Plan, kinds: Optional[tuple], base: int) -> Plan:
    """Return ``plan`` without the trials of kinds its paired test does not use (a spec's
    ``kind`` not in ``kinds``) past the profile's ``base`` repeats: a race's added repeats
    train only what decides (for rho: no random-split trial, a third of a repeat)."""
    if not kinds:
        return plan
    drop = {k for k, s in plan.specs.items()
            if s.get("kind") is not None and s.get("kind") not in kinds
            and int(s.get("repeat") or 0) >= base}
    if not drop:
        return plan
    return replace(plan, specs={k: s for k, s in plan.specs.items() if k not in drop},
                   groups=[replace(g, keys=[k for k in g.keys if k not in drop])
                           for g in plan.groups])


def _table_order(plans: dict) -> Callable:
    """Return an order for a budgeted round's trials: table by table, in the order the tables
    were fitted (the most pairs expected decided per second first), so a deadline leaves whole tables."""
    rank: dict = {}
    for k, ((race, t, m), p) in enumerate(plans.items()):
        for key in p.specs:
            rank.setdefault(key, k)
    return lambda specs: sorted(specs, key=lambda s: rank.get(s["key"], len(rank)))


class _Race:
    """One paired metric's tables, look by look (the state :func:`run_until_decided` drives)."""

    def __init__(self, cfg, registry, store, spec, top: int, *, precision: Optional[float],
                 alpha: float, on_event: Optional[Callable]):
        self.cfg, self.registry, self.store, self.spec = cfg, registry, store, spec
        self.metric = spec.name
        # the equivalence margin: --precision where given, else the metric's own
        # (PairedComparison.margin, ROBENCH_MARGIN overriding it)
        self.precision = precision if precision is not None else equivalence_margin(
            spec.name, spec.paired.margin or PRECISION)
        self.alpha = alpha
        self.emit = on_event or (lambda *a, **k: None)
        # a look at every complete cycle of the balanced held-out design where the metric has
        # sources (doubling looks for independent repeats), alpha spent across them
        self.plan_looks = cycle_looks(top, cfg.k if spec.uses_clusterer else None, FIRST_LOOK)
        self.alphas = look_alphas(self.plan_looks, self.plan_looks[-1], alpha, SPENDING)
        # one configuration for every score of a raced table, whatever look its model
        # stopped at: the race up to its maximum repeats (a view shows the table whole)
        self.configuration = {**configurations.describe(
            with_repeats(replace(cfg, metrics=[self.metric]), spec, self.plan_looks[-1]),
            spec, registry), "raced": SPENDING}
        self.margin = chance_margin()
        first = plan_run(with_repeats(replace(cfg, metrics=[self.metric]), spec,
                                      self.plan_looks[0]), registry)
        self.skipped = first.skipped
        self.all_tables = list(dict.fromkeys(
            (g.combo.dataset.name, g.combo.clusterer.name if g.combo.clusterer else "")
            for g in first.groups))
        self.models = {t: [g.combo.model.name for g in first.groups
                           if (g.combo.dataset.name,
                               g.combo.clusterer.name if g.combo.clusterer else "") == t]
                       for t in self.all_tables}
        self.pending = list(self.all_tables)
        self.history = {t: [] for t in self.all_tables}
        self.current: dict = {}  # (table, model) -> (its group, repeats it has so far)
        self.final: dict = {}  # table -> (groups, adaptive details)
        self.need = {t: list(self.models[t]) for t in self.all_tables}
        self.dropped: dict = {}  # table -> {model: why it is not ranked}
        self.last: dict = {}  # table -> the evaluation of its last look
        self.plans: dict = {}
        self.next_cost: dict = {}  # table -> projected seconds of its next look

    def _n(self, j: int) -> int:
        return self.plan_looks[min(j, len(self.plan_looks) - 1)]

    def _level(self, j: int) -> float:
        """Return look j's confidence level, 1 - the alpha spent at it (every test and
        interval of that look: a repeated confidence interval wherever the table stops)."""
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
                      tables=[f"{self.metric}: {d}/{c}" if c else f"{self.metric}: {d}"
                              for d, c in self.pending if (d, c) in tables])

    def _plan(self, table: tuple, model: str, n: int) -> Plan:
        dataset, clusterer = table
        sub = replace(self.cfg, metrics=[self.metric], datasets=[dataset],
                      clusterers=[clusterer] if clusterer else self.cfg.clusterers,
                      models=[model], explicit={})
        return _paired_kinds(plan_run(with_repeats(sub, self.spec, n), self.registry),
                             self.spec.paired.kinds, REPEATS.get(self.cfg.profile, 0))

    def undecided(self, table: tuple) -> int:
        """Return how many pairs of ``table`` are undecided (all of them before a look)."""
        last = self.last.get(table)
        if last is None:
            m = len(self.models[table])
            return m * (m - 1) // 2
        return sum(p["status"] == UNDECIDED for p in last["pairs"])

    def gain(self, table: tuple) -> float:
        """Return the pairs of ``table`` its next look is expected to decide: the sum of the
        next-look power of its undecided pairs (their ``outlook``), or, before its first
        look, the number of its pairs (every one undecided, nothing known yet)."""
        last = self.last.get(table)
        if last is None:
            return float(self.undecided(table))
        powers = [(p.get("outlook") or {}).get("next_power") for p in last["pairs"]
                  if p["status"] == UNDECIDED]
        return float(sum(p for p in powers if p is not None and np.isfinite(p)))

    def after_look(self, j: int, looked: set, *, spent: bool = False) -> None:
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
            reason = stop_reason([p["status"] for p in ev["pairs"]], ev["decided"], n,
                                 self.plan_looks[-1])
            if reason is None and final_look:
                reason = "maximum repeats reached, undecided"
            self.need[t] = ev["need"]
            if reason is not None:
                self._stop(t, reason, j)

    def _evaluate(self, t: tuple, n: int, j: int) -> dict:
        spec = self.spec
        ms = [m for m in self.models[t] if (t, m) in self.current]
        facts = _per_repeat(self.store, [self.current[(t, m)][0] for m in ms], n,
                            spec.paired.values)
        x, i = facts["x"], facts["i"]
        # the chance guard first: a model not shown above chance + margin at a look is not
        # compared, gets no more repeats and is listed unranked with the reason
        level = self._level(j)
        guard = {m: _guard(i[0, k], facts["chance"], facts["basis"], level, self.margin)
                 for k, m in enumerate(ms)}
        dropped = self.dropped.setdefault(t, {})
        for m in ms:
            if m in dropped:
                guard[m] = (dropped[m], False)
            elif guard[m][0] is not None:
                dropped[m] = guard[m][0]
        ranked = [m for m in ms if guard[m][0] is None]
        idx = [ms.index(m) for m in ranked]
        if ranked:
            res = table_look(x[:, idx], i[:, idx], self.precision, 1.0 - level,
                             spec.higher_is_better, cycle=facts["cycle"], looks=1)
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
            if code == 0:
                pairs[-1]["outlook"] = self._outlook(x[0, idx[a]], i[0, idx[a]], x[0, idx[b]],
                                                     i[0, idx[b]], j, len(res["pairs"]),
                                                     facts["cycle"])
        unclear = [m for m in ms if guard[m][0] is not None and guard[m][1]]
        repeats = {m: self.current[(t, m)][1] for m in ms}
        open_ = {ranked[k] for k in range(len(ranked)) if res["open"][0][k]}
        return {
            "any": bool(np.isfinite(x).any()),
            "decided": bool(res["decided"][0]) and not unclear, "pairs": pairs,
            "order": order, "cycle": facts["cycle"], "repeats": repeats,
            "unranked": {m: guard[m][0] for m in ms if guard[m][0]},
            "ranks": {m: rank_text(int(res["best"][0][k]), int(res["worst"][0][k]))
                      for k, m in enumerate(ranked)},
            "need": [m for m in ms if m in open_ or m in unclear],
            "history": {"look": n, "repeats": repeats,
                        "decided": bool(res["decided"][0]) and not unclear,
                        "unranked": {m: guard[m][0] for m in ms if guard[m][0]},
                        "pairs": {f"{p['pair'][0]} ~ {p['pair'][1]}":
                                  p["above"] and f"{p['above']} above" or p["status"]
                                  for p in pairs}},
        }

    def _outlook(self, xa, ia, xb, ib, j: int, n_pairs: int, cycle: Optional[int]) -> dict:
        """Return what would decide an undecided pair: its difference and spread so far, the
        probability that the next look decides it, and the repeats for 80% power (both at
        the next look's level over the table's pairs, the difference taken as true)."""
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
            taken = len(self.history[t])
            self._stop(t, reason, taken - 1)

    def stop_all(self, j: int, reason: str) -> None:
        for t in list(self.pending):
            self.stop_table(t, reason)

    def _stop(self, t: tuple, reason: str, j: int) -> None:
        self.pending.remove(t)
        ev = self.last.get(t)
        if ev is None or not ev["any"]:  # no trial of it is stored: nothing to decide or score
            self.final[t] = None
            self.emit("decided", table=f"{self.metric}: {t[0]}/{t[1]}" if t[1] else
                      f"{self.metric}: {t[0]}", repeats={}, reason=reason)
            return
        pairs = ev["pairs"]
        adaptive = {
            "design": "adaptive", "rule": RULE, "score": self.spec.paired.score,
            "max_repeats": self.plan_looks[-1], "looks_planned": self.plan_looks,
            "looks_taken": self.plan_looks[:max(j, 0) + 1], "level": self._level(j),
            "alpha": self.alpha, "alpha_look": 1.0 - self._level(j), "spending": SPENDING,
            "precision": self.precision, "cycle": ev["cycle"],
            "chance_margin": self.margin, "stopped": reason, "order": ev["order"],
            "ranks": ev["ranks"], "unranked": ev["unranked"], "pairs": pairs,
            "repeats_by_model": ev["repeats"], "history": self.history[t],
        }
        level, spec = self._level(j), self.spec
        groups = []
        for m in self.models[t]:
            if (t, m) not in self.current:
                continue
            g, reps = self.current[(t, m)]
            why = ev["unranked"].get(m)
            mine = {**adaptive, "repeats": reps, "rank": ev["ranks"].get(m),
                    "model_stopped": why or _model_reason(m, pairs, reps, reason)}
            options = {"adaptive": {"repeats": reps, "looks_planned": self.plan_looks,
                                    "level": level, "precision": self.precision, "rule": RULE}}
            groups.append(replace(g, configuration=fingerprint(self.configuration),
                                  options=options,
                                  finish=lambda s, a=mine: annotate(s, level, a,
                                                                    spec.paired.interval)))
        self.final[t] = (groups, {**adaptive, "repeats": max(ev["repeats"].values()),
                                  "trials": sum(len(g.keys) for g in groups)})
        self.emit("decided", table=f"{self.metric}: {t[0]}/{t[1]}" if t[1] else
                  f"{self.metric}: {t[0]}", repeats=ev["repeats"], reason=reason)

    def open_tables(self) -> list:
        return [t for t, f in self.final.items()
                if f is not None and any(p["status"] == UNDECIDED for p in f[1]["pairs"])]

    def price_next_looks(self, durations) -> None:
        """Record, per table left undecided, its next look and that look's projected seconds
        (what would decide more: the summary prints it)."""
        for t in self.open_tables():
            groups, info = self.final[t]
            taken = len(info["looks_taken"])
            if taken >= len(self.plan_looks):
                info["next_look"] = None
                continue
            n = self.plan_looks[taken]
            need = self.last[t]["need"]
            if t not in self.next_cost:
                stored = self.store.ok_trial_keys(
                    [k for m in need for k in self._plan(t, m, n).specs])
                est = [durations.estimate(s)[0] for m in need
                       for k, s in self._plan(t, m, n).specs.items() if k not in stored]
                known = [e for e in est if e is not None]
                fill = sum(known) / len(known) if known else 0.0
                self.next_cost[t] = sum(e if e is not None else fill for e in est)
            info["next_look"] = {"repeats": n, "models": need,
                                 "seconds": round(self.next_cost[t], 3)}

    def score(self, run_id: int, rescore: bool) -> list:
        groups = [g for t in self.all_tables if self.final.get(t) for g in self.final[t][0]]
        if not groups:
            return []
        self.store.save_configuration(configuration_row(self.configuration, run_id))
        versions = {self.metric: self.registry.component_version("metrics", self.metric)}
        new, _, _ = score_groups(groups, self.store, run_id, versions=versions,
                                 rescore=rescore)
        return new

    def tables(self) -> list:
        return [{"metric": self.metric, "dataset": t[0], "clusterer": t[1], **self.final[t][1]}
                for t in self.all_tables if self.final.get(t)]


#: Pair status codes of :func:`robench.stats.paired.compare_all` in words.
STATUS_WORDS = {0: UNDECIDED, 1: ORDERED, -1: ORDERED, 2: EQUIVALENT}


def _guard(inclusive, chance, basis: str, level: float, margin: float) -> tuple:
    """Return (why a model is not ranked or None, False).

    The chance guard of every ranking path (:func:`robench.stats.ranks.chance_reason`) on the
    model's inclusive accuracies so far, with their t interval at the run's corrected level.
    A model that fails it at a look is not ranked and gets no more repeats (the driver keeps
    the reason): a random-label model costs one look's repeats, never the real models'.
    """

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
    every trial with one recorded the same (None otherwise: independent repeats, the same
    skew-corrected t over every shared repeat); ``chance``,
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
