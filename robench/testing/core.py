"""What every kind of check shares: the error, the report, named checks and their runner.

A kind's module builds one :class:`Case` per component (expensive results computed once, on
first use) and one :class:`Check` per rule; :func:`run_checks` runs them (docs/plugin-hooks.md).
"""

from __future__ import annotations

import contextlib
import unittest
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional

from robench.specs import check_slug
from robench.plugins import get_registry


class ConformanceError(AssertionError):
    """A component breaks robench's plugin contract.

    Attributes
    ----------
    component : str
        Which component, e.g. ``"model 'my-model' (plugin robench_my_model)"``.
    check : str
        The rule it broke (a check's name or a finer rule inside it, e.g. ``spec-version``);
        for several failures (``collect_all=True``) the rules, comma-separated.
    problem : str
        What was wrong.
    fix : str
        How to fix it ("" when the problem says it all).
    failures : list of ConformanceError
        Every failure this error stands for (itself alone without ``collect_all``).
    report : CheckReport or None
        What the run of checks that raised it found (set by :func:`run_checks`).
    """

    def __init__(self, component: str, check: str, problem: str, fix: str = ""):
        self.component, self.check, self.problem, self.fix = component, check, problem, fix
        self.failures = [self]
        self.report = None
        message = f"{component} fails check '{check}': {problem}"
        if fix:
            message += f"\nHow to fix: {fix}"
        super().__init__(message)

    @classmethod
    def of_many(cls, component: str, failures: list) -> "ConformanceError":
        """Return one error listing several failures of ``component`` (each with its fix)."""
        if len(failures) == 1:
            return failures[0]
        lines = [line for f in failures for line in
                 [f"- '{f.check}': {f.problem}"] + ([f"  How to fix: {f.fix}"] if f.fix else [])]
        err = cls(component, ", ".join(f.check for f in failures),
                  f"{len(failures)} checks failed")
        err.failures = list(failures)
        err.args = (f"{component} fails {len(failures)} checks:\n" + "\n".join(lines),)
        return err


class CheckSkipped(unittest.SkipTest):
    """A check does not apply to this component (a ``unittest.SkipTest``); the message says why."""


class Unavailable(CheckSkipped):
    """A check needs what an earlier check could not produce (``'fit' failed``)."""

    def __init__(self, prerequisite: str):
        self.prerequisite = prerequisite
        super().__init__(f"'{prerequisite}' failed")


def skip(why: str):
    """End the running check as not applicable, saying why (never skipped silently)."""
    raise CheckSkipped(why)


@dataclass
class CheckReport:
    """What a ``check_*`` function verified about one component.

    Attributes
    ----------
    component : str
        The component checked.
    passed : list of str
        The checks it passed, in the order they ran.
    skipped : dict
        Checks that do not apply, or whose prerequisite failed, each with the reason.
    failed : dict
        ``{check: ConformanceError}`` for every check that failed (expected failures that
        passed included).
    xfailed : dict
        ``{check: reason}`` for the checks that failed as ``expected_failures`` said.
    """

    component: str
    passed: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    xfailed: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.component}: {len(self.passed)} checks passed"]
        lines += [f"  FAILED {name}: {err.problem}" for name, err in self.failed.items()]
        lines += [f"  expected failure {name}: {why}" for name, why in self.xfailed.items()]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


class Case:
    """One component under check: the spec, its options and the :func:`shared` results.

    ``current`` is the check now running (set by :class:`Check`).
    """

    def __init__(self, kind: str, spec):
        plugin = getattr(spec, "plugin", "")
        self.spec, self.kind, self.name = spec, kind, getattr(spec, "name", repr(spec))
        self.component = f"{kind} '{self.name}'" + (f" (plugin {plugin})" if plugin else "")
        self.current: Optional[str] = None
        self.outcomes: dict = {}  # shared attribute -> (value, error)

    def fail(self, check: str, problem: str, fix: str = ""):
        """Raise the ConformanceError of rule ``check``."""
        raise ConformanceError(self.component, check, problem, fix)

    @contextlib.contextmanager
    def calling(self, check: str, what: str, fix: str = ""):
        """Turn an exception raised by the component's code into a ConformanceError."""
        try:
            yield
        except (ConformanceError, unittest.SkipTest):
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the plugin raised is the finding
            raise ConformanceError(self.component, check,
                                   f"{what} raised {type(exc).__name__}: {exc}", fix) from exc


class shared:
    """Make a :class:`Case` method an attribute computed once, on first use, for every check.

    Its failure is reported by ``owner`` (else the check that first read it); every other
    reader is skipped as :class:`Unavailable`.
    """

    def __init__(self, owner: Optional[str] = None):
        self.owner = owner

    def __call__(self, compute: Callable):
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__
        return self

    def __get__(self, case, owner_type=None):
        if case is None:
            return self
        if self.name not in case.outcomes:
            try:
                case.outcomes[self.name] = (self.compute(case), None, self.owner or case.current)
            except Exception as exc:  # noqa: BLE001 - kept, and reported by its owner
                case.outcomes[self.name] = (None, exc, self.owner or case.current)
        value, error, owner = case.outcomes[self.name]
        if error is None:
            return value
        if owner == case.current or isinstance(error, unittest.SkipTest):
            raise error
        raise Unavailable(owner)


@dataclass(frozen=True)
class Check:
    """One named rule for one component; call it to run it.

    Returns None when the component follows the rule, raises :class:`ConformanceError` when it
    does not (any other exception becomes one) and :class:`CheckSkipped` when it does not apply.

    Attributes
    ----------
    name : str
        The rule, e.g. ``"predict-dtype"``: the key of ``expected_failures``.
    kind : str
        ``"model"``, ``"dataset"``, ``"clusterer"`` or ``"metric"``.
    component : str
        The component's registered name.
    function : callable
        ``function(case)`` tests the rule on the shared :class:`Case`.
    case : Case
        The component's shared work, the same object for all its checks.
    """

    name: str
    kind: str
    component: str
    function: Callable
    case: Case = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        """The test id ``parametrize_with_checks`` gives it: ``model[my-model]-predict-dtype``."""
        return f"{self.kind}[{self.component}]-{self.name}"

    def __call__(self) -> None:
        case = self.case
        case.current = self.name
        try:
            with case.calling(self.name, "the check"):  # an error the check met is the finding
                self.function(case)
        finally:
            case.current = None


def make_checks(case: Case, kind: str, rules: Iterable[tuple]) -> list:
    """Return a :class:`Check` for every ``(name, function)`` of ``rules``, over ``case``."""
    return [Check(name, kind, case.name, function, case) for name, function in rules]


def unknown_expected(expected: Mapping, names: Iterable[str], what: str) -> None:
    """Raise ValueError if ``expected`` names a check ``names`` lacks (a typo hides nothing)."""
    unknown = sorted(set(expected) - set(names))
    if unknown:
        raise ValueError(f"expected_failures names {', '.join(map(repr, unknown))}, not a check "
                         f"of {what}; its checks: {', '.join(names)}")


def run_checks(checks: Iterable[Check], *, expected_failures: Optional[Mapping] = None,
               collect_all: bool = False) -> CheckReport:
    """Run ``checks`` (of one component) in order and return what they found.

    ``expected_failures`` (``{check name: reason}``): known gaps, recorded as ``xfailed``; one
    that passes is a failure, an unknown name a ValueError. ``collect_all``: run every check,
    then raise one :class:`ConformanceError` holding each (default: raise the first).
    """
    checks = list(checks)
    expected = dict(expected_failures or {})
    component = checks[0].case.component if checks else "?"
    if checks:
        unknown_expected(expected, [c.name for c in checks], component)
    report = CheckReport(component)
    for check in checks:
        try:
            check()
        except unittest.SkipTest as why:
            report.skipped[check.name] = str(why)
            continue
        except ConformanceError as err:
            if check.name in expected:
                report.xfailed[check.name] = expected[check.name]
                continue
            failure = err
        else:
            if check.name not in expected:
                report.passed.append(check.name)
                continue
            failure = ConformanceError(
                component, check.name, f"it is listed in expected_failures "
                f"({expected[check.name]!r}) but passed",
                f"remove {check.name!r} from expected_failures")
        report.failed[check.name] = failure
        if not collect_all:
            failure.report = report
            raise failure
    if report.failed:
        error = ConformanceError.of_many(component, list(report.failed.values()))
        error.report = report
        raise error
    return report


def check_spec_fields(case: Case, callables: tuple, flags: tuple) -> None:
    """Check the fields every spec has: slug name, description, version, callables, flags."""
    spec = case.spec
    try:
        # a spec resolved from a reference (SCHEME:TARGET) is named by it; its scheme is a slug
        check_slug(spec.name.split(":", 1)[0])
    except ValueError as exc:
        case.fail("spec-name", str(exc), "use lowercase letters, digits and '-'")
    if not isinstance(spec.description, str) or not spec.description.strip():
        case.fail("spec-description", f"description is {spec.description!r}",
                  "give a one-line description: `robench list` prints it")
    if not isinstance(spec.version, str) or not spec.version:
        case.fail("spec-version", f"version is {spec.version!r}",
                  'use a non-empty string such as "1"; it is part of every trial key')
    for name in callables:
        if not callable(getattr(spec, name)):
            case.fail("spec-callables", f"{name} is {getattr(spec, name)!r}, not callable",
                      f"pass the function itself as {name}=...")
    for name in flags:
        if not isinstance(getattr(spec, name), bool):
            case.fail("spec-flags", f"{name} is {getattr(spec, name)!r}, not a bool",
                      f"set {name}=True or {name}=False")


def resolve(kind: str, spec_cls, component, registry) -> tuple:
    """Return (spec, registry) for a spec or a registered name of ``kind`` (None: process-wide)."""
    if isinstance(component, str):
        registry = registry if registry is not None else default_registry()
        return registry.get(kind, component), registry
    if not isinstance(component, spec_cls):
        raise ConformanceError(
            f"{kind[:-1]} {component!r}", "spec",
            f"expected a {spec_cls.__name__} or the name of a registered {kind[:-1]}, got "
            f"{type(component).__name__}",
            f"register a robench.specs.{spec_cls.__name__}(...) and pass it or its name")
    return component, registry


def default_registry():
    """Return the process-wide registry (installed plugins)."""
    return get_registry()


def plain(value):
    """Return ``value`` with numpy scalars and arrays made plain Python, for json."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value
