"""Executors: run trial specs and stream result rows back to the driver as they finish.

A trial is a pure function of its spec (:func:`execute_trial`); executors differ only in
where it runs. Only the driver writes the database: workers return plain dict rows. Every
trial runs with one thread (docs/running.md, "Executors and threads", says why).
"""

from __future__ import annotations

import abc
import collections
import json
import logging
import multiprocessing as mp
import os
import signal
import socket
import sys
import time
import traceback
import uuid
from typing import Iterable, Iterator, Optional
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from threadpoolctl import threadpool_limits
from robench.data.cache import cache_dir, set_cache_dir
from robench.learn.devices import claim_worker_gpu, device_label, using_device, worker_gpus
from robench.plugins import make_registry
from robench.process.guard import (HARD_LIMIT_GRACE, TrialTimeout, time_limit, unwatch_sigint,
                                   user_interrupted, watch_sigint)
from robench.process.liveness import die_with_parent, watch_parent
from robench.process.provenance import redact_secrets, utc_now
from robench.run.batching import execute_unit
from robench.run.trials import TrialEnv

TRIAL_THREADS = 1
#: The environment variables OpenMP and the BLAS libraries read their thread count from.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Seconds past --trial-timeout after which a worker whose trial ignores the time limit (stuck
#: inside one C call) is ended; the process executor then records the trial as failed.
HARD_GRACE = 60.0
_ENV = None  # the worker process's TrialEnv, built by init_worker


def limit_threads(threads: int = TRIAL_THREADS) -> None:
    """Make every trial in this process use ``threads`` threads (torch, OpenMP, BLAS; set, not
    defaulted: docs/running.md, "Executors and threads")."""
    threads = max(1, int(threads))
    os.environ.update(dict.fromkeys(("ROBENCH_TORCH_THREADS", *THREAD_VARIABLES), str(threads)))
    if any(m in sys.modules for m in ("numpy", "scipy", "sklearn")):
        threadpool_limits(threads)
    if "robench.learn.train" in sys.modules:
        sys.modules["robench.learn.train"].set_torch_threads(threads)
    elif "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def execution_settings() -> dict:
    """Return how a trial run in this process runs (its ``execution`` column, outside its key):
    ``threads``, the limit :func:`limit_threads` set here, or None."""
    threads = os.environ.get("ROBENCH_TORCH_THREADS")
    return {"threads": int(threads) if threads and threads.isdigit() else None}


def init_worker(recipe: dict, cache_dir: Optional[str], gpu_queue=None,
                 threads: int = TRIAL_THREADS) -> None:
    """Build the worker's registry from its recipe (plain data, never live plugin objects);
    with ``gpu_queue`` the worker takes one GPU id from it and sees only that GPU."""
    global _ENV
    if gpu_queue is not None:
        claim_worker_gpu(gpu_queue.get(timeout=60))
    # A worker outliving a killed driver would hold its memory for ever: it dies with its
    # parent, whatever its trial is doing (docs/guarantees.md).
    parent = mp.parent_process()
    if not die_with_parent(parent.pid if parent is not None else None):
        watch_parent()
    watch_sigint()  # records a real Ctrl-C; False (a no-op) on a Dask worker's thread
    # this process is robench's own worker: a trial stuck past its limit may end it
    HARD_LIMIT_GRACE[0] = HARD_GRACE
    limit_threads(threads)
    sys._robench_called_from_test = not recipe.get("load_entrypoints", True)
    if cache_dir:
        set_cache_dir(cache_dir)
    _ENV = TrialEnv(make_registry(**recipe))


def worker_stamp() -> str:
    """Return where a trial ran: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _row(spec: dict) -> dict:
    """Return a trial row's fields from its spec, the spec as its key hashes it (no device)."""
    return {**{k: spec[k] for k in ("key", "dataset", "model", "clusterer", "protocol", "kind",
                                    "repeat", "seed", "params", "versions")},
            "spec": {k: v for k, v in spec.items() if k != "device"}}


def execute_trial(spec: dict, env=None, timeout: Optional[float] = None) -> dict:
    """Run one trial spec and return its row; whatever it raises (but a real Ctrl-C) becomes a
    failed row, and so does a trial past ``timeout`` seconds, even one that finished later."""
    env = env if env is not None else _ENV
    if "batch" in spec:  # a unit of trials trained together: a list of rows
        return execute_unit(spec, env, timeout, execute_trial)
    row = dict(_row(spec), worker=worker_stamp(), execution=execution_settings())
    base = dict(row)
    started = time.monotonic()
    try:
        with time_limit(timeout):
            check_same_data(spec, env)
            # The device travels in the spec but not in its key (robench.learn.devices says why).
            with using_device(spec.get("device")):
                row["device"] = device_label()
                result = env.registry.get("protocols", spec["protocol"]).run(spec, env)
        took = time.monotonic() - started
        if timeout and took > timeout:
            raise TrialTimeout(f"trial ran {took:.1f} s, past the time limit of {timeout:g} s "
                               "(--trial-timeout): it did not stop when told to (it caught or "
                               "blocked the limit); its result is not kept")
        row.update(result)
        row["status"], row["error"] = "ok", None
    except TrialTimeout as exc:
        row = dict(base, device=row.get("device"), status="failed", error=f"TrialTimeout: {exc}")
    except (KeyboardInterrupt, SystemExit, Exception) as exc:  # noqa: BLE001 - invariant 7
        if isinstance(exc, KeyboardInterrupt) and user_interrupted():
            raise  # a real Ctrl-C; any other raise of a trial is recorded
        what = ("KeyboardInterrupt raised by the trial's code (no Ctrl-C was pressed)"
                if isinstance(exc, KeyboardInterrupt)
                else f"SystemExit({exc.code!r}) raised by the trial's code"
                if isinstance(exc, SystemExit) else f"{type(exc).__name__}: {exc}")
        row.update(status="failed", error=f"{what}\n{traceback.format_exc(limit=6)}")
    row["finished_at"] = utc_now()
    return row


def check_same_data(spec: dict, env) -> None:
    """Raise if the data a trial would read is not the data its key was planned on."""
    planned = (spec.get("versions") or {}).get("dataset_content")
    if planned is None or not spec.get("dataset"):
        return
    if (found := env.registry.dataset_fingerprint(spec["dataset"])) != planned:
        raise RuntimeError(f"data set '{spec['dataset']}' changed since the run was planned "
                           f"(content {found}, planned on {planned}); run again to plan on the "
                           "current data")


def failed_row(spec: dict, error: str) -> dict:
    """Return the row of a trial that could not run at all (a unit of trials: a list of rows)."""
    if "batch" in spec:
        return [failed_row(s, error) for s in spec["batch"]]
    row = dict(_row(spec), status="failed", error=error, finished_at=utc_now())
    if spec.get("device"):
        row["device"] = device_label(spec["device"]) if spec["device"] != "cuda" else "cuda"
    return row


class Executor(abc.ABC):
    """Base class: ``run(specs)`` yields result rows in completion order."""

    name = "base"
    #: Seconds after which a trial is stopped and failed (None: none); from ``--trial-timeout``.
    trial_timeout: Optional[float] = None
    #: Whether ``run`` takes units of trials (robench.run.batching), yielding a list of rows each.
    runs_units: bool = False

    @abc.abstractmethod
    def run(self, specs: Iterable[dict]) -> Iterator[dict]:
        """Run every spec and yield its result row as soon as it is finished."""

    def close(self) -> None:
        """Release workers; safe to call twice."""


class LocalExecutor(Executor):
    """Run trials one after another in this process (simplest to debug)."""

    name = "local"
    runs_units = True

    def __init__(self, registry, jobs: int = 1, **_):
        self.env = TrialEnv(registry)

    def run(self, specs):
        limit_threads()
        previous = signal.getsignal(signal.SIGINT)
        watching = watch_sigint()
        try:
            for spec in specs:
                yield execute_trial(spec, self.env, self.trial_timeout)
        finally:
            if watching:
                unwatch_sigint(previous)


class ProcessExecutor(Executor):
    """Run trials on a pool of ``jobs`` spawned worker processes with one torch thread each; a
    worker that dies breaks the pool and its culprit is found (docs/guarantees.md)."""

    name = "process"
    runs_units = True

    def __init__(self, registry, jobs: int = 2, **_):
        if registry.recipe is None:
            raise ValueError("the process executor needs a registry built by make_registry()")
        self.recipe = registry.recipe
        self.jobs = max(1, int(jobs))
        self._pool = None

    def _new_pool(self, workers: int, device: Optional[str] = None):
        # spawn, not fork: the driver may already hold OpenMP/torch thread pools, which do not
        # survive fork reliably (nor does CUDA).
        ctx = mp.get_context("spawn")
        gpus = worker_gpus(device, workers) if device else []
        # one GPU per worker: each takes one id from the queue as it starts
        gpu_queue = ctx.Queue() if gpus else None
        for gpu in gpus:
            gpu_queue.put(gpu)
        return ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx,
            initializer=init_worker, initargs=(self.recipe, str(cache_dir()), gpu_queue),
        )

    def run(self, specs):
        queue = list(specs)
        # The run's device (one per run; robench.run.runner puts it in every spec).
        device = next((s.get("device") for s in queue if s.get("device")), None)
        # After a crash, the trials that were in flight are the suspects: they run one at a
        # time, to find the culprit; then the rest runs on every worker again.
        suspects: list = []
        while queue or suspects:
            isolate = bool(suspects)
            todo, suspects, queue = (suspects, [], queue) if isolate else (queue, suspects, [])
            workers = 1 if isolate else min(self.jobs, len(todo))
            # Keep at most 2 trials per worker queued so an interrupt cancels cheaply; when
            # isolating a crash, exactly one so a broken pool names its trial.
            limit = 1 if isolate else 2 * workers
            self._pool = self._new_pool(workers, device)
            futures = {}
            pending = collections.deque(todo)
            try:
                broken = self._fill(futures, pending, limit)
                if broken and not futures:
                    raise BrokenProcessPool("a new worker pool broke before it took a trial")
                while futures and not broken:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in done:
                        spec = futures.pop(fut)
                        try:
                            yield fut.result()
                        except BrokenProcessPool:
                            broken = True
                            if isolate:
                                yield failed_row(spec, "worker process died while running this "
                                                 "trial (killed, out of memory, or stuck past "
                                                 "--trial-timeout in code it could not stop)")
                            else:
                                suspects.append(spec)
                    if not broken:
                        broken = self._fill(futures, pending, limit)
                if broken:
                    suspects.extend(futures.values())
                    # never submitted: innocent, back to the full pool (or, isolating,
                    # still suspects)
                    (suspects if isolate else queue).extend(pending)
            finally:
                self.close()

    def _submit(self, spec):  # a seam: tests/reliability/test_contained.py orders crashes here
        return self._pool.submit(execute_trial, spec, None, self.trial_timeout)

    def _fill(self, futures: dict, pending, limit: int) -> bool:
        """Submit specs from ``pending`` until ``limit`` are in flight; True if the pool broke
        (``submit`` itself can raise it: the spec it refused never ran, back to ``pending``)."""
        while pending and len(futures) < limit:
            spec = pending.popleft()
            try:
                futures[self._submit(spec)] = spec
            except BrokenProcessPool:
                pending.appendleft(spec)
                return True
        return False

    def close(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


_DASK_ENVS: dict = {}
#: The most trials one Dask task runs, and the chunks per worker a run is cut into at least
#: (docs/running.md, "On a cluster (Dask)", says why).
MAX_CHUNK = 100
CHUNKS_PER_WORKER = 4
#: Seconds between the driver's checks on a Dask task it waits for.
POLL_SECONDS = 5.0
#: Seconds the driver waits with no Dask worker connected before it fails the trials it waits for.
NO_WORKER_SECONDS = 60.0
#: How often a trial suspected of killing its Dask worker is run alone before it is failed.
SUSPECT_TRIES = 2


def chunk_size(n_trials: int, workers: int) -> int:
    """Return how many trials one Dask task runs: 1 to :data:`MAX_CHUNK`.

    >>> chunk_size(6, 2), chunk_size(1000, 2), chunk_size(83_000, 32)
    (1, 100, 100)
    """
    per = -(-int(n_trials) // max(1, int(workers) * CHUNKS_PER_WORKER))
    return max(1, min(MAX_CHUNK, per))


def execute_trials_on_worker(specs: list, recipe: dict, cache_dir: Optional[str],
                             timeout: Optional[float] = None) -> list:
    """Run a chunk of trials one after another on a Dask worker; return their rows in order."""
    key = json.dumps([recipe, cache_dir], sort_keys=True)
    if key not in _DASK_ENVS:
        init_worker(recipe, cache_dir)
        _DASK_ENVS[key] = _ENV
    return [execute_trial(spec, _DASK_ENVS[key], timeout) for spec in specs]


class _NoProgress(Exception):
    """A Dask task the driver waited for can no longer finish (no worker, or past its limit)."""


class DaskExecutor(Executor):
    """Run trials on the Dask cluster at ``scheduler`` (``tcp://10.0.0.5:8786``), or on a local
    one of ``jobs`` single-threaded workers (docs/running.md, "On a cluster (Dask)")."""

    name = "dask"
    runs_units = True

    def __init__(self, registry, jobs: int = 2, scheduler: Optional[str] = None, **_):
        if registry.recipe is None:
            raise ValueError("the dask executor needs a registry built by make_registry()")
        try:
            import distributed  # noqa: F401
        except ImportError as exc:
            raise ValueError("the dask executor needs dask.distributed: "
                             "pip install 'robench[dask]'") from exc
        self.recipe = registry.recipe
        self.jobs = max(1, int(jobs))
        self.scheduler = scheduler
        self._client = self._cluster = None
        self._token = uuid.uuid4().hex

    def _connect(self):
        from distributed import Client, LocalCluster

        if self.scheduler:
            try:
                self._client = Client(self.scheduler, timeout="20s")
            except OSError as exc:
                raise ValueError(f"could not connect to the Dask scheduler at "
                                 f"{redact_secrets(self.scheduler)}: {exc}") from exc
        else:
            import dask

            limit_threads()
            # A worker that dies fails its task at once: robench retries the suspects itself,
            # one at a time (run() below), instead of Dask trying each on three more workers.
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                self._cluster = LocalCluster(host="127.0.0.1", n_workers=self.jobs,
                                             threads_per_worker=1, processes=True,
                                             dashboard_address=None, silence_logs=logging.ERROR)
            self._client = Client(self._cluster)

    def _workers(self) -> int:
        try:
            return len(self._client.scheduler_info().get("workers") or {})
        except Exception:  # noqa: BLE001 - a scheduler that does not answer has no worker
            return 0

    def run(self, specs):
        specs = list(specs)
        if not specs:
            return
        self._connect()
        # this run's tasks only: Dask answers a task whose key it holds with its old result
        self._token = uuid.uuid4().hex
        size = chunk_size(len(specs), max(self._workers(), self.jobs))
        chunks = [specs[start:start + size] for start in range(0, len(specs), size)]
        futures = {self._submit(chunk): chunk for chunk in chunks}
        suspects = []
        try:
            for fut, chunk, result, exc in self._as_finished(futures):
                if exc is None:
                    yield from result
                elif type(exc).__name__ == "KilledWorker":
                    # Every task on a dying worker is reported killed, not only the one
                    # that killed it: retry its trials one at a time to find the culprit.
                    suspects.extend(chunk)
                else:
                    why = (f"the Dask cluster made no progress: {exc}"
                           if isinstance(exc, _NoProgress)
                           else f"{type(exc).__name__} on the Dask cluster: {exc}")
                    yield from (failed_row(spec, why) for spec in chunk)
            for spec in suspects:
                yield self._retry_alone(spec, futures)
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()

    def _retry_alone(self, spec: dict, futures: dict) -> dict:
        """Return the row of a suspect trial run alone, up to :data:`SUSPECT_TRIES` times (a
        worker still dying from the culprit is not its fault; a culprit kills every worker)."""
        for attempt in range(1, SUSPECT_TRIES + 1):
            fut = self._submit([spec], retry=attempt)
            futures[fut] = [spec]
            for _, _, result, exc in self._as_finished({fut: [spec]}, retry=True):
                if exc is None:
                    return result[0]
                if isinstance(exc, _NoProgress):
                    return failed_row(spec, f"the Dask worker running this trial died or "
                                      f"hung, and the retry made no progress: {exc}")
                if attempt == SUSPECT_TRIES:
                    return failed_row(spec, f"{type(exc).__name__}: the Dask worker running "
                                      f"this trial died (killed or out of memory) each of "
                                      f"{SUSPECT_TRIES} times it ran alone: {exc}")
        raise AssertionError("unreachable")  # pragma: no cover

    def _as_finished(self, futures: dict, retry: bool = False):
        """Yield (future, chunk, rows, exception) as tasks finish; give a task up
        (:class:`_NoProgress`) with no worker connected, or, for a retry, past its time limit."""
        from distributed import wait

        waiting = dict(futures)
        started = time.monotonic()
        alone_since = None
        limit = (len(next(iter(futures.values()))) * (self.trial_timeout + HARD_GRACE) + 60.0
                 if retry and self.trial_timeout else None)
        while waiting:
            try:
                done, _ = wait(list(waiting), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for fut in done:
                chunk = waiting.pop(fut)
                try:
                    yield fut, chunk, fut.result(), None
                except Exception as exc:  # noqa: BLE001 - recorded, never raised
                    yield fut, chunk, None, exc
            if done or not waiting:
                alone_since = None
                continue
            now = time.monotonic()
            if limit is not None and now - started > limit:
                stuck = _NoProgress(f"no result {limit:.0f} s after it was submitted "
                                    "(its --trial-timeout, the hard grace and a minute)")
            elif self._workers() == 0:
                alone_since = alone_since or now
                if now - alone_since < NO_WORKER_SECONDS:
                    continue
                stuck = _NoProgress(f"no Dask worker connected for {NO_WORKER_SECONDS:.0f} s")
            else:
                alone_since = None
                continue
            for fut, chunk in list(waiting.items()):
                fut.cancel()
                yield fut, chunk, None, stuck
            waiting.clear()

    def _submit(self, chunk: list, retry: int = 0):
        # a retry's try number is in its key: Dask would hand back a finished task of the
        # same key instead of running it again
        key = (f"trials-{self._token}-{chunk[0]['key']}-{len(chunk)}"
               + (f"-retry{int(retry)}" if retry else ""))
        return self._client.submit(execute_trials_on_worker, chunk, self.recipe,
                                   str(cache_dir()), self.trial_timeout, key=key, pure=False)

    def close(self):
        for name in ("_client", "_cluster"):  # the client first: it talks to the cluster
            if getattr(self, name) is not None:
                getattr(self, name).close()
                setattr(self, name, None)
