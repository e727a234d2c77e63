"""What every kind of check shares: the error, the report, a named check, the shared work of
one component (a :class:`Case`) and the runner that turns checks into a report.

A kind's module (``models``, ``datasets``, ``clusterers``, ``metrics``) builds one
:class:`Case` per component, whose expensive results (a training, a tiny run) are computed
on first use and shared by the checks that read them, and yields one :class:`Check` per
rule. :func:`run_checks` runs them in order: by default it raises at the first failure,
with ``collect_all`` it runs every check and raises one error listing every failure.
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
        The rule it broke, e.g. ``"predict-dtype"``: the name of the check that failed, or a
        finer rule inside it (the check ``spec`` fails with ``spec-version``, the check
        ``scores`` with ``score-ci``). For several failures (``collect_all=True``) the
        rules, comma-separated.
    problem : str
        What was wrong.
    fix : str
        How to fix it ("" when the problem says it all).
    failures : list of ConformanceError
        Every failure this error stands for: itself alone, or with ``collect_all=True``
        every check that failed, in the order they ran.
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
        lines = []
        for f in failures:
            lines.append(f"- '{f.check}': {f.problem}")
            if f.fix:
                lines.append(f"  How to fix: {f.fix}")
        err = cls(component, ", ".join(f.check for f in failures),
                  f"{len(failures)} checks failed")
        err.failures = list(failures)
        err.args = (f"{component} fails {len(failures)} checks:\n" + "\n".join(lines),)
        return err


class CheckSkipped(unittest.SkipTest):
    """A check does not apply to this component; the message says why.

    A ``unittest.SkipTest``, so a check called inside a pytest test is reported as skipped.
    """


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
        Checks that do not apply to it, or whose prerequisite failed, each with the reason
        (never skipped silently).
    failed : dict
        ``{check: ConformanceError}`` for every check that failed (with ``collect_all``:
        all of them; else the one that raised), including expected failures that passed.
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
    """One component under check: what its checks share, computed once, on first use.

    A kind's case holds the spec and the options; attributes made with :func:`shared` are
    computed when a check first reads them (a training, a tiny run) and kept, value or
    failure. ``current`` is the check now running (set by :class:`Check`).
    """

    def __init__(self, kind: str, spec):
        plugin = getattr(spec, "plugin", "")
        name = getattr(spec, "name", repr(spec))
        self.spec = spec
        self.kind = kind
        self.name = name
        self.component = f"{kind} '{name}'" + (f" (plugin {plugin})" if plugin else "")
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

    ``owner`` is the check whose rule the computation tests: it reports a failure of the
    computation as its own; every other check that reads the attribute is skipped with
    ``'owner' failed`` (:class:`Unavailable`). A computation without an owner belongs to the
    check that first read it.
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

    Calling returns None when the component follows the rule, raises
    :class:`ConformanceError` when it does not (any other exception the check meets is
    turned into one), and :class:`CheckSkipped` (a ``unittest.SkipTest``) when the rule does
    not apply or its prerequisite failed.

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
            self.function(case)
        except (ConformanceError, unittest.SkipTest):
            raise
        except Exception as exc:  # noqa: BLE001 - the check met an error: it is the finding
            raise ConformanceError(case.component, self.name,
                                   f"the check raised {type(exc).__name__}: {exc}") from exc
        finally:
            case.current = None


def make_checks(case: Case, kind: str, rules: Iterable[tuple]) -> list:
    """Return a :class:`Check` for every ``(name, function)`` of ``rules``, over ``case``."""
    return [Check(name, kind, case.name, function, case) for name, function in rules]


def unknown_expected(expected: Mapping, names: Iterable[str], what: str) -> None:
    """Raise ValueError if ``expected`` names a check that ``names`` lacks (a typo hides
    nothing)."""
    unknown = sorted(set(expected) - set(names))
    if unknown:
        raise ValueError(f"expected_failures names {', '.join(map(repr, unknown))}, not a check "
                         f"of {what}; its checks: {', '.join(names)}")


def run_checks(checks: Iterable[Check], *, expected_failures: Optional[Mapping] = None,
               collect_all: bool = False) -> CheckReport:
    """Run ``checks`` (of one component) in order and return what they found.

    ``expected_failures`` (``{check name: reason}``): known gaps, recorded in
    ``CheckReport.xfailed`` when they fail; one that passes is a failure, a name that is not a
    check a ValueError. ``collect_all``: run every check, then raise one
    :class:`ConformanceError` whose ``failures`` holds each (default: raise the first). The
    raised error's ``report`` holds what the checks found (docs/plugin-hooks.md).
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


# --- what several kinds check or use --------------------------------------------------------


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
    """Return (spec, registry) for a spec or the name of a registered component of ``kind``
    (``"models"``, ...); ``registry`` None means the process-wide one."""
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
