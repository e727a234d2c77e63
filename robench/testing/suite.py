"""Every kind at once: the checks of any component (:func:`checks_of`), of a whole registry
(:func:`check_all`), and as pytest tests, one per check (:func:`parametrize_with_checks`)."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional, Union

from robench.specs import ClustererSpec, DatasetSpec, MetricSpec, ModelSpec
from robench.testing.clusterers import check_clusterer, clusterer_checks
from robench.testing.core import default_registry, unknown_expected
from robench.testing.datasets import check_dataset, dataset_checks
from robench.testing.metrics import check_metric, metric_checks
from robench.testing.models import check_model, model_checks

#: Registry kind -> (spec class, check generator, check function).
KINDS = {
    "datasets": (DatasetSpec, dataset_checks, check_dataset),
    "models": (ModelSpec, model_checks, check_model),
    "clusterers": (ClustererSpec, clusterer_checks, check_clusterer),
    "metrics": (MetricSpec, metric_checks, check_metric),
}


def checks_of(component, registry=None, **options):
    """Yield the checks of one component of any kind.

    Parameters
    ----------
    component : spec, (kind, name) or str
        A ``ModelSpec``/``DatasetSpec``/``ClustererSpec``/``MetricSpec``; a
        ``("models", "my-model")`` pair; or a name registered in exactly one kind of
        ``registry``.
    registry : robench.plugins.Registry, optional
        Default: the process-wide registry.
    **options
        Passed to the kind's generator (``train=...`` for a model, ``settings=...`` for a
        metric).
    """
    for kind, (spec_cls, generate, _) in KINDS.items():
        if isinstance(component, spec_cls):
            return generate(component, registry, **options)
    if isinstance(component, tuple):
        kind, name = component
        return KINDS[kind][1](name, registry, **options)
    if not isinstance(component, str):
        raise TypeError(f"expected a spec, a (kind, name) pair or a name, got "
                        f"{type(component).__name__}")
    registry = registry if registry is not None else default_registry()
    kinds = [kind for kind in KINDS if component in registry.names(kind)]
    if len(kinds) != 1:
        where = f"is a registered {' and a '.join(k[:-1] for k in kinds)}" if kinds else \
            "is not registered as a data set, model, clusterer or metric"
        raise ValueError(f"{component!r} {where}: pass a spec or a (kind, name) pair, e.g. "
                         f"('models', {component!r})")
    return KINDS[kinds[0]][1](component, registry, **options)


def check_all(registry=None, *, plugin: Optional[str] = None,
              kinds: tuple = ("datasets", "models", "clusterers", "metrics"),
              collect_all: bool = False) -> dict:
    """Run every check on every component of ``registry`` (or of one plugin) with defaults.

    Parameters
    ----------
    registry : robench.plugins.Registry, optional
        Default: the process-wide registry.
    plugin : str, optional
        Only the components this plugin registered (its name in ``robench plugins``, or its
        module path when loaded with ``make_registry(modules=[...])``).
    kinds : tuple of str
        Which kinds to check. Metrics run a real run each: slow metrics are better checked
        one by one with :func:`check_metric` and small ``settings``.
    collect_all : bool
        Passed to every ``check_*``: each component's error lists all its failures.

    Returns
    -------
    dict
        ``{(kind, name): CheckReport}``; the first failing component raises
        :class:`ConformanceError`.
    """
    registry = registry if registry is not None else default_registry()
    return {(kind, spec.name): KINDS[kind][2](spec.name, registry, collect_all=collect_all)
            for kind in kinds for spec in registry.all(kind)
            if plugin is None or spec.plugin == plugin}


def parametrize_with_checks(components: Iterable, registry=None,
                            expected_failures: Union[None, Mapping[str, str], Callable] = None,
                            **options):
    """Return a pytest decorator making every check of every component its own test.

    Each test's id is ``Check.id`` (``model[my-model]-predict-dtype``); expected failures are
    marked ``xfail(strict=True)``; usage in docs/plugin-hooks.md.

    Parameters
    ----------
    components : iterable
        Specs, ``(kind, name)`` pairs or registered names (see :func:`checks_of`).
    registry : robench.plugins.Registry, optional
        Where names are looked up (default: the process-wide registry), at collection.
    expected_failures : dict or callable, optional
        ``{check name: reason}`` for every component, or ``f(check) -> {name: reason}``; a
        check name no component has raises ValueError.
    **options
        Passed to every component's check generator.
    """
    import pytest

    checks = [check for component in components
              for check in checks_of(component, registry, **options)]
    if callable(expected_failures):
        xfail = {id(c): (expected_failures(c) or {}).get(c.name) for c in checks}
    else:
        expected = dict(expected_failures or {})
        unknown_expected(expected, list(dict.fromkeys(c.name for c in checks)),
                         "these components")
        xfail = {id(c): expected.get(c.name) for c in checks}
    params = [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=xfail[id(c)],
                                                                strict=True)]
                           if xfail[id(c)] is not None else [])
              for c in checks]
    return pytest.mark.parametrize("check", params)
