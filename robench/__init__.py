"""robench: how robust is a classifier to shift inside its own data set."""

import pluggy

__version__ = "0.1.0"

#: Decorator that marks a function as an implementation of a robench hook.
hookimpl = pluggy.HookimplMarker("robench")

__all__ = ["hookimpl", "__version__", "evaluate"]


def __getattr__(name):
    # robench.evaluate is imported on first use: `import robench` stays cheap (CLI start-up)
    if name == "evaluate":
        from robench.api import evaluate

        return evaluate
    raise AttributeError(f"module 'robench' has no attribute {name!r}")
