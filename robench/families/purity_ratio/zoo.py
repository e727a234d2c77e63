"""The model zoo of the purity-ratio validation: models of clearly different robustness.

Only the ``clusterability`` protocol trains these (docs/clusterability.md, "The model zoo"),
each a :class:`robench.learn.train.TorchClassifier` with the profile's budget.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from robench.specs import ModelContext

#: Part of every zoo member's trial key: bump when a member's definition changes.
#: 2: TorchClassifier takes a fused Adam step; 3: its CNN members (robench.learn.train.ConvNet) run
#: channels-last end to end, which rounds differently (one version for all members).
ZOO_VERSION = "3"
#: Standard deviation of the Gaussian input noise of the noise-augmented member.
NOISE_SIGMA = 0.3
#: Dropout probability of the dropout member.
DROPOUT = 0.5


@dataclass(frozen=True)
class ZooMember:
    """A model trained only for the validation: ``build(ctx)`` returns a TorchClassifier."""

    name: str
    build: Callable[[ModelContext], object]
    description: str
    requires_image: bool = True


def _classifier(ctx, module_factory):
    from robench.learn.train import TorchClassifier, training_budget

    return TorchClassifier(module_factory, seed=ctx.seed, **training_budget(ctx.train))


def _mlp(ctx, hidden):
    from robench.learn.train import MLP

    return _classifier(ctx, functools.partial(MLP, ctx.n_features, ctx.n_classes, hidden=hidden))


def _cnn(ctx, channels, fc_width, wrap=None):
    from robench.learn.train import ConvNet

    def factory():
        net = ConvNet(ctx.image_shape, ctx.n_classes, channels=channels, fc_width=fc_width)
        return wrap(net) if wrap else net

    return _classifier(ctx, factory)


def _noisy(net):
    from torch import nn
    import torch

    class NoisyInput(nn.Module):
        """Add N(0, sigma²) noise to the inputs while training (noise-augmented training)."""

        def __init__(self, inner, sigma):
            super().__init__()
            self.inner, self.sigma = inner, sigma
            self.head, self.feature_width = inner.head, inner.feature_width

        def features(self, x):
            return self.inner.features(x)

        def forward(self, x):
            if self.training:
                x = (x + self.sigma * torch.randn_like(x)).clamp(0.0, 1.0)
            return self.inner(x)

    return NoisyInput(net, NOISE_SIGMA)


def _dropout(net):
    from torch import nn

    class DropoutFeatures(nn.Module):
        """Dropout on the penultimate features while training."""

        def __init__(self, inner, p):
            super().__init__()
            self.inner, self.drop = inner, nn.Dropout(p)
            self.head, self.feature_width = inner.head, inner.feature_width

        def features(self, x):
            return self.inner.features(x)

        def forward(self, x):
            return self.head(self.drop(self.inner.features(x)))

    return DropoutFeatures(net, DROPOUT)


def _timm(ctx, model_name, **kwargs):
    def factory():
        import timm
        from torch import nn

        c, h, w = ctx.image_shape

        class TimmNet(nn.Module):
            """A timm backbone (pretrained=False, offline) with a linear head."""

            def __init__(self):
                super().__init__()
                extra = dict(kwargs)
                if "vit" in model_name:
                    extra.setdefault("img_size", (h, w))
                    extra.setdefault("patch_size", 4 if h % 4 == 0 and w % 4 == 0 else 2)
                self.body = timm.create_model(model_name, pretrained=False, num_classes=0,
                                              in_chans=c, **extra)
                self.feature_width = int(getattr(self.body, "head_hidden_size", None)
                                         or self.body.num_features)
                self.head = nn.Linear(self.feature_width, ctx.n_classes)

            def features(self, x):
                return self.body(x.reshape(x.shape[0], c, h, w))

            def forward(self, x):
                return self.head(self.features(x))

        return TimmNet()

    return _classifier(ctx, factory)


ZOO = {m.name: m for m in (
    ZooMember("zoo-mlp-narrow", functools.partial(_mlp, hidden=(32,)),
              "MLP with one 32-unit hidden layer", requires_image=False),
    ZooMember("zoo-mlp-wide", functools.partial(_mlp, hidden=(512, 256)),
              "MLP 512-256", requires_image=False),
    ZooMember("zoo-cnn-narrow", functools.partial(_cnn, channels=(8, 16), fc_width=32),
              "CNN 8-16 channels, fc 32"),
    ZooMember("zoo-cnn-wide", functools.partial(_cnn, channels=(64, 128), fc_width=256),
              "CNN 64-128 channels, fc 256"),
    ZooMember("zoo-cnn-dropout", functools.partial(_cnn, channels=(32, 64), fc_width=128,
                                                   wrap=_dropout),
              f"CNN-2 with dropout {DROPOUT} on the features"),
    ZooMember("zoo-cnn-noise", functools.partial(_cnn, channels=(32, 64), fc_width=128,
                                                 wrap=_noisy),
              f"CNN-2 trained on inputs with Gaussian noise (sigma {NOISE_SIGMA})"),
    ZooMember("zoo-resnet", functools.partial(_timm, model_name="test_resnet"),
              "timm test_resnet (pretrained=False), linear head"),
    ZooMember("zoo-vit", functools.partial(_timm, model_name="test_vit"),
              "timm test_vit (pretrained=False, patch 4), linear head"),
)}
