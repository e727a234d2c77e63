"""The metric checks (:func:`metric_checks`, :func:`check_metric`): one tiny real run,
shared by the checks, then the metric's aggregate on its trials, on failed ones and on none."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Union

import numpy as np

from robench.specs import MetricSpec, Score
from robench.testing.core import (Case, CheckReport, Unavailable, check_spec_fields,
                                  default_registry, make_checks, plain, resolve, run_checks,
                                  shared)
from robench.run.config import RunConfig, parse_settings
from robench.run import runner  # runner.execute: tests replace it there
from robench.storage.store import Store

#: The names of the metric checks, in the order they run. The aggregate is called directly
#: (``scores``, ``aggregate-pure``) before ``run-scores`` reads what the runner made of it:
#: its own mistakes get a precise message before the runner stumbles over them.
METRIC_CHECKS = ("spec", "spec-protocol", "run", "scores", "aggregate-pure", "run-scores",
                 "failed-trials", "empty-group")


def metric_checks(metric: Union[str, MetricSpec], registry=None, *, dataset: str = "digits",
                  model: Optional[str] = None, clusterer: Optional[str] = None,
                  repeats: int = 2, k: int = 2, seed: int = 0, settings=None):
    """Yield the checks of one metric (:class:`robench.testing.Check`), in order; the run
    happens once, when a check first needs it. The parameters are :func:`check_metric`'s."""
    spec, registry = resolve("metrics", MetricSpec, metric, registry)
    if registry is None:
        registry = default_registry()
    case = MetricCase(spec, registry, dataset=dataset, model=model, clusterer=clusterer,
                      repeats=repeats, k=k, seed=seed, settings=settings)
    yield from make_checks(case, "metric", ((name, RULES[name]) for name in METRIC_CHECKS))


def check_metric(metric: Union[str, MetricSpec], registry=None, *, dataset: str = "digits",
                 model: Optional[str] = None, clusterer: Optional[str] = None,
                 repeats: int = 2, k: int = 2, seed: int = 0, settings=None,
                 expected_failures: Optional[Mapping[str, str]] = None,
                 collect_all: bool = False) -> CheckReport:
    """Check a metric end to end: a tiny real run, then its aggregate on normal and bad groups.

    docs/plugin-hooks.md lists what each check of :func:`metric_checks` verifies.

    Parameters
    ----------
    metric : str or MetricSpec
        The spec, or the name of a metric registered in ``registry`` (the runner looks it up).
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.
    dataset : str
        A registered data set (default ``digits``: 1,797 rows).
    model : str, optional
        A registered model; default ``mlp`` if the metric ``needs_features``, else ``svm``.
    clusterer : str, optional
        A registered clusterer, for metrics that ``uses_clusterer`` (default ``kmeans``).
    repeats, k, seed : int
        The run's repeats, sources per class and seed.
    settings : list of str or dict, optional
        Knobs as ``robench run --set`` takes them (``["train.max_epochs=1"]``) or as
        ``{"train": {"max_epochs": 1}}``; use them to keep a heavy protocol small.
    expected_failures, collect_all
        As :func:`robench.testing.run_checks` takes them.

    Returns
    -------
    CheckReport
        What the checks found; a failure raises :class:`robench.testing.ConformanceError`.
    """
    return run_checks(metric_checks(metric, registry, dataset=dataset, model=model,
                                    clusterer=clusterer, repeats=repeats, k=k, seed=seed,
                                    settings=settings),
                      expected_failures=expected_failures, collect_all=collect_all)


class MetricCase(Case):
    """One metric under check: the combination it runs on, and the tiny run (on first use)."""

    def __init__(self, spec: MetricSpec, registry, *, dataset, model, clusterer, repeats, k,
                 seed, settings):
        super().__init__("metric", spec)
        self.registry, self.dataset, self.repeats, self.k, self.seed, self.settings = (
            registry, dataset, repeats, k, seed, settings)
        self.model = model if model is not None else ("mlp" if spec.needs_features else "svm")
        self.clusterer = (clusterer or "kmeans") if spec.uses_clusterer else None
        self.combo = f"({dataset}, {self.model}, {clusterer or self.clusterer or '-'})"
        self.group = {"dataset": dataset, "model": self.model,
                      "clusterer": clusterer or self.clusterer or ""}

    @shared(owner="run")
    def tiny(self) -> tuple:
        """(report, trial rows, error) of the run: see :func:`tiny_run`."""
        with tempfile.TemporaryDirectory(prefix="robench-testing-") as tmp:
            return tiny_run(self.registry, self.spec, dataset=self.dataset, model=self.model,
                            clusterer=self.clusterer, repeats=self.repeats, k=self.k,
                            seed=self.seed, settings=self.settings, db=Path(tmp) / "check.db")

    @property
    def rows(self) -> list:
        """The run's trials, or :class:`Unavailable` unless they all succeeded."""
        _, rows, _ = self.tiny
        if not rows or any(r.get("status") != "ok" for r in rows):
            raise Unavailable("run")
        return rows

    @shared(owner="scores")
    def direct(self) -> tuple:
        """The aggregate of the run's trials, computed twice."""
        rows = self.rows
        with self.calling("aggregate-pure", "aggregate on the run's trials"):
            a = self.spec.aggregate(dict(self.group), [dict(r) for r in rows])
            b = self.spec.aggregate(dict(self.group), [dict(r) for r in rows])
        return a, b


def spec_fields(case: MetricCase) -> None:
    spec = case.spec
    check_spec_fields(case, ("aggregate",), ("higher_is_better", "uses_clusterer",
                                             "in_default_run", "needs_features"))
    if not isinstance(spec.definition, str) or not spec.definition.strip():
        case.fail("spec-definition", "definition is empty",
                  "state exactly how the score is computed: it is stored with every score")


def spec_protocol(case: MetricCase) -> None:
    known = set(case.registry.names("protocols"))
    if case.spec.protocol not in known:
        case.fail("spec-protocol", f"protocol {case.spec.protocol!r} is unknown; known: "
                  f"{', '.join(sorted(known))}", "name a protocol robench knows")


def run(case: MetricCase) -> None:
    report, rows, error = case.tiny
    if not rows:
        if error is not None:
            case.fail("run", f"a run on {case.combo} raised {error}")
        why = "; ".join(s["reason"] for s in report["skipped"]) or "no trials planned"
        case.fail("run", f"the run on {case.combo} planned no trial: {why}",
                  "pick a data set, model and clusterer the metric applies to")
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        first = (failed[0].get("error") or "").strip().splitlines()
        case.fail("run", f"{len(failed)} of {len(rows)} trials of a run on {case.combo} "
                  f"failed; the first: {first[0] if first else '?'}",
                  "run the same with `robench run` and read the stored error")


def scores(case: MetricCase) -> None:
    a, _ = case.direct
    check_scores(case, a, "aggregate on the run's trials")
    if not a:
        case.fail("scores", "aggregate returned no score for a group of successful trials",
                  "return at least one Score (the headline) for a group")


def aggregate_pure(case: MetricCase) -> None:
    a, b = case.direct
    if score_json(a) != score_json(b):
        case.fail("aggregate-pure", "aggregate gave different scores for the same trials",
                  "make aggregate a pure function of its rows (seed any resampling)")


def run_scores(case: MetricCase) -> None:
    case.rows  # noqa: B018 - skipped unless the trials succeeded
    report, _, error = case.tiny
    if error is not None:
        case.fail("run", f"a run on {case.combo} raised {error}")
    check_scores(case, report["scores"], "the run's scores")


def failed_trials(case: MetricCase) -> None:
    failed_rows = [as_failed(r) for r in case.rows]
    with case.calling("failed-trials", "aggregate on a group whose trials all failed",
                      "skip trials whose status is not 'ok' and return scores with value "
                      "None"):
        got = case.spec.aggregate(dict(case.group), failed_rows)
    check_scores(case, got, "aggregate on failed trials")


def empty_group(case: MetricCase) -> None:
    with case.calling("empty-group", "aggregate on a group without trials",
                      "return scores with value None (or []) when there are no trials"):
        got = case.spec.aggregate(dict(case.group), [])
    check_scores(case, got, "aggregate on no trials")


def check_scores(case: MetricCase, got, what: str) -> None:
    """Fail a ``score*`` rule unless ``got`` is a valid list of the metric's scores."""
    if not isinstance(got, list):
        case.fail("scores", f"{what}: aggregate returned {type(got).__name__}, not a list",
                  "return a list of robench.specs.Score")
    seen = set()
    for s in got:
        if not isinstance(s, Score):
            case.fail("scores", f"{what}: an item is {type(s).__name__}, not a Score",
                      "return robench.specs.Score(...) objects")
        _check_names(case, s, what, seen)
        _check_values(case, s, f"{what}: score {s.score!r}")


def _check_names(case: MetricCase, s: Score, what: str, seen: set) -> None:
    """Fail unless score ``s`` names the metric, its group and a sub-score not in ``seen``."""
    spec, group, label = case.spec, case.group, f"{what}: score {s.score!r}"
    if s.metric != spec.name:
        case.fail("score-metric", f"{label} has metric={s.metric!r}",
                  f"set metric={spec.name!r}, the registered name: scores are stored, "
                  "reused and ranked by it")
    if s.dataset != group["dataset"]:
        case.fail("score-group", f"{label} has dataset={s.dataset!r}; the group's is "
                  f"{group['dataset']!r}", "copy dataset from the group argument")
    if not isinstance(s.model, str) or not isinstance(s.clusterer, str):
        case.fail("score-group", f"{label} has model={s.model!r}, clusterer="
                  f"{s.clusterer!r}", "use the group's names ('' where the score does "
                  "not depend on one)")
    if not isinstance(s.score, str) or not s.score:
        case.fail("score-name", f"{what}: a Score has score={s.score!r}",
                  "name every sub-score (the headline usually after the metric)")
    ident = (s.dataset, s.model, s.clusterer, s.score)
    if ident in seen:
        case.fail("score-name", f"{label} appears twice for ({s.dataset}, {s.model}, "
                  f"{s.clusterer})", "give each sub-score its own name: scores are "
                  "stored by (dataset, model, clusterer, metric, score)")
    seen.add(ident)


def _check_values(case: MetricCase, s: Score, label: str) -> None:
    """Fail unless score ``s`` has finite, ordered values, a count and a dict of details."""
    for name in ("value", "ci_low", "ci_high"):
        v = getattr(s, name)
        if v is not None and (not isinstance(v, (int, float, np.number))
                              or isinstance(v, bool) or not math.isfinite(float(v))):
            case.fail("score-values", f"{label} has {name}={v!r}",
                      "use a finite float, or None when there is no value")
    lo, v, hi = s.ci_low, s.value, s.ci_high
    if (lo is not None and hi is not None and lo > hi) or (
            v is not None and ((lo is not None and lo > v) or (hi is not None and v > hi))):
        case.fail("score-ci", f"{label}: ci_low={lo}, value={v}, ci_high={hi} are not "
                  "ordered", "return ci_low <= value <= ci_high")
    if s.n is not None and (not isinstance(s.n, (int, np.integer)) or s.n < 0):
        case.fail("score-values", f"{label} has n={s.n!r}", "n is a count >= 0 or None")
    if not isinstance(s.details, dict):
        case.fail("score-values", f"{label} has details of type "
                  f"{type(s.details).__name__}", "details is a dict (stored as JSON)")


def score_json(scores) -> str:
    return json.dumps([plain(dataclasses.asdict(s)) for s in scores], sort_keys=True,
                      default=str)


def as_failed(row: dict) -> dict:
    """Return the stored row of the same trial had it failed: results empty, status failed."""
    keep = ("key", "run_id", "dataset", "model", "clusterer", "protocol", "kind", "repeat",
            "seed", "params", "versions", "spec", "finished_at")
    out = {name: (value if name in keep else None) for name, value in row.items()}
    out.update(status="failed", error="RuntimeError: a failure made up by robench.testing")
    return out


RULES = {"spec": spec_fields, "spec-protocol": spec_protocol, "run": run, "scores": scores,
         "aggregate-pure": aggregate_pure, "run-scores": run_scores,
         "failed-trials": failed_trials, "empty-group": empty_group}


def tiny_run(registry, spec: MetricSpec, *, dataset: str, model: str,
             clusterer: Optional[str], repeats: int, k: int, seed: int, settings,
             db: Path) -> tuple:
    """Run one metric on one combination in-process; return (report, trial rows, error or None)."""
    sections = ({name: dict(knobs) for name, knobs in (settings or {}).items()}
                if settings is None or isinstance(settings, dict)
                else parse_settings(list(settings), registry))
    cfg = RunConfig(datasets=[dataset], models=[model],
                    clusterers=[clusterer] if clusterer else [], metrics=[spec.name],
                    repeats=repeats, k=k, seed=seed, executor="local", jobs=1,
                    settings=sections).resolve(registry)
    report, error = {"scores": [], "skipped": []}, None
    with Store(db) as store:
        try:
            done = runner.execute(cfg, registry, store, command="robench.testing.check_metric")
            report = {"scores": done.scores, "skipped": done.skipped}
        except Exception as exc:  # noqa: BLE001 - reported by check_metric with the rows
            error = f"{type(exc).__name__}: {exc}"
        rows = store.trials()
    return report, rows, error
