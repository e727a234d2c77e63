"""Family ``shifted-cv`` (Sun et al., VAE-VGMM): shifted vs random K-fold cross-validation.

Registers the ``shifted-cv`` protocol and metric, the ``vae-vgmm`` / ``vae-vgmm-paper``
clusterers that find the sub-domains, and the paper's CNNs (``lenet``, ``alexnet``,
``3conv3fc`` and their Bayesian versions). Importing it stays cheap: torch, scikit-learn and
POT are imported inside the functions that use them.
"""

from __future__ import annotations

import functools

from robench import hookimpl
from robench.families.shifted_cv import clusterer, claims, metric, models, protocol, report
from robench.specs import ClustererSpec, MetricSpec, ModelSpec, ProtocolSpec


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
        aggregate=metric.aggregate_shifted_cv,
        definition=metric.SHIFTED_CV_DEFINITION,
        higher_is_better=True,
        uses_clusterer=True,
        version="1",
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
    for name, epochs, what in (("vae-vgmm", clusterer.VAE_EPOCHS_FAST, "few"),
                               ("vae-vgmm-paper", clusterer.VAE_EPOCHS_PAPER, "the paper code's")):
        register(ClustererSpec(
            name, functools.partial(clusterer.vae_vgmm_fit_predict, epochs=epochs),
            f"VAE ({what} {epochs} epochs, 62-d latent; the paper's conv VAE on 28x28 images, "
            "else an MLP VAE) + variational GMM with a Dirichlet prior on its latent means, per "
            "class; an empty component is refilled by splitting the largest (opt-in: slow).",
            version="1", in_default_run=False,
        ))


_DESCRIPTIONS = {
    "lenet": "LeNet-5 (conv 6-16, fc 120-84)",
    "alexnet": "AlexNet for small images (conv 64-192-384-256-256, the paper code's)",
    "3conv3fc": "3conv3fc (conv 32-64-128, fc 1000-1000)",
}


#: Trainable parameters of each paper CNN on its one input size (1x28x28): those that do not
#: depend on the number of classes, and those each class adds (the head's weights and bias).
#: tests/families/shifted_cv/test_shifted_cv.py counts them on the built modules.
_PARAMS = {"lenet": (60_856, 85), "alexnet": (2_454_208, 257), "3conv3fc": (1_771_024, 1_001)}


def _params_text(arch: str, bayesian: bool) -> str:
    """Say how many trainable parameters the paper CNN has (Bayesian: two per weight)."""
    base, per_class = _PARAMS[arch]
    factor = 2 if bayesian else 1
    text = (f"{factor * (base + 10 * per_class):,} with 10 classes ({factor * base:,} + "
            f"{factor * per_class:,} per class)")
    return text + (": a mean and a scale for each weight and bias" if bayesian else "")


@hookimpl
def register_models(register):
    """Register lenet, alexnet, 3conv3fc and their Bayesian versions (28x28 grey images only)."""
    for arch in models.ARCHITECTURES:
        register(ModelSpec(
            arch, functools.partial(models.build_paper_cnn, arch=arch, bayesian=False),
            f"{_DESCRIPTIONS[arch]}, ReLU, 28x28 zero-padded to 32x32, Adam, early stopping on "
            "validation (opt-in: slow)",
            version="3",  # 2: fused Adam step; 3: channels-last end to end
            requires_image=True, image_shapes=((1, 28, 28),), in_default_run=False,
            params=_params_text(arch, bayesian=False),
        ))
        register(ModelSpec(
            f"bayesian-{arch}", functools.partial(models.build_paper_cnn, arch=arch,
                                                  bayesian=True),
            f"Bayesian {_DESCRIPTIONS[arch]}: Bayes by Backprop, local reparameterization "
            "(bayesian-torch layers), N(0,1) prior, softplus, KL/N, MC-averaged predictions "
            "(opt-in: slow)",
            version="2",  # 2: fused Adam step (the channels-last layout was slower for these)
            requires_image=True, image_shapes=((1, 28, 28),), in_default_run=False,
            params=_params_text(arch, bayesian=True),
        ))
