"""Run configuration: profiles, and knobs merged from the registered protocols.

A knob's value in a run is its default, overridden by its profile's value, overridden by
``--set SECTION.KEY=VALUE``; the core owns the ``train`` section, each protocol its own
(docs/plugin-hooks.md, ``section``, ``knobs``). Values are checked when parsed.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from robench.specs import UNSET, Knob
from robench.errors import KnobError  # noqa: F401 (public here too)
from robench.learn.devices import check_syntax, resolve_device
from robench.run.batching import check_policy
from robench.storage.cells import TooDeep, loads

#: Profiles, weakest first: what each is for. What each sets is in the knobs' per-profile
#: values (:func:`profile_settings`, ``robench knobs``), so no family is named here.
PROFILES = {
    "quick": "minutes on 2 CPU cores: few repeats, short training (the default)",
    "standard": "enough repeats and epochs that intervals decide orderings; otherwise the quick "
                "profile's knobs (docs/profile.md: its time)",
    "paper": "the papers' scale, training to convergence; hours to days on a CPU",
}
DEFAULT_PROFILE = "quick"
#: Whether a profile's runs include opt-in components (``in_default_run=False``: slow ones) that
#: were not named (robench.run.selection).
INCLUDES_OPT_IN = {"quick": False, "standard": False, "paper": True}

#: Repeats per partition kind and sources per class, per profile (``--repeats``, ``--sources``).
REPEATS = {"quick": 3, "standard": 15, "paper": 100}
SOURCES = {"quick": 5, "standard": 5, "paper": 5}
#: Seconds one trial may run before it is stopped and recorded as failed (``--trial-timeout``;
#: in no trial key: docs/guarantees.md); generous: a paper-scale CNN trains for hours.
TRIAL_TIMEOUT = {"quick": 900, "standard": 3600, "paper": 14400}

#: The core's own section: the training budget handed to every model (``ModelContext.train``).
#: ``weight_decay`` and ``mc_samples`` are unset unless asked for: a model uses its own default.
TRAIN_SECTION = "train"
TRAIN_KNOBS = (
    Knob("max_epochs", "int", "upper bound on training epochs", default=4,
         profiles={"standard": 12, "paper": 60}, minimum=1, maximum=100_000),
    Knob("patience", "int", "stop after this many epochs without a better validation result",
         default=2, profiles={"standard": 3, "paper": 10}, minimum=1, maximum=100_000),
    Knob("batch_size", "int", "training mini-batch size", default=64, minimum=1,
         maximum=1_000_000),
    Knob("lr", "float", "learning rate (Adam)", default=2e-3, profiles={"paper": 1e-3},
         minimum=1e-12, maximum=10.0),
    Knob("weight_decay", "float", "weight decay (Adam); unset: the model's own (0)",
         minimum=0.0, maximum=10.0),
    Knob("mc_samples", "int", "Monte Carlo samples of Bayesian models at prediction time; "
         "unset: the model's own", minimum=1, maximum=100_000),
)

#: Upper bounds of the run's numbers (planning 2**63 repeats grew memory without end), and the
#: longest list, text and deepest JSON a --set value may be (docs/guarantees.md, "Inputs").
MAX_REPEATS = 10_000
MAX_SOURCES = 1_000
MAX_JOBS = 1_024
MAX_LIST_ITEMS = 1_000
MAX_TEXT = 1_000
MAX_SET_DEPTH = 8
MAX_NUMBER = 10**15

_MAX_SEED = 2**32 - 1  # numpy's SeedSequence and torch take any non-negative int; keep it portable

#: The most repeats a paired metric's model gets in a budgeted run without --repeats (looks 10,
#: 15, ..., 40; docs/adaptive.md): the budget, not this cap, is what normally ends it.
BUDGET_REPEATS = 40
#: The longest --budget accepted (a week).
MAX_BUDGET = 7 * 24 * 3600.0
_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text) -> float:
    """Return the seconds of a duration written ``90s``, ``10m``, ``1.5h`` (a bare number:
    seconds); raise ValueError with one line for anything else.

    >>> parse_duration("10m"), parse_duration("90s"), parse_duration("1h")
    (600.0, 90.0, 3600.0)
    """
    # ASCII digits only: \d would take '١٠m' (Arabic-Indic digits) as 10 minutes
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*", str(text).lower(),
                     flags=re.ASCII)
    if not m or m.group(2) not in ("", *_UNITS):
        raise ValueError(f"--budget: {str(text)[:40]!r} is not a duration; write it like "
                         "90s, 10m or 1h")
    seconds = float(m.group(1)) * _UNITS.get(m.group(2) or "s", 1.0)
    if not 0 < seconds <= MAX_BUDGET:
        raise ValueError(f"--budget: {str(text)[:40]!r} must be more than 0 and at most 7 days")
    return seconds


def default_jobs() -> int:
    """Return the default number of worker processes: one per core, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


def knob_sections(registry) -> dict:
    """Return {section: (owner, [Knob])}: the core's ``train`` and every protocol's section."""
    sections = {TRAIN_SECTION: ("robench", list(TRAIN_KNOBS))}
    for protocol in registry.all("protocols"):
        if not protocol.knobs:
            continue
        if protocol.section in sections:
            owner = sections[protocol.section][0]
            raise KnobError(f"protocol '{protocol.name}' declares knob section "
                            f"'{protocol.section}', already declared by {owner}")
        sections[protocol.section] = (f"protocol '{protocol.name}'", list(protocol.knobs))
    return sections


def describe_knob(knob: Knob) -> str:
    kind = f"list of {knob.items}" if knob.type == "list" and knob.items else knob.type
    bounds = [f">= {knob.minimum:g}"] if knob.minimum is not None else []
    bounds += [f"<= {knob.maximum:g}"] if knob.maximum is not None else []
    bounds += ["one of " + ", ".join(map(str, knob.choices))] if knob.choices else []
    bounds += [f"at least {knob.min_items} item(s)"] if knob.min_items else []
    bounds += ["or null"] if knob.nullable else []
    return kind + (f" ({'; '.join(bounds)})" if bounds else "")


def profile_settings(profile: str, registry) -> list[str]:
    """Return what ``profile`` sets that the quick profile does not, as ``NAME VALUE`` strings."""
    out = [f"{name} {table[profile]}" for name, table in (("repeats", REPEATS), ("sources", SOURCES))
           if table[profile] != table[DEFAULT_PROFILE]]
    for section, (_, knobs) in sorted(knob_sections(registry).items()):
        for knob in knobs:
            value = knob.value_for(profile)
            if value != knob.value_for(DEFAULT_PROFILE):
                out.append(f"{section}.{knob.name} {format_value(value)}")
    return out


def format_value(value: Any) -> str:
    """Return a knob value as it is written after ``--set KEY=`` (JSON), or 'unset'."""
    return "unset" if value is UNSET else json.dumps(value)


def check_value(section: str, knob: Knob, value: Any, *, convert: bool = False) -> Any:
    """Return ``value`` if it fits ``knob``, else raise KnobError naming it, its type and default.

    With ``convert`` (a value typed by a user) an int for a float knob becomes a float;
    declared values are never converted, so what they put into trial keys stays as declared.
    """
    def fail(why: str):
        raise KnobError(f"--set {section}.{knob.name}: {why}; expected {describe_knob(knob)} "
                        f"(default {format_value(knob.default)})")

    def scalar(v, kind, what="value"):
        types, word = _TYPES.get(kind, (object, ""))
        if not isinstance(v, types) or (isinstance(v, bool) and kind in ("int", "float")):
            fail(f"{what} {shown(v)} is not {word}")
        if kind == "float" and isinstance(v, float) and not math.isfinite(v):
            fail(f"{what} {v} is not finite")
        if kind == "str":
            if len(v) > MAX_TEXT:
                fail(f"{what} of {len(v)} characters is longer than {MAX_TEXT}")
            if knob.choices and v not in knob.choices:
                close = difflib.get_close_matches(v, [str(c) for c in knob.choices], n=1)
                fail(f"{what} '{v[:60]}' is not allowed" + (f" (did you mean '{close[0]}'?)"
                                                             if close else ""))
        if kind in ("int", "float"):
            # every number is bounded, declared or not: 2**63 epochs is not a budget
            low = knob.minimum if knob.minimum is not None else -MAX_NUMBER
            high = knob.maximum if knob.maximum is not None else MAX_NUMBER
            if v < low:
                fail(f"{what} {shown(v)} is below the minimum {low:g}")
            if v > high:
                fail(f"{what} {shown(v)} is above the maximum {high:g}")
        return float(v) if kind == "float" and convert else v

    if value is None:
        if not knob.nullable:
            fail("null is not allowed")
        return None
    if knob.type == "list":
        if not isinstance(value, list):
            fail(f"value {shown(value)} is not a list")
        if len(value) > MAX_LIST_ITEMS:
            fail(f"a list of {len(value)} items is longer than {MAX_LIST_ITEMS}")
        if len(value) < knob.min_items:
            fail(f"a list of {len(value)} item(s) is shorter than {knob.min_items} (an empty "
                 "list would mean the default, which the run's label would not say)")
        if knob.items:
            value = [scalar(v, knob.items, "item") for v in value]
        return value
    if knob.type == "dict":
        if not isinstance(value, dict):
            fail(f"value {shown(value)} is not a JSON object")
        return value
    return scalar(value, knob.type)


#: A scalar knob type: the Python types it accepts and its name in an error.
_TYPES = {"int": (int, "an integer"), "float": ((int, float), "a number"),
          "bool": (bool, "true or false"), "str": (str, "a string"), "list": (list, "a list")}


def shown(value: Any, limit: int = 60) -> str:
    """Return a --set value as JSON for an error message, at most ``limit`` characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**limit:
        return f"of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4,000'} digits"
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_settings(items, registry) -> dict:
    """Turn ``["train.lr=0.001", ...]`` into {section: {knob: value}}; KnobError if bad. VALUE
    is JSON (``0.8``, ``[1, 2]``, ``null``, ``true``); a bare word that is not is a string."""
    sections = knob_sections(registry)
    out: dict = {}
    for item in items or ():
        name, eq, raw = item.partition("=")
        section, dot, knob_name = name.strip().partition(".")
        if not eq or not dot or not knob_name:
            raise KnobError(f"--set expects SECTION.KEY=VALUE, got '{item}' "
                            "(e.g. --set train.max_epochs=10; `robench knobs` lists them)")
        if section not in sections:
            raise KnobError(f"--set: unknown section '{section}'." + _unknown(section, sections)
                            + " (`robench knobs`)")
        knobs = {k.name: k for k in sections[section][1]}
        if knob_name not in knobs:
            raise KnobError(f"--set: unknown {section} knob '{knob_name}'."
                            + _unknown(knob_name, knobs) + f" (`robench knobs {section}`)")
        try:
            value = loads(raw, MAX_SET_DEPTH, constants=True)
        except TooDeep:
            raise KnobError(f"--set {section}.{knob_name}: the value nests lists or objects "
                            f"deeper than {MAX_SET_DEPTH} levels") from None
        except ValueError:
            value = raw
        out.setdefault(section, {})[knob_name] = check_value(section, knobs[knob_name], value,
                                                              convert=True)
    return out


def _unknown(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return (f" Did you mean '{close[0]}'?" if close else "") + f" Known: {', '.join(sorted(known))}"


def resolve_knobs(registry, profile: str, settings: Optional[dict] = None) -> dict:
    """Return {section: {knob: value}}: defaults < profile < ``settings``; unset knobs left out
    (every protocol's cross-knob check runs on its section; a problem raises KnobError)."""
    settings = settings or {}
    sections = knob_sections(registry)
    if unknown := sorted(set(settings) - set(sections)):
        raise KnobError(f"unknown knob section(s) {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(sections))}")
    out = {}
    for section, (_, knobs) in sections.items():
        given = dict(settings.get(section) or {})
        names = {k.name for k in knobs}
        if set(given) - names:
            raise KnobError(f"unknown {section} knob(s) {', '.join(sorted(set(given) - names))};"
                            f" known: {', '.join(sorted(names))}")
        out[section] = values = {}
        for knob in knobs:
            if knob.name in given:
                values[knob.name] = check_value(section, knob, given[knob.name], convert=True)
            elif (value := knob.value_for(profile)) is not UNSET:
                values[knob.name] = check_value(section, knob, value)
    for protocol in registry.all("protocols"):
        if protocol.check_knobs is not None and protocol.section in out:
            try:
                protocol.check_knobs(out[protocol.section])
            except KnobError:
                raise
            except ValueError as exc:
                raise KnobError(f"--set {protocol.section}: {exc}") from None
    return out


@dataclass
class RunConfig:
    """Everything that defines one ``robench run`` (stored with the run); :meth:`resolve`
    merges ``settings`` (``--set``, by section) with the defaults into ``knobs``."""

    datasets: list
    models: list
    clusterers: list
    metrics: list
    profile: str = DEFAULT_PROFILE
    repeats: Optional[int] = None
    k: Optional[int] = None
    seed: int = 0
    test_size: float = 0.2
    val_fraction: float = 0.1
    settings: dict = field(default_factory=dict)
    knobs: dict = field(default_factory=dict)  # filled by resolve()
    executor: str = "local"
    jobs: int = 1
    device: str = "cpu"  # resolved: cpu | cuda | cuda:N | mps (robench.learn.devices.resolve_device)
    executor_options: dict = field(default_factory=dict)  # e.g. {"scheduler": ADDRESS}
    trial_timeout: Optional[float] = None  # seconds; None: the profile's; 0: no limit
    explicit: dict = field(default_factory=dict)  # kind -> names the user asked for by name
    #: Trials of one model trained together: auto | on | off (robench.run.batching); not part
    #: of any key. Default: ROBENCH_BATCH, else auto.
    batch: str = field(default_factory=lambda: os.environ.get("ROBENCH_BATCH", "auto"))

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile '{self.profile}'; known: {', '.join(PROFILES)}")
        for name, table in (("repeats", REPEATS), ("k", SOURCES), ("trial_timeout", TRIAL_TIMEOUT)):
            if getattr(self, name) is None:
                setattr(self, name, table[self.profile])
        if isinstance(self.trial_timeout, bool) \
                or not isinstance(self.trial_timeout, (int, float)) \
                or not 0 <= self.trial_timeout < float("inf"):
            raise ValueError(f"--trial-timeout must be a number of seconds >= 0 (0: no limit), "
                             f"got {self.trial_timeout!r}")
        for name, value, low, high in (("repeats", self.repeats, 1, MAX_REPEATS),
                                       ("sources", self.k, 2, MAX_SOURCES),
                                       ("jobs", self.jobs, 1, MAX_JOBS),
                                       ("seed", self.seed, 0, _MAX_SEED)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"--{name} must be an integer in [{low}, {high}], got {value!r}")
        if not 0 < self.test_size < 1:
            raise ValueError(f"test_size must be in (0, 1), got {self.test_size}")
        self.device = check_syntax(self.device)
        if self.device == "auto":
            self.device = resolve_device(self.device)
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        self.batch = check_policy(self.batch)

    def resolve(self, registry) -> "RunConfig":
        """Fill ``knobs`` from the registry's knobs, the profile and ``settings``; return self."""
        self.knobs = resolve_knobs(registry, self.profile, self.settings)
        return self

    @property
    def train(self) -> dict:
        """The training budget every model of the run gets (``ModelContext.train``)."""
        if TRAIN_SECTION not in self.knobs:
            raise RuntimeError("RunConfig.resolve(registry) has not been called yet")
        return self.knobs[TRAIN_SECTION]

    def to_dict(self) -> dict:
        """Return the configuration as plain JSON-able data."""
        return asdict(self)
