"""``robench verify``: re-run a random sample of stored trials and compare them with their rows.

Exactly on the same device, torch version and CPU; within :func:`tolerance` otherwise (and
those re-runs tested together, :func:`systematic_shift`). docs/contributions.md has the
argument, the sampling and the time limits; docs/publishing.md what a sample catches.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import multiprocessing as mp
import os
import random
import re
import signal
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
import numpy as np

from robench.errors import VerifyError
from robench.storage.content import ACCURACIES, differing, first_difference, trial_content
from robench.data.cache import cache_dir
from robench.learn.devices import device_label
from robench.process.liveness import host_name
from robench.process.provenance import run_environment, utc_now
from robench.run.config import TRIAL_TIMEOUT
from robench.run.executors import (TRIAL_THREADS, execute_trial, failed_row, init_worker,
                                   limit_threads)
from robench.run.trials import TrialEnv
from robench.stats import is_finite
from robench.stats.bits import unpack_bits
from robench.storage.store import decode_row, encode_row
from robench.storage.verification import save_verification

#: Trials re-run when ``--sample`` is not given: one of each of ten (model, protocol) strata.
DEFAULT_SAMPLE = 10
#: Columns compared exactly in tolerance mode (besides the accuracies).
_EXACT_ALWAYS = ("status", "n_train", "n_val", "n_test", "params", "versions", "dataset",
                 "model", "clusterer", "protocol", "kind", "repeat", "seed")
#: Rows each accuracy column is measured on.
_ROWS_OF = {"accuracy": ("n_test",), "last_test_accuracy": ("n_test",),
            "train_accuracy": ("n_train",), "val_accuracy": ("n_val",),
            "last_val_accuracy": ("n_val",), "all_accuracy": ("n_train", "n_val", "n_test")}


@dataclass
class Verification:
    """What one ``robench verify`` found."""

    trials: list = field(default_factory=list)  # dicts, see check_trial
    host: str = ""
    device: str = ""
    started_at: str = ""
    record_id: Optional[int] = None
    #: One-direction shifts of the tolerance-mode re-runs, tested together
    #: (:func:`systematic_shift`); the trials they cover are mismatches.
    shifts: list = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(t["outcome"] == outcome for t in self.trials)


def _standard_error(stored: float, rerun: float, n: int) -> float:
    """Return the standard error of two accuracies' difference on ``n`` rows (Agresti-Coull)."""
    p = (float(stored) * n + float(rerun) * n + 2.0) / (2.0 * n + 4.0)
    return math.sqrt(2.0 * p * (1.0 - p) / n)


def tolerance(stored: float, rerun: float, n: int) -> float:
    """Return how far a re-run accuracy may lie from the stored one: 3 standard errors + a row."""
    return 3.0 * _standard_error(stored, rerun, n) + 1.0 / n if n else 0.0


#: Chance that the joint test below refuses an honest verification (its differences centred
#: on 0), all accuracy columns and both tests together (Bonferroni).
SHIFT_ALPHA = 0.01
#: Fewest tolerance-mode re-runs of a column the joint test reads (fewer cannot show a shift).
SHIFT_LEAST = 3


def standardised(stored: float, rerun: float, n: int) -> float:
    """Return ``rerun - stored`` in standard errors (the unit of :func:`tolerance`)."""
    return (float(rerun) - float(stored)) / _standard_error(stored, rerun, n)


def shift_pvalues(z):
    """Return (sign test p, t test p), two-sided, of ``z`` over its last axis (NaN: absent)."""
    from scipy import stats

    z = np.asarray(z, dtype=float)
    ok = np.isfinite(z)
    n = ok.sum(-1)
    zz = np.where(ok, z, 0.0)
    pos, neg = (zz > 0).sum(-1), (zz < 0).sum(-1)
    m = pos + neg
    p_sign = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(pos, neg), np.maximum(m, 1), 0.5))
    p_sign = np.where(m > 0, p_sign, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = zz.sum(-1) / n
        sd = np.sqrt(np.where(ok, (zz - mean[..., None]) ** 2, 0.0).sum(-1) / (n - 1))
        t = mean / (sd / np.sqrt(n))
        p_t = 2.0 * stats.t.sf(np.abs(t), np.maximum(n - 1, 1))
    p_t = np.where(sd > 0, p_t, np.where(np.abs(mean) > 0, 0.0, 1.0))
    p_t = np.where(n >= 2, p_t, 1.0)
    return p_sign, p_t


def systematic_shift(entries: list, alpha: float = SHIFT_ALPHA) -> list:
    """Return [{column, n, ..., text}] of the columns whose loose re-runs moved one way together."""
    columns = {}
    for entry in entries:
        for c, (a, b, n) in entry.items():
            if n:
                columns.setdefault(c, []).append(standardised(a, b, n))
    tested = {c: z for c, z in columns.items() if len(z) >= SHIFT_LEAST}
    out = []
    for c, z in tested.items():
        p_sign, p_t = (float(p) for p in shift_pvalues(np.array(z)))
        level = alpha / (2 * len(tested))
        if min(p_sign, p_t) >= level:
            continue
        pos, neg = sum(v > 0 for v in z), sum(v < 0 for v in z)
        mean = float(np.mean(z))
        out.append({"column": c, "n": len(z), "positive": pos, "negative": neg, "mean": mean,
                    "p_sign": p_sign, "p_t": p_t, "text": (
                        f"systematic shift: re-run minus stored {c} is "
                        f"{'negative' if mean < 0 else 'positive'} in {neg if mean < 0 else pos}"
                        f" of {len(z)} re-runs compared within the tolerance (mean "
                        f"{mean:+.2f} standard errors; sign test p = {p_sign:.2g}, t test p = "
                        f"{p_t:.2g}, refused below {level:.2g}): each within its tolerance, "
                        "together not")})
    return out


#: Strata the sample covers before any is sampled twice.
STRATUM = ("model", "protocol", "kind")
#: Trials of one headline score's inputs: a trial's influence on that score is shared with
#: the trials of its group.
_GROUP = ("dataset", "model", "clusterer", "protocol", "kind")
#: Robust standard deviations from its group's median beyond which a trial is always re-run.
CERTAIN = 3.0


def _deviations(rows: list) -> dict:
    """Return {trial key: (group size, |accuracy - group median| in robust SDs)}."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row.get(c) or "" for c in _GROUP), []).append(row)
    out = {}
    for members in groups.values():
        accs = [float(r["accuracy"]) for r in members if is_finite(r.get("accuracy"))]
        centre = statistics.median(accs) if accs else 0.0
        mad = statistics.median(abs(a - centre) for a in accs) if accs else 0.0
        for r in members:
            spread = max(1.4826 * mad, 1.0 / max(int(r.get("n_test") or 0), 1), 0.005)
            far = (abs(float(r["accuracy"]) - centre) / spread
                   if is_finite(r.get("accuracy")) else 0.0)
            out[r["key"]] = (len(members), far)
    return out


def influence(rows: list) -> dict:
    """Return {trial key: (1 + z)^2 / group size}, ``z`` its robust SDs from its group's median."""
    return {key: (1.0 + far) ** 2 / size for key, (size, far) in _deviations(rows).items()}


def _weighted_draw(rng, pool: list, weights: dict) -> dict:
    total = sum(weights[r["key"]] for r in pool)
    x, acc = rng.random() * total, 0.0
    for i, r in enumerate(pool):
        acc += weights[r["key"]]
        if x < acc:
            return pool.pop(i)
    return pool.pop()


def sample_trials(rows: list, n: int, seed: int, weighted: bool = False) -> list:
    """Return up to ``n`` trial rows, each (model, protocol, kind) stratum once before any twice."""
    rng = random.Random(seed)
    pools = {}  # stratum -> its trials not drawn yet
    for row in sorted(rows, key=lambda r: r["key"]):
        pools.setdefault(tuple(row.get(c) or "" for c in STRATUM), []).append(row)
    order = sorted(pools)
    rng.shuffle(order)
    if weighted:
        return _weighted_sample(rows, n, rng, order, pools)
    out = []
    while len(out) < n and any(pools.values()):
        for name in order:
            if pools[name] and len(out) < n:
                out.append(pools[name].pop(rng.randrange(len(pools[name]))))
    return out


def _weighted_sample(rows: list, n: int, rng, order: list, pools: dict) -> list:
    """Return the farthest trials, then every stratum once, then its share, each by influence."""
    weights = influence(rows)
    out, covered = _farthest(rows, n, order)
    taken = {r["key"] for r in out}
    for name in order:
        pools[name] = [r for r in pools[name] if r["key"] not in taken]
    for name in order:  # every stratum once
        if name not in covered and pools[name] and len(out) < n:
            out.append(_weighted_draw(rng, pools[name], weights))
    while len(out) < n and any(pools.values()):
        live = [name for name in order if pools[name]]
        share = max(1, (n - len(out)) // len(live))
        for name in live:  # every stratum its share, in turn
            for _ in range(min(share, len(pools[name]), n - len(out))):
                out.append(_weighted_draw(rng, pools[name], weights))
    return out


def _farthest(rows: list, n: int, order: list) -> tuple[list, set]:
    """Return the trials beyond :data:`CERTAIN` SDs, farthest first (n/2 at most), their strata."""
    deviations = _deviations(rows)
    far = sorted((r for r in rows if deviations[r["key"]][1] > CERTAIN),
                 key=lambda r: (-deviations[r["key"]][1], r["key"]))
    out, covered = [], set()
    for r in far:
        stratum = tuple(r.get(c) or "" for c in STRATUM)
        if len(out) >= n // 2 or n - len(out) - 1 < len(set(order) - covered - {stratum}):
            break
        out.append(r)
        covered.add(stratum)
    return out, covered


def default_sample(rows: list, fraction: float, least: int) -> int:
    """Return how many trials to re-run: every stratum once, ``least`` and ``fraction`` of them."""
    strata = {tuple(r.get(c) or "" for c in STRATUM) for r in rows}
    return min(len(rows), max(len(strata), least, math.ceil(fraction * len(rows))))


#: What a board's maintainer does about a component its runner cannot load.
REMEDY = ("install the distribution that provides it here (on a board its maintainer adds its "
          "wheel to wheels/ or its requirement line to requirements.txt with a push to main: a "
          "pull request cannot)")


#: A distribution name (PEP 508) and a plain version: what a refusal may put in a pip command.
_DIST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_DIST_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!-]{0,40}")


def provider(recorded, plugins, registry, pins: Optional[dict] = None,
             distributions: Optional[dict] = None) -> str:
    """Return which plugin of a stored run provides a component not installed here: one clause
    (``recorded``: PLUGIN-VERSION/COMPONENT-VERSION; ``pins``: {plugin: (version, line)})."""
    version = str(recorded or "").partition("/")[0]
    here = registry.infos
    lacking = {str(n): str(v) for n, v in (plugins if isinstance(plugins, dict) else {}).items()
               if n not in here or here[n].status != "ok"}
    named = sorted(n for n, v in lacking.items() if v == version) or sorted(lacking)
    if not named:
        return "no plugin its run recorded is missing here"
    parts = []
    for name in named[:3]:
        text = f"plugin '{name}' {lacking[name] or '(no version)'}"
        dist = (distributions if isinstance(distributions, dict) else {}).get(name)
        if isinstance(dist, str) and _DIST_NAME.fullmatch(dist):  # a stored name: only a valid one
            text += (f" (distribution '{dist}': pip install '{dist}=={lacking[name]}')"
                     if _DIST_VERSION.fullmatch(lacking[name]) else f" (distribution '{dist}')")
        info = here.get(name)
        if info is not None and info.status != "ok":
            text += f" (installed here, but it fails to load: {info.error.splitlines()[0][:80]})"
        pin = (pins or {}).get(name)
        if pin:
            text += f" (requirements.txt pins it at {pin[0]}: {pin[1]})"
        parts.append(text)
    more = f" or {len(named) - 3} more" if len(named) > 3 else ""
    return f"from {' or '.join(parts)}{more}, by its run's record"


def missing(spec: dict, registry, plugins: Optional[dict] = None,
            distributions: Optional[dict] = None) -> Optional[str]:
    """Return why ``spec`` cannot be re-run here (with ``plugins``: its provider and the remedy)."""
    versions = spec.get("versions") or {}
    protocol = spec.get("protocol")
    if protocol not in registry.names("protocols"):
        return not_installed("protocol", protocol, None, plugins, registry, distributions)
    spec_ = registry.get("protocols", protocol)
    have = str(spec_.version)
    if str(versions.get("protocol")) not in {have, *map(str, spec_.trial_versions)}:
        return (f"protocol '{protocol}' is version {have} here, the trial ran with "
                f"{versions.get('protocol')}")
    for slot in ("dataset", "model", "clusterer"):
        kind, name = slot + "s", spec.get(slot)
        if not name or slot not in versions:
            continue
        try:
            have = registry.component_version(kind, name)
        except Exception:  # noqa: BLE001 - any failure to resolve is "not installed"
            if kind == "models":
                continue  # a protocol's own helper model (a zoo member): the protocol builds it
            return not_installed(slot, name, versions[slot], plugins, registry, distributions)
        if have != versions[slot]:
            return (f"{slot} '{name}' is {have} here (plugin/component version), the "
                    f"trial ran with {versions[slot]}")
    return None


def not_installed(kind: str, name: str, recorded, plugins, registry,
                  distributions: Optional[dict] = None) -> str:
    """Return "KIND 'NAME' is not installed here", with provider and remedy where known."""
    text = f"{kind} '{name}' is not installed here"
    return text if plugins is None else (
        f"{text} ({provider(recorded, plugins, registry, None, distributions)}); {REMEDY}")


def execution_of(stored: dict) -> dict:
    """Return the threads and executor a stored trial ran with (unrecorded: TRIAL_THREADS)."""
    recorded = stored.get("execution")
    if not isinstance(recorded, dict):
        return {"threads": TRIAL_THREADS, "executor": None}
    threads = recorded.get("threads")
    return {"threads": int(threads) if isinstance(threads, int) and threads > 0 else None,
            "executor": recorded.get("executor")}


#: Seconds past a re-run's time limit after which its worker process is killed (the worker
#: ends the trial itself at the limit; this is for a trial that catches or blocks that).
KILL_GRACE = 5.0
#: Seconds a re-run worker may take to start (import robench and the plugins).
STARTUP_LIMIT = 600.0
#: How the error of a re-run whose worker never started begins (refused: not the trial's doing).
NOT_STARTED = "NotRerun"


def init_rerun_worker(*args) -> None:
    """Start a re-run worker in a process group of its own, for :func:`kill_group`."""
    os.setsid()
    init_worker(*args)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (a re-run worker), if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class Rerunner:
    """Re-run trial specs in spawned workers (a pool per thread count) with their threads."""

    def __init__(self, registry):
        self.registry = registry
        self.env = TrialEnv(registry)
        self._pools: dict = {}
        self._groups: set = set()  # process groups of the workers started (their pids)

    def _pool(self, threads: int):
        if threads not in self._pools:
            pool = ProcessPoolExecutor(
                max_workers=1, mp_context=mp.get_context("spawn"),
                initializer=init_rerun_worker,
                initargs=(self.registry.recipe, str(cache_dir()), None, threads))
            self._pools[threads] = pool
            # start the worker now: its start-up (imports, the registry) is not the trial's time
            self._groups.add(pool.submit(os.getpid).result(timeout=STARTUP_LIMIT))
        return self._pools[threads]

    def _end(self, threads: int) -> None:
        """Kill the worker of ``threads`` with its whole process group; forget its pool."""
        pool = self._pools.pop(threads, None)
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            kill_group(proc.pid)
            self._groups.discard(proc.pid)
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def run(self, spec: dict, execution: dict, timeout: Optional[float] = None) -> dict:
        """Return the row of ``spec`` re-run with ``execution`` within ``timeout`` seconds."""
        threads = execution.get("threads") or TRIAL_THREADS
        if self.registry.recipe is None:
            limit_threads(threads)
            return execute_trial(dict(spec), self.env, timeout)
        timed_out = (f"TrialTimeout: the re-run did not stop at its time limit of {timeout or 0:g}"
                     " s; its worker process was killed")
        try:
            pool = self._pool(threads)
        except (FutureTimeout, BrokenProcessPool) as exc:
            self._end(threads)
            return failed_row(spec, f"{NOT_STARTED}: its worker process " + (
                f"did not start within {STARTUP_LIMIT:g} s" if isinstance(exc, FutureTimeout)
                else "failed to start (robench or a plugin fails to import in a fresh process)"))
        started = time.monotonic()
        try:
            return pool.submit(execute_trial, dict(spec), None, timeout).result(
                timeout=None if timeout is None else timeout + KILL_GRACE)
        except FutureTimeout:
            self._end(threads)
            return failed_row(spec, timed_out)
        except BrokenProcessPool:
            self._end(threads)
            if timeout is not None and time.monotonic() - started >= timeout:
                return failed_row(spec, timed_out)  # its own hard limit ended it
            return failed_row(spec, "the worker process re-running this trial died (killed "
                              "or out of memory)")

    def close(self, kill: bool = False) -> None:
        """Stop the workers (``kill``: at once), then kill what is left of their process groups."""
        for threads in list(self._pools):
            if kill:
                self._end(threads)
            else:
                self._pools.pop(threads).shutdown(wait=True, cancel_futures=True)
        for group in self._groups:
            kill_group(group)
        self._groups.clear()

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc):
        self.close(kill=kind is not None)


def against_data(row: dict, y, indices: tuple) -> Optional[str]:
    """Return how an ok trial's row contradicts labels ``y`` and partition ``indices``, or None."""
    train, val, test = (np.asarray(i, dtype=int) for i in indices)
    y = np.asarray(y)
    for column, rows in (("n_train", train), ("n_val", val), ("n_test", test)):
        if row.get(column) is not None and int(row[column]) != len(rows):
            return f"{column} {row[column]} is not the {len(rows)} rows of its partition"
    if not row.get("correct"):
        return None
    if len(base64.b64decode(row["correct"])) != (len(y) + 7) // 8:
        return f"its correct bits do not cover the data set's {len(y)} rows"
    bits = unpack_bits(row["correct"], len(y))
    if row.get("accuracy") is not None and len(test):
        have = float(bits[test].mean())
        if abs(have - float(row["accuracy"])) > 1e-9:
            return (f"accuracy {row['accuracy']} is not what its correct bits give on its test "
                    f"rows ({have:.6f})")
    per_class = row.get("per_class")
    if isinstance(per_class, str):
        per_class = json.loads(per_class)
    if isinstance(per_class, list) and len(test):
        for c, value in enumerate(per_class):
            mask = y[test] == c
            have = float(bits[test][mask].mean()) if mask.any() else None
            if (have is None) != (value is None) or (
                    have is not None and abs(have - float(value)) > 1e-9):
                return (f"its per-class accuracy of class {c} is not what its correct bits give "
                        "on its test rows")
    return None


def data_inconsistencies(rows: list, registry) -> list:
    """Return [(trial, why)] of the ok trials contradicting the data installed here as they ran."""
    out = []
    for row in rows:
        spec = row.get("spec")
        if row.get("status") != "ok" or not isinstance(spec, dict):
            continue
        try:
            protocol = registry.get("protocols", spec.get("protocol"))
            if protocol.partition is None:
                continue
            versions = spec.get("versions") or {}
            here = registry.dataset_versions(spec["dataset"])
            if any(versions.get(k) != v for k, v in here.items()):
                continue  # other data, or another version of it: nothing to read it against
            dataset = registry.load_dataset(spec["dataset"])
            indices = protocol.partition(spec, dataset, registry)
        except Exception:  # noqa: BLE001 - data or clusterer not usable here: verify decides
            continue
        why = against_data(row, dataset.y, indices)
        if why is not None:
            out.append((row, why))
    return out


def _stored_like(row: dict) -> dict:
    """Return a freshly computed trial row as the database would give it back."""
    return decode_row("trials", encode_row("trials", dict(row)))


def compare(stored: dict, rerun: dict, exact: bool) -> list:
    """Return the differences [{column, stored, rerun, tolerance, ...}] of two trial rows."""
    old, new = trial_content(stored), trial_content(rerun)
    if exact:
        out = []
        for c in differing(old, new):
            path, a, b = first_difference(old.get(c), new.get(c), c)
            out.append({"column": c, "stored": old.get(c), "rerun": new.get(c),
                        "tolerance": 0.0, "path": path, "stored_at": a, "rerun_at": b})
        return out
    out = [{"column": c, "stored": old.get(c), "rerun": new.get(c), "tolerance": 0.0}
           for c in _EXACT_ALWAYS if old.get(c) != new.get(c)]
    for c in ACCURACIES:
        a, b = old.get(c), new.get(c)
        both = a is not None and b is not None
        tol = tolerance(a, b, _rows(old, c)) if both else 0.0
        if (a is not None or b is not None) and (not both or abs(float(a) - float(b)) > tol):
            out.append({"column": c, "stored": a, "rerun": b, "tolerance": tol})
    return out


def _rows(row: dict, column: str) -> int:
    """Return how many rows the accuracy ``column`` of a trial row is measured on."""
    return sum(int(row.get(k) or 0) for k in _ROWS_OF[column])


def difference_text(d: dict) -> str:
    """Return a verify difference as text, both values whole (two cut alike would look equal)."""
    if "path" in d:
        text = f"{d['path']} stored {_full(d['stored_at'])}, re-run {_full(d['rerun_at'])}"
    else:
        text = f"{d['column']} stored {_full(d['stored'])}, re-run {_full(d['rerun'])}"
    if d.get("tolerance"):
        text += f" (tolerance {d['tolerance']:.4f})"
    if d.get("error"):
        text += f": {d['error']}"
    return text


def _full(value) -> str:
    # repr of a float is the shortest text that reads back as the same float: all digits
    return value if isinstance(value, str) else json.dumps(value, default=str)


#: A re-run may take this many times the seconds its trial recorded, plus
#: :data:`RECORDED_FLOOR` (start-up, a slower machine), never more than its run's limit.
RECORDED_FACTOR = 20.0
RECORDED_FLOOR = 60.0


def trial_limit(run: dict, limit: Optional[float], recorded=None) -> float:
    """Return the seconds a re-run may take: its run's limit, ``limit`` and its recorded time's."""
    config = run.get("config") if isinstance(run.get("config"), dict) else {}
    own = config.get("trial_timeout")
    if not is_finite(own) or own <= 0:  # 0 (no limit) is not a limit a verifier takes over
        own = TRIAL_TIMEOUT.get(config.get("profile"), TRIAL_TIMEOUT["standard"])
    own = float(own if limit is None else min(own, limit))
    if is_finite(recorded) and recorded >= 0:
        own = min(own, RECORDED_FLOOR + RECORDED_FACTOR * float(recorded))
    return own


def verify(store, registry, *, sample: int = DEFAULT_SAMPLE, seed: int = 0,
           contributor: Optional[str] = None,
           on_trial: Optional[Callable[[dict], None]] = None,
           trial_timeout: Optional[float] = None, budget: Optional[float] = None,
           weighted: bool = False, exact_only: bool = False) -> Verification:
    """Re-run a stratified sample of ``store``'s ok trials here, compare, record; return it.

    ``contributor``: only its merged trials; ``on_trial``: called with each entry; ``budget``:
    seconds for all re-runs; ``exact_only``: compare exactly whatever machine the run claims.
    """
    if sample < 1:
        raise VerifyError(f"--sample must be at least 1, got {sample}")
    filters = {"status": "ok"}
    if contributor is not None:
        merged = store.contributions()
        runs = [r for r, c in merged.items() if c.get("contributor") == contributor]
        if not runs:
            known = sorted({c.get("contributor") for c in merged.values()} - {None})
            raise VerifyError(f"no run in {store.path} was merged from contributor "
                              f"'{contributor}'; known: {', '.join(known) or 'none'}")
        filters["run_id"] = runs
    rows = store.trials(**filters)
    if not rows:
        raise VerifyError(f"{store.path} holds no successful trial to verify"
                          + (f" from '{contributor}'" if contributor else ""))
    env = run_environment()
    result = Verification(host=host_name(), device=device_label("cpu"), started_at=utc_now())
    runs = {r["id"]: r for r in store.runs({r["run_id"] for r in rows
                                            if r.get("run_id") is not None})}
    with Rerunner(registry) as rerunner:
        began, loose = time.monotonic(), []  # loose: (entry, accuracies) of tolerance re-runs
        for stored in sample_trials(rows, sample, seed, weighted=weighted):
            left = None if budget is None else budget - (time.monotonic() - began)
            entry, columns = _check_trial(stored, runs.get(stored.get("run_id")) or {}, env,
                                          rerunner, left, budget, trial_timeout, exact_only)
            if columns is not None:
                loose.append((entry, columns))
            result.device = entry.get("device") or result.device
            result.trials.append(entry)
            if on_trial is not None:
                on_trial(entry)
    result.shifts = systematic_shift([columns for _, columns in loose])
    _mark_shifted(result.shifts, loose)

    result.record_id = save_verification(store, result, seed=seed, contributor=contributor,
                                         environment=env, plugin_versions=registry
                                         .plugin_versions(), finished_at=utc_now())
    return result


def _check_trial(stored: dict, run: dict, env: dict, rerunner, left, budget, trial_timeout,
                 exact_only: bool) -> tuple[dict, Optional[dict]]:
    """Re-run and compare one sampled trial; return its entry and its loose accuracies or None."""
    registry = rerunner.registry
    entry = {c: stored.get(c) for c in ("key", "dataset", "model", "clusterer", "protocol",
                                        "kind", "repeat")}
    spec = stored.get("spec")
    why = "no stored spec" if not isinstance(spec, dict) else missing(
        spec, registry, run.get("plugin_versions") or {}, run.get("plugin_distributions"))
    if why is None and left is not None and left <= 0:
        entry["timed_out"] = True
        why = f"not re-run: the verification's time budget of {budget:g} s was spent"
    if why is not None:
        entry.update(outcome="refused", reason=why)
        return entry, None
    limit = trial_limit(run, trial_timeout, stored.get("seconds"))
    limit = limit if left is None else min(limit, left)
    t0 = time.perf_counter()
    execution = execution_of(stored)
    rerun = _stored_like(rerunner.run(spec, execution, timeout=limit))
    refused = _not_compared(rerun, spec, run, registry, limit, t0)
    if refused is not None:
        entry.update(outcome="refused", **refused)
        return entry, None
    exact = exact_only or _same_machine(stored, rerun, run, env)
    loose = None
    if rerun.get("status") != "ok":
        diffs = [{"column": "status", "stored": "ok", "rerun": "failed",
                  "tolerance": 0.0, "error": (rerun.get("error") or "").splitlines()[0]
                  if rerun.get("error") else ""}]
    else:
        diffs = compare(stored, rerun, exact)
        loose = None if exact else _accuracies(stored, rerun)
    entry.update(outcome="mismatch" if diffs else "match",
                 mode="exact" if exact else "tolerance", differences=diffs,
                 stored_device=stored.get("device"), device=rerun.get("device"),
                 threads=execution["threads"], seconds=round(time.perf_counter() - t0, 3))
    return entry, loose


def _mark_shifted(shifts: list, loose: list) -> None:
    """Make every tolerance-mode re-run that moved in a shift's direction a mismatch."""
    for shift in shifts:
        c = shift["column"]
        sign = 1 if shift["mean"] > 0 else -1
        for entry, columns in loose:
            a, b, n = columns.get(c, (0, 0, 0))
            if (b - a) * sign > 0:
                entry["differences"].append({"column": c, "stored": a, "rerun": b,
                                             "tolerance": tolerance(a, b, n),
                                             "error": shift["text"]})
                entry["outcome"] = "mismatch"


def _same_machine(stored: dict, rerun: dict, run: dict, env: dict) -> bool:
    """Whether a re-run is compared exactly: stored alone on this device, torch and CPU."""
    # torch's package metadata says 2.5.1 where the imported module says 2.5.1+cpu: a run
    # records one or the other depending on whether torch was imported when it started
    torch = {(v or "").partition("+")[0] for v in (run.get("torch_version"), env["torch_version"])}
    cpu = {(p or "").partition("CPU: ")[2] for p in (run.get("platform"), env["platform"])}
    return (stored.get("device") in (None, rerun.get("device")) and len(torch) == len(cpu) == 1
            and not (isinstance(stored.get("execution"), dict)  # trained in a batch
                     and stored["execution"].get("batched")))


def _not_compared(rerun: dict, spec: dict, run: dict, registry, limit: float,
                  t0: float) -> Optional[dict]:
    """Return the refusal of a failed re-run that says nothing of the stored trial, or None."""
    error = rerun.get("error") or ""
    if rerun.get("status") == "ok":
        return None
    if error.startswith("TrialTimeout"):
        return {"timed_out": True, "seconds": round(time.perf_counter() - t0, 3),
                "reason": f"did not finish within {limit:g} s here (its run's time limit, at "
                f"most the verifier's and {RECORDED_FACTOR:g} x its recorded time + "
                f"{RECORDED_FLOOR:g} s)"}
    if error.startswith(NOT_STARTED + ":"):
        return {"reason": "not re-run here: " + error[len(NOT_STARTED) + 1:].strip()}
    try:
        registry.get("models", spec.get("model"))
    except Exception:  # noqa: BLE001 - a model the protocol does not build: not installed
        return {"reason": not_installed("model", spec.get("model"), (
            spec.get("versions") or {}).get("model"), run.get("plugin_versions") or {},
            registry, run.get("plugin_distributions"))}
    return None


def _accuracies(stored: dict, rerun: dict) -> dict:
    """Return {column: (stored, re-run, rows)} of the accuracies both rows hold."""
    old, new = trial_content(stored), trial_content(rerun)
    return {c: (float(old[c]), float(new[c]), _rows(old, c)) for c in ACCURACIES
            if is_finite(old.get(c)) and is_finite(new.get(c)) and _rows(old, c)}
