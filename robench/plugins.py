"""The plugin manager: built-in plugins, guarded entry-point loading, the component registry."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Optional

import pluggy

import robench
from robench import hookspecs
from robench.data import Dataset, DatasetError
from robench.data.model_references import resolve_model
from robench.data.references import remembered, resolve
from robench.errors import PluginError, UnknownComponentError  # noqa: F401 (public here too)
from robench.plugin_probe import describe, plugin_timeout, shown
from robench.plugin_probe import verdicts as probe
from robench.process.guard import (TrialTimeout, sigint_watched, time_limit, unwatch_sigint,
                                   user_interrupted, watch_sigint)
from robench.specs import KINDS, ModelResolverSpec

#: Built-in plugins, registered through the same manager as third-party ones.
DEFAULT_PLUGINS = (
    "robench.builtin.datasets",
    "robench.builtin.references",
    "robench.builtin.torchvision_data",
    "robench.builtin.models",
    "robench.builtin.timm_models",
    "robench.builtin.clusterers",
    "robench.builtin.executors",
    "robench.builtin.corruptions",
    "robench.families.source_aware",
    "robench.families.purity_ratio",
    "robench.families.shifted_cv",
    "robench.families.coverage",
)

ENTRY_POINT_GROUP = "robench"


class _Refused(PluginError):
    """A registration robench refuses (wrong type, a reference-like or taken name): said as is."""


@dataclass
class PluginInfo:
    """What ``robench plugins`` shows about one plugin."""

    name: str
    version: str = ""
    status: str = "ok"  # ok | failed
    error: str = ""
    source: str = "builtin"  # builtin | entry point | test
    components: dict = field(default_factory=dict)  # kind -> [names]
    distribution: str = ""  # what pip installs it as (an entry point's distribution)


def _called_from_test() -> bool:
    # Set by tests/conftest.py so that tests never pick up installed third-party plugins.
    return bool(getattr(sys, "_robench_called_from_test", False))


def _dist(dist, attr: str) -> str:
    try:
        return str(getattr(dist, attr) or "") if dist is not None else ""
    except Exception:  # pragma: no cover - broken metadata must not stop start-up
        return ""


def make_plugin_manager(load_entrypoints: Optional[bool] = None, builtins: bool = True,
                        verdicts: Optional[dict] = None):
    """Return a fresh plugin manager and the info of every plugin it tried to load.

    Installed plugins are first probed in a child process (:mod:`robench.plugin_probe`;
    ``verdicts`` when the caller has them); the rest load inside a guard that disables only the
    plugin that raises or runs past ``$ROBENCH_PLUGIN_TIMEOUT`` (docs/guarantees.md).
    """
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    infos: dict = {}
    if builtins:
        for modname in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(modname), name=modname)
            infos[modname] = PluginInfo(modname, robench.__version__, source="builtin")
    if load_entrypoints is None:
        load_entrypoints = not _called_from_test()
    if load_entrypoints:
        _load_entrypoints(pm, infos, verdicts)
    check_hooks(pm)
    return pm, infos


def _load_entrypoints(pm, infos: dict, verdicts: Optional[dict]) -> None:
    try:
        eps = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001 - broken installed metadata must not stop start-up
        return
    eps = list({ep.name: ep for ep in reversed(eps)}.values())[::-1]  # first of each name
    if verdicts is None:
        verdicts = probe(eps) if eps else {}
    pm.robench_verdicts = verdicts  # make_registry keeps them in its recipe
    for ep in eps:
        name, dist = ep.name, getattr(ep, "dist", None)
        found = {"version": _dist(dist, "version"), "source": "entry point",
                 "distribution": _dist(dist, "name")}
        if verdicts.get(name):
            infos[name] = PluginInfo(name, status="failed", error=verdicts[name], **found)
            continue
        try:
            # pluggy's own load_setuptools_entrypoints does not guard ep.load(): one
            # broken plugin would stop start-up, so load each one inside a guard.
            with plugin_code(f"plugin '{name}' at import", plugin_timeout()):
                plugin = ep.load()
            if pm.is_registered(plugin) or pm.get_plugin(name) is not None:
                continue
            pm.register(plugin, name=name)
            check_hooks(pm)  # a misspelt hook disables only this plugin (unregistered below)
            infos[name] = PluginInfo(name, **found)
        except BaseException as exc:  # noqa: BLE001 - the plugin's, even an exit
            if isinstance(exc, KeyboardInterrupt) and not getattr(exc, "plugins_own", False):
                raise
            if pm.get_plugin(name) is not None:
                pm.unregister(name=name)
            infos[name] = PluginInfo(name, status="failed", error=describe(exc), **found)


class PluginTimeout(BaseException):
    """Plugin code (an import or a hook) ran past its time limit."""


@contextmanager
def plugin_code(what: str, seconds: Optional[float]):
    """Run a plugin's import or hook: mark its own KeyboardInterrupt, time it out (main thread)."""
    previous = signal.getsignal(signal.SIGINT)
    watching = not sigint_watched() and previous is not None and watch_sigint()
    try:
        with time_limit(seconds, what, "ROBENCH_PLUGIN_TIMEOUT"):
            yield
    except TrialTimeout as exc:
        raise PluginTimeout(str(exc)) from None
    except KeyboardInterrupt as exc:
        if sigint_watched() and not user_interrupted():
            exc.plugins_own = True
        raise
    finally:
        if watching:
            unwatch_sigint(previous)


def check_hooks(pm) -> None:
    """Raise PluginError if a registered plugin implements a hook robench does not define."""
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        known = sorted(n for n, f in vars(hookspecs).items() if hasattr(f, "robench_spec"))
        raise PluginError(
            f"plugin '{pm.get_name(exc.plugin)}' implements a hook robench does not define "
            f"(misspelt?): {exc}. Known hooks: {', '.join(known)}"
        ) from exc


class Registry:
    """Every component registered by the plugins of one manager, by kind and name."""

    def __init__(self, pm: pluggy.PluginManager, infos: Optional[dict] = None):
        self.pm = pm
        self.recipe: Optional[dict] = None  # set by make_registry; None = not rebuildable
        self.infos = dict(infos or {})
        self._by_kind: dict = {kind: {} for kind in KINDS}
        for kind, (hookname, spec_cls) in KINDS.items():
            for impl in getattr(pm.hook, hookname).get_hookimpls():
                self._collect(kind, spec_cls, impl)
        # A plugin whose hook raised is disabled whole: drop what it registered before failing.
        failed = {n for n, i in self.infos.items() if i.status != "ok"}
        self._by_kind = {kind: {n: spec for n, spec in table.items() if spec.plugin not in failed}
                         for kind, table in self._by_kind.items()}
        for name in failed:
            self.infos[name].components = {}
        self._datasets: dict = {}
        self._dataset_errors: dict = {}  # name -> DatasetError: a data set fails to load once
        self._resolved: dict = {}  # reference as given or canonical -> its DatasetSpec
        self._resolved_models: dict = {}  # likewise for model references -> ModelSpec

    def _collect(self, kind, spec_cls, impl):
        plugin_name = impl.plugin_name
        info = self.infos.setdefault(plugin_name, PluginInfo(plugin_name, source="test"))
        table = self._by_kind[kind]

        def register(spec):
            if not isinstance(spec, spec_cls):
                raise _Refused(
                    f"plugin '{plugin_name}' registered {shown(spec)} with {KINDS[kind][0]}; "
                    f"expected a {spec_cls.__name__}")
            if kind in ("datasets", "models") and ":" in spec.name:
                what, scheme = ("data set", "dataset") if kind == "datasets" else ("model",) * 2
                raise _Refused(
                    f"plugin '{plugin_name}' registered {what} '{spec.name}': a registered "
                    f"name is a slug; SCHEME:TARGET references come from {scheme} resolvers "
                    f"(register_{scheme}_resolvers)")
            if kind == "resolvers" and isinstance(spec, ModelResolverSpec):
                raise _Refused(
                    f"plugin '{plugin_name}' registered model resolver '{spec.name}' with "
                    "register_dataset_resolvers; register it with register_model_resolvers")
            if spec.name in table:
                raise _Refused(
                    f"duplicate {kind[:-1]} name '{spec.name}': already registered by plugin "
                    f"'{table[spec.name].plugin}'; plugin '{plugin_name}' is disabled. Rename "
                    f"its {kind[:-1]}.")
            table[spec.name] = replace(spec, plugin=plugin_name)
            info.components.setdefault(kind, []).append(spec.name)

        hook = KINDS[kind][0]
        try:
            with plugin_code(f"plugin '{plugin_name}' in {hook}", plugin_timeout()):
                impl.function(register=register)
        except BaseException as exc:  # noqa: BLE001 - disables that plugin only
            if isinstance(exc, KeyboardInterrupt) and not getattr(exc, "plugins_own", False):
                raise
            # a duplicate (the later registration loses) or a wrong registration says so
            # itself; anything else the hook raised (a PluginError included) is described
            info.status = "failed"
            info.error = (str(exc) if type(exc) is _Refused
                          else f"{hook} raised {describe(exc)}")

    def names(self, kind: str) -> list:
        """Return the registered names of one kind, sorted."""
        return sorted(self._by_kind[kind])

    def all(self, kind: str) -> list:
        """Return the specs of one kind, sorted by name."""
        return [self._by_kind[kind][n] for n in self.names(kind)]

    def get(self, kind: str, name: str):
        """Return the spec called ``name`` or raise UnknownComponentError listing known names."""
        try:
            return self._by_kind[kind][name]
        except KeyError:
            if kind in ("datasets", "models") and isinstance(name, str) and ":" in name:
                return (self.resolve_dataset if kind == "datasets" else self.resolve_model)(name)
            raise UnknownComponentError(kind, name, list(self._by_kind[kind])) from None

    def resolve_dataset(self, reference: str):
        """Return the DatasetSpec of a ``SCHEME:TARGET?KEY=VALUE`` reference, resolved once.

        Named by its stable name (path data) or canonical reference, so a worker resolves it too.
        """
        if reference not in self._resolved:
            sent = (self.recipe or {}).get("references", {}).get(reference)
            spec = resolve(self, sent if sent is not None else reference)
            if sent is not None and spec.name != reference:
                raise DatasetError(f"data set '{reference}' was read from {sent}, which here "
                                   f"holds other data ('{spec.name}')")
            self._resolved[reference] = self._resolved.setdefault(spec.name, spec)
            located = remembered(spec.name)
            if located is not None and spec.name != reference and self.recipe is not None:
                # a worker of another machine (Dask) resolves the stable name it is sent
                # from the recipe, where this machine's cache is not
                self.recipe.setdefault("references", {})[spec.name] = located
        return self._resolved[reference]

    def add(self, kind: str, spec) -> None:
        """Add a component made at run time (robench.evaluate's in-memory models and data).

        Another plugin's name is a PluginError; the same plugin's earlier one is replaced.
        """
        existing = self._by_kind[kind].get(spec.name)
        if existing is not None and existing.plugin != spec.plugin:
            raise PluginError(f"{kind[:-1]} name '{spec.name}' is already registered by plugin "
                              f"'{existing.plugin}'; choose another name")
        self._by_kind[kind][spec.name] = spec
        self._datasets.pop(spec.name, None)

    def resolve_model(self, reference: str):
        """Return the ModelSpec of a ``SCHEME:TARGET?KEY=VALUE`` reference, resolved once."""
        if reference not in self._resolved_models:
            spec = resolve_model(self, reference)
            self._resolved_models[reference] = self._resolved_models.setdefault(spec.name, spec)
        return self._resolved_models[reference]

    def load_dataset(self, name: str):
        """Return the loaded data set ``name``, loading it once per registry.

        A ``load()`` that raises (anything) or returns no Dataset is a DatasetError naming it, and
        is not tried again; a TrialTimeout or Ctrl-C is raised as it is and not remembered.
        """
        if name in self._dataset_errors:
            raise self._dataset_errors[name]
        if name not in self._datasets:
            spec = self.get("datasets", name)
            try:
                loaded = spec.load()
            except (KeyboardInterrupt, TrialTimeout):
                # the trial's time limit ended the load, not the data set: that trial fails,
                # and the next trial of this worker loads it again (never memoised)
                raise
            except DatasetError as exc:
                error = DatasetError(str(exc) if f"'{name}'" in str(exc)
                                     else f"data set '{name}': {exc}")
            except BaseException as exc:  # noqa: BLE001 - a plugin's failure, SystemExit too
                error = DatasetError(f"data set '{name}' failed to load: "
                                     f"{type(exc).__name__}: {exc}")
            else:
                if isinstance(loaded, Dataset):
                    self._datasets[name] = loaded
                    return loaded
                error = DatasetError(f"data set '{name}': load() returned a "
                                     f"{type(loaded).__name__}, expected a robench.data.Dataset")
            self._dataset_errors[name] = error
            raise error
        return self._datasets[name]

    def dataset_fingerprint(self, name: str) -> str:
        """Return the content fingerprint of ``name``: loaded data's, the spec's, or by loading."""
        if name in self._datasets:
            return self._datasets[name].fingerprint()
        spec = self.get("datasets", name)
        if spec.fingerprint is not None:
            return spec.fingerprint()
        return self.load_dataset(name).fingerprint()

    def dataset_versions(self, name: str) -> dict:
        """Return ``dataset`` (plugin/component version) and ``dataset_content`` of ``name``."""
        return {"dataset": self.component_version("datasets", name),
                "dataset_content": self.dataset_fingerprint(name)}

    def plugin_versions(self) -> dict:
        """Return {plugin name: version} for every plugin that loaded."""
        return {n: i.version for n, i in sorted(self.infos.items()) if i.status == "ok"}

    def plugin_distributions(self) -> dict:
        """Return {plugin name: distribution} for every loaded plugin an installed
        distribution provides (an entry point's): what a board must install to load it."""
        return {n: i.distribution for n, i in sorted(self.infos.items())
                if i.status == "ok" and i.distribution}

    def component_version(self, kind: str, name: str) -> str:
        """Return 'plugin-version/component-version' for cache and trial keys."""
        spec = self.get(kind, name)
        info = self.infos.get(spec.plugin)
        return f"{info.version if info else ''}/{spec.version}"


def make_registry(modules=(), load_entrypoints: Optional[bool] = None, builtins: bool = True,
                  verdicts: Optional[dict] = None,
                  references: Optional[dict] = None) -> Registry:
    """Build a registry from built-ins, entry points and extra plugin modules named by import path.

    The arguments are kept as ``registry.recipe`` (with the probe's ``verdicts`` and the stable
    names' ``references``) so a worker rebuilds the same registry from plain data.
    """
    pm, infos = make_plugin_manager(load_entrypoints=load_entrypoints, builtins=builtins,
                                    verdicts=verdicts)
    verdicts = getattr(pm, "robench_verdicts", verdicts)
    for modname in modules:
        module = importlib.import_module(modname)
        if pm.is_registered(module):  # already loaded as an installed entry point
            continue
        pm.register(module, name=modname)
        infos[modname] = PluginInfo(modname, getattr(sys.modules[modname], "__version__", ""),
                                    source="module")
    check_hooks(pm)
    registry = Registry(pm, infos)
    registry.recipe = {
        "modules": list(modules),
        "load_entrypoints": load_entrypoints if load_entrypoints is not None else not _called_from_test(),
        "builtins": builtins,  # references: {a file data set's stable name: where it was read}
        **{k: dict(v) for k, v in (("verdicts", verdicts), ("references", references)) if v},
    }
    return registry


def probe_child(names: list) -> int:
    """The probe's child process (robench.plugin_probe): load each named entry point on a
    fresh manager, call its hooks, report each one's fate on the probe's file descriptor."""
    out = os.fdopen(int(os.environ.pop("ROBENCH_PROBE_FD")), "w", buffering=1,
                    encoding="utf-8")
    watch_sigint()
    real_exit = os._exit

    def report(*event):
        out.write(json.dumps(list(event)) + "\n")
        out.flush()

    by_name = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        by_name.setdefault(ep.name, ep)
    for name in names:
        report("start", name, None)
        try:
            reason = _probe_one(by_name[name]) if name in by_name else None
        except KeyboardInterrupt:
            if user_interrupted():
                report("interrupted", name, None)
                real_exit(130)
            reason = "KeyboardInterrupt raised at import (no Ctrl-C was pressed)"
        report("ok" if reason is None else "failed", name, reason)
    return 0


def _probe_one(ep) -> Optional[str]:
    """Return why entry point ``ep`` cannot be used, or None (KeyboardInterrupt propagates)."""
    try:
        plugin = ep.load()
        pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
        pm.add_hookspecs(hookspecs)
        pm.register(plugin, name=ep.name)
        check_hooks(pm)
        registry = Registry(pm, {ep.name: PluginInfo(ep.name, source="entry point")})
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit, GeneratorExit: the plugin's
        return f"at import: {describe(exc)}"
    info = registry.infos[ep.name]
    return None if info.status == "ok" else info.error


_REGISTRY: Optional[Registry] = None


def get_registry() -> Registry:
    """Return the process-wide registry, building it (and loading plugins) on first use."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = make_registry()
    return _REGISTRY


def set_registry(registry: Optional[Registry]) -> None:
    """Replace the process-wide registry (None: build it again on next use); for test suites."""
    global _REGISTRY
    _REGISTRY = registry
