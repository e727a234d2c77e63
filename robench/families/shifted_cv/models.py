"""Register the VAE-VGMM paper's CNNs (LeNet-5, AlexNet, 3conv3fc) and their Bayesian versions.

For single-channel 28x28 images only (:mod:`robench.families.shifted_cv.cnns`). Importing this
module stays cheap: torch is imported inside the build function.
"""

from __future__ import annotations

import functools

from robench.specs import ModelContext, ModelSpec

ARCHITECTURES = ("lenet", "alexnet", "3conv3fc")
#: 2: fused Adam step; 3: channels-last end to end.
VERSION = "3"
#: 2: fused Adam step (the channels-last layout was slower for the Bayesian versions).
BAYESIAN_VERSION = "2"

DESCRIPTIONS = {
    "lenet": "LeNet-5 (conv 6-16, fc 120-84)",
    "alexnet": "AlexNet for small images (conv 64-192-384-256-256, the paper code's)",
    "3conv3fc": "3conv3fc (conv 32-64-128, fc 1000-1000)",
}

#: Trainable parameters of each paper CNN on its one input size (1x28x28): those that do not
#: depend on the number of classes, and those each class adds (the head's weights and bias).
#: tests/families/shifted_cv/test_shifted_cv.py counts them on the built modules.
PARAMS = {"lenet": (60_856, 85), "alexnet": (2_454_208, 257), "3conv3fc": (1_771_024, 1_001)}


def build_paper_cnn(ctx: ModelContext, arch: str, bayesian: bool):
    """Return an untrained paper CNN (Bayesian: LRT layers, softplus, MC predictions)."""
    from robench.families.shifted_cv.cnns import (DEFAULT_MC_SAMPLES, INPUT_SHAPE,
                                                  BayesianPaperCNN, PaperCNN)
    from robench.learn.train import TorchClassifier, training_budget

    if tuple(ctx.image_shape or ()) != INPUT_SHAPE:
        raise ValueError(f"{arch} needs 1x28x28 images, got image_shape {ctx.image_shape}")
    module = (functools.partial(BayesianPaperCNN, arch, ctx.n_classes,
                                mc_samples=int(ctx.train.get("mc_samples", DEFAULT_MC_SAMPLES)))
              if bayesian else functools.partial(PaperCNN, arch, ctx.n_classes))
    return TorchClassifier(module, seed=ctx.seed, **training_budget(ctx.train))


def params_text(arch: str, bayesian: bool) -> str:
    """Say how many trainable parameters the paper CNN has (Bayesian: two per weight)."""
    base, per_class = PARAMS[arch]
    factor = 2 if bayesian else 1
    text = (f"{factor * (base + 10 * per_class):,} with 10 classes ({factor * base:,} + "
            f"{factor * per_class:,} per class)")
    return text + (": a mean and a scale for each weight and bias" if bayesian else "")


def model_specs():
    """Yield the specs of the paper CNNs and their Bayesian versions (opt-in: slow)."""
    for arch in ARCHITECTURES:
        for bayesian, name, description, version in (
                (False, arch, f"{DESCRIPTIONS[arch]}, ReLU, 28x28 zero-padded to 32x32, Adam, "
                 "early stopping on validation (opt-in: slow)", VERSION),
                (True, f"bayesian-{arch}", f"Bayesian {DESCRIPTIONS[arch]}: Bayes by Backprop, "
                 "local reparameterization (bayesian-torch layers), N(0,1) prior, softplus, "
                 "KL/N, MC-averaged predictions (opt-in: slow)", BAYESIAN_VERSION)):
            yield ModelSpec(name, functools.partial(build_paper_cnn, arch=arch, bayesian=bayesian),
                            description, version=version, requires_image=True,
                            image_shapes=((1, 28, 28),), in_default_run=False,
                            params=params_text(arch, bayesian))
