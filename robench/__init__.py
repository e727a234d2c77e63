"""robench: how robust is a classifier to shift inside its own data set."""

import importlib
import importlib.abc
import importlib.util
import sys

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


#: Where the modules of robench 0.1's flat layout live now (docs/architecture.md). Plugins
#: written against the old paths (``robench.train.TorchClassifier``, ``robench.trials.make_spec``,
#: ...) keep working: ``import robench.train`` returns the very module ``robench.learn.train``.
_ROOMS = {
    "run": "adaptive config configurations executors guard liveness runner scoring trials",
    "storage": "merge metadata migrations provenance readonly store",
    "data": "cache corruptions model_references references sklearn_splitters sources splitters",
    "learn": "boundary devices features multicut train",
    "stats": "bits claims intervals seeds sequential",
    "present": "docgen formatting leaderboard plots site skips",
}
MOVED = {name: f"{room}.{name}" for room, names in _ROOMS.items() for name in names.split()}
MOVED["reference"] = "learn.reference_model"  # renamed too: "reference" meant three things


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import ``robench.<old name>`` as the very module object of its new home, so attributes,
    ``isinstance`` checks and monkeypatching all see one module."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, rest = fullname.partition(".")
        if head != "robench" or rest not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module("robench." + MOVED[spec.name.partition(".")[2]])
        spec.loader_state = module.__spec__  # the import system overwrites __spec__: restore it
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # already executed under its new name


sys.meta_path.insert(0, _MovedModules())  # before any editable-install finder
