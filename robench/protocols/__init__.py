"""Protocols: how a metric's trials are planned and run.

A protocol module defines ``NAME``, ``VERSION``, ``plan(combo, cfg, registry) -> [spec]``,
``prepare(combo, cfg, registry) -> [clustering rows]`` (driver-side work shared by its trials,
such as finding sources) and ``run(spec, env) -> result`` (pure function of the spec, run in
a worker).
"""

from __future__ import annotations

import importlib

PROTOCOLS = {
    "source-aware": "robench.protocols.source_aware",
    "adequacy": "robench.protocols.adequacy",
    "random-split": "robench.protocols.random_split",
    "clusterability": "robench.protocols.clusterability",
    "shifted-cv": "robench.protocols.shifted_cv",
    "coverage": "robench.protocols.coverage",
}


def get_protocol(name: str):
    """Return the protocol module called ``name``."""
    try:
        return importlib.import_module(PROTOCOLS[name])
    except KeyError:
        raise LookupError(f"unknown protocol '{name}'; known: {', '.join(sorted(PROTOCOLS))}") from None
