"""Family ``shifted-cv`` (Sun et al., VAE-VGMM): shifted vs random K-fold cross-validation
(torch, scikit-learn and POT are imported inside the functions that use them)."""

from __future__ import annotations

from robench import hookimpl
from robench.families.shifted_cv import clusterer, claims, metric, models, protocol, report
from robench.specs import MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register the shifted-cv protocol (fold trials and the fold-distance trial)."""
    register(ProtocolSpec.from_module(
        protocol, prepare=protocol.prepare, sources_per_class=protocol.sources_per_class,
        preconditions=protocol.preconditions, check_knobs=protocol.check_knobs))


@hookimpl
def register_metrics(register):
    """Register shifted-cv."""
    register(MetricSpec.from_module(metric, protocol=protocol, report=report.report_lines,
                                    claims=claims.shifted_cv_claims))


@hookimpl
def register_clusterers(register):
    """Register vae-vgmm (few VAE epochs) and vae-vgmm-paper (the paper code's 20)."""
    for spec in clusterer.clusterer_specs():
        register(spec)


@hookimpl
def register_models(register):
    """Register lenet, alexnet, 3conv3fc and their Bayesian versions (28x28 grey images only)."""
    for spec in models.model_specs():
        register(spec)
