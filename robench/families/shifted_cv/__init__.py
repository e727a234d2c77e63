"""Family ``shifted-cv`` (Sun et al., VAE-VGMM): shifted vs random K-fold cross-validation.

Registers the ``shifted-cv`` protocol and metric, the ``vae-vgmm`` / ``vae-vgmm-paper``
clusterers that find the sub-domains, and the paper's CNNs (``lenet``, ``alexnet``,
``3conv3fc`` and their Bayesian versions). Importing it stays cheap: torch, scikit-learn and
POT are imported inside the functions that use them.
"""

from __future__ import annotations

from robench import hookimpl
from robench.families.shifted_cv import clusterer, claims, metric, models, protocol, report
from robench.specs import MetricSpec, ProtocolSpec


@hookimpl
def register_protocols(register):
    """Register the shifted-cv protocol (fold trials and the fold-distance trial)."""
    register(ProtocolSpec(
        name=protocol.NAME, version=protocol.VERSION, plan=protocol.plan, run=protocol.run,
        prepare=protocol.prepare, section=protocol.SECTION, knobs=protocol.KNOBS,
        sources_per_class=lambda cfg: protocol.settings(cfg)["folds"],
        preconditions=protocol.preconditions, check_knobs=protocol.check_knobs,
        description="K sub-domains per class merged into K folds (Algorithms 1-2) vs "
                    "stratified random K-fold; VAE latent Wasserstein distances between folds.",
    ))


@hookimpl
def register_metrics(register):
    """Register shifted-cv."""
    register(MetricSpec(
        name=metric.METRIC,
        description="Shifted (sub-domain) vs random K-fold CV: test accuracy, the "
                    "validation-test gap, std ratio, and the fold Wasserstein ratio.",
        protocol=protocol.NAME,
        aggregate=metric.aggregate,
        definition=metric.DEFINITION,
        higher_is_better=True,
        uses_clusterer=True,
        version=metric.VERSION,
        report=report.report_lines,
        claims=claims.shifted_cv_claims,
        moved_from="robench.builtin.vae_vgmm",
        references=(("Xudong Sun, Alexej Gossmann, Yu Wang and Bernd Bischl, Variational "
                     "Resampling Based Assessment of Deep Neural Networks under Distribution "
                     "Shift (IEEE SSCI 2019)", "https://arxiv.org/abs/1906.02972"),),
        display_order=40,
    ))


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
