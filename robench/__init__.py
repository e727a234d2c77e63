"""robench: how robust is a classifier to shift inside its own data set."""

import pluggy

__version__ = "0.1.0"

#: Decorator that marks a function as an implementation of a robench hook.
hookimpl = pluggy.HookimplMarker("robench")

__all__ = ["hookimpl", "__version__"]
