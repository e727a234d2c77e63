"""Which components a run includes: the one policy ``robench run`` and ``robench.evaluate`` share.

For each kind: the components the user named, else every registered one; an opt-in component
(``in_default_run=False``) only where :data:`robench.run.config.INCLUDES_OPT_IN` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robench.run.config import INCLUDES_OPT_IN, PROFILES

KINDS = ("datasets", "models", "clusterers", "metrics")


@dataclass
class Selection:
    """The components of one run, and what the user named (``explicit``) or left out (``opt_in``)."""

    datasets: list
    models: list
    clusterers: list
    metrics: list
    #: {kind: [names the user gave]}: a named component that cannot apply is an error, not a skip
    explicit: dict = field(default_factory=dict)
    #: {kind: [opt-in names left out of this run]}: said after the run
    opt_in: dict = field(default_factory=dict)


def select(registry, profile: str, **named) -> Selection:
    """Return the components a run with ``profile`` includes; ``named`` maps a kind to the names
    the user gave (``datasets=["digits"]``); a kind not named gets the profile's defaults."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile '{profile}'; known: {', '.join(PROFILES)}")
    if unknown := set(named) - set(KINDS):
        raise TypeError(f"select() got unknown kind(s) {sorted(unknown)}")
    chosen, explicit, opt_in = {}, {}, {}
    for kind in KINDS:
        given = [registry.get(kind, name).name for name in named.get(kind) or ()]
        explicit[kind] = list(dict.fromkeys(given))
        if given:
            chosen[kind] = explicit[kind]
            continue
        left_out = [c.name for c in registry.all(kind) if not getattr(c, "in_default_run", True)]
        chosen[kind] = [c.name for c in registry.all(kind)
                        if INCLUDES_OPT_IN[profile] or c.name not in left_out]
        if left_out and not INCLUDES_OPT_IN[profile]:
            opt_in[kind] = left_out
    return Selection(chosen["datasets"], chosen["models"], chosen["clusterers"],
                     chosen["metrics"], explicit=explicit, opt_in=opt_in)
