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


class ModelReferenceError(ValueError):
    """A model reference cannot be resolved; the message says why in one line."""


def resolve_model(registry, reference: str):
    """Return the ModelSpec ``reference`` names; its name is the canonical reference."""
    from robench.plugins import UnknownComponentError
    from robench.references import parse_reference, reference_name

    scheme, target, options = parse_reference(reference, "model", ModelReferenceError)
    try:
        resolver = registry.get("model-resolvers", scheme)
    except UnknownComponentError:
        known = ", ".join(f"{r.name}:" for r in registry.all("model-resolvers")) or "(none)"
        raise ModelReferenceError(
            f"unknown model '{reference}': no model or model reference scheme '{scheme}:' is "
            f"registered. Known schemes: {known} (see `robench list models`)") from None
    if not target:
        raise ModelReferenceError(f"model reference '{reference}' names nothing after "
                                  f"'{scheme}:'; usage: {resolver.syntax}")
    unknown = sorted(set(options) - set(resolver.options))
    if unknown:
        allowed = ", ".join(resolver.options) or "none"
        raise ModelReferenceError(
            f"model reference '{reference}': unknown option(s) {', '.join(unknown)} (options "
            f"of {scheme}: {allowed}); usage: {resolver.syntax}")
    spec = resolver.resolve(target, dict(options))
    return replace(spec, name=reference_name(resolver.name, target, options),
                   plugin=resolver.plugin, version=f"{resolver.version}/{spec.version}")
