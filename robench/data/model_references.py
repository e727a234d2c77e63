"""Models by reference: ``-m SCHEME:TARGET?KEY=VALUE`` resolved by a registered scheme.

:func:`resolve_model` checks the options and makes the reference canonical (options
sorted): the model's name everywhere, resolved the same way by a worker.
"""

from __future__ import annotations

from dataclasses import replace

from robench.errors import ModelReferenceError  # noqa: F401 (public here too)
from robench.data.references import checked_reference, reference_name


def resolve_model(registry, reference: str):
    """Return the ModelSpec ``reference`` names; its name is the canonical reference."""
    resolver, target, options = checked_reference(registry, "model-resolvers", reference,
                                                  "model", ModelReferenceError, "models")
    spec = resolver.resolve(target, dict(options))
    return replace(spec, name=reference_name(resolver.name, target, options),
                   plugin=resolver.plugin, version=f"{resolver.version}/{spec.version}")
