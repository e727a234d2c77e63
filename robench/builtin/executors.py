"""Built-in executors."""

from __future__ import annotations

from robench import hookimpl
from robench.specs import ExecutorSpec
from robench.run.executors import DaskExecutor, LocalExecutor, ProcessExecutor


@hookimpl
def register_executors(register):
    register(ExecutorSpec("local", LocalExecutor, "Run trials one by one in this process."))
    register(ExecutorSpec(
        "process", ProcessExecutor,
        "Run trials on -j/--jobs spawned worker processes, one torch thread each (default).",
    ))
    register(ExecutorSpec(
        "dask", DaskExecutor,
        "Run trials on a Dask cluster (--scheduler ADDRESS), or on a local one bound to "
        "127.0.0.1 with -j/--jobs workers.",
    ))
