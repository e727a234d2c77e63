"""Built-in executors."""

from __future__ import annotations

from robench import hookimpl
from robench.specs import ExecutorSpec
from robench.run.executors import DaskExecutor, LocalExecutor, ProcessExecutor


def _local(registry, jobs=1, **options):
    return LocalExecutor(registry, jobs=jobs, **options)


def _process(registry, jobs=2, **options):
    return ProcessExecutor(registry, jobs=jobs, **options)


def _dask(registry, jobs=2, **options):
    return DaskExecutor(registry, jobs=jobs, **options)


@hookimpl
def register_executors(register):
    register(ExecutorSpec("local", _local, "Run trials one by one in this process."))
    register(ExecutorSpec(
        "process", _process,
        "Run trials on -j/--jobs spawned worker processes, one torch thread each (default).",
    ))
    register(ExecutorSpec(
        "dask", _dask,
        "Run trials on a Dask cluster (--scheduler ADDRESS), or on a local one bound to "
        "127.0.0.1 with -j/--jobs workers.",
    ))
