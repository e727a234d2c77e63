"""Built-in executors."""

from __future__ import annotations

from robench import hookimpl
from robench.specs import ExecutorSpec


def _local(registry, jobs=1, **options):
    from robench.executors import LocalExecutor

    return LocalExecutor(registry, jobs=jobs, **options)


def _process(registry, jobs=2, **options):
    from robench.executors import ProcessExecutor

    return ProcessExecutor(registry, jobs=jobs, **options)


@hookimpl
def register_executors(register):
    register(ExecutorSpec("local", _local, "Run trials one by one in this process."))
    register(ExecutorSpec(
        "process", _process,
        "Run trials on -j/--jobs spawned worker processes, one torch thread each (default).",
    ))
