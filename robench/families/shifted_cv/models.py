"""Register the VAE-VGMM paper's CNNs (LeNet-5, AlexNet, 3conv3fc) and their Bayesian versions.

For single-channel 28x28 images only (:mod:`robench.families.shifted_cv.cnns`). Importing this
module stays cheap: torch is imported inside the build function.
"""

from __future__ import annotations

import functools

from robench.specs import ModelContext

ARCHITECTURES = ("lenet", "alexnet", "3conv3fc")


def build_paper_cnn(ctx: ModelContext, arch: str, bayesian: bool):
    """Return an untrained paper CNN (Bayesian: LRT layers, softplus, MC predictions)."""
    from robench.families.shifted_cv.cnns import (DEFAULT_MC_SAMPLES, INPUT_SHAPE,
                                                  BayesianPaperCNN, PaperCNN)
    from robench.learn.train import TorchClassifier, training_budget

    if tuple(ctx.image_shape or ()) != INPUT_SHAPE:
        raise ValueError(f"{arch} needs 1x28x28 images, got image_shape {ctx.image_shape}")
    if bayesian:
        mc = int(ctx.train.get("mc_samples", DEFAULT_MC_SAMPLES))
        module = functools.partial(BayesianPaperCNN, arch, ctx.n_classes, mc_samples=mc)
    else:
        module = functools.partial(PaperCNN, arch, ctx.n_classes)
    return TorchClassifier(module, seed=ctx.seed, **training_budget(ctx.train))
