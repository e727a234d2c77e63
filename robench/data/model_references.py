"""Models by reference: ``-m SCHEME:TARGET?KEY=VALUE`` resolved by a registered scheme.

A reference names a model no plugin registered: ``timm:resnet18``,
``timm:convnext_atto?pretrained=1``. :func:`resolve_model` finds the scheme's
:class:`robench.specs.ModelResolverSpec` (hook ``register_model_resolvers``), refuses options
it does not declare, makes the reference canonical (options sorted) and asks the resolver for
the model's spec. The canonical reference is the model's name everywhere (trial keys, the
database, the leaderboard), and a worker process resolves the name it is sent the same way.
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
