"""The VAE-VGMM paper's CNNs (LeNet, AlexNet, 3conv3fc), frequentist and Bayesian.

Imports torch (and bayesian-torch): import it only inside model factories. docs/shifted-cv.md
gives the architectures, the Bayesian layers, the loss and the prediction.
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

#: Monte Carlo forward passes averaged per Bayesian prediction unless the budget says otherwise.
DEFAULT_MC_SAMPLES = 10
#: Prior standard deviation and initial posterior standard deviation (see the module docstring).
PRIOR_SIGMA = 1.0
POSTERIOR_SIGMA_INIT = 0.01
_POSTERIOR_RHO_INIT = math.log(math.expm1(POSTERIOR_SIGMA_INIT))  # softplus(rho) = sigma
ARCHITECTURES = ("lenet", "alexnet", "3conv3fc")
INPUT_SHAPE = (1, 28, 28)
_PAD = 2  # 28x28 -> 32x32


class _LRT:
    """Local reparameterization shared by the Bayesian conv and linear layers: bayesian-torch's
    parameters and priors, ``forward`` b = A*mu + zeta * sqrt(A^2 * sigma^2) per example."""

    sample = True  # False: return the mean pre-activation (posterior-mean weights)

    def _reset(self) -> None:
        """Initialise the posterior means uniform in +-1/sqrt(fan_in) (torch's default)."""
        weight, bias = getattr(self, self._weight_names[0]), self.mu_bias
        bound = 1.0 / math.sqrt(weight[0].numel())
        with torch.no_grad():
            weight.uniform_(-bound, bound)
            if bias is not None:
                bias.uniform_(-bound, bound)

    def forward(self, x) -> torch.Tensor:
        mu_w, rho_w = (getattr(self, name) for name in self._weight_names)
        mean = self._op(x, mu_w, self.mu_bias)
        if not self.sample:
            return mean
        var_b = None if self.rho_bias is None else F.softplus(self.rho_bias) ** 2
        var = self._op(x * x, F.softplus(rho_w) ** 2, var_b)
        return mean + torch.sqrt(var.clamp_min(1e-16)) * torch.randn_like(mean)

    @staticmethod
    def _kl_sum(mu, rho, prior_mu, prior_sigma) -> torch.Tensor:
        sigma = F.softplus(rho)
        return (torch.log(prior_sigma / sigma)
                + (sigma**2 + (mu - prior_mu) ** 2) / (2 * prior_sigma**2) - 0.5).sum()

    def kl(self) -> torch.Tensor:
        """Return KL(q || p) summed over every weight and bias (closed form)."""
        mu, rho = (getattr(self, name) for name in self._weight_names)
        return (self._kl_sum(mu, rho, self.prior_weight_mu, self.prior_weight_sigma)
                + self._kl_sum(self.mu_bias, self.rho_bias, self.prior_bias_mu,
                               self.prior_bias_sigma))


@functools.cache
def _bayes_layers():
    """Return the (LRTConv2d, LRTLinear) classes, importing bayesian-torch on first use."""
    from bayesian_torch.layers.variational_layers.conv_variational import Conv2dReparameterization
    from bayesian_torch.layers.variational_layers.linear_variational import LinearReparameterization

    class LRTConv2d(_LRT, Conv2dReparameterization):
        """Bayesian 2-D convolution with the local reparameterization trick."""

        _weight_names = ("mu_kernel", "rho_kernel")

        def __init__(self, c_in, c_out, kernel_size, stride=1, padding=0):
            # bayesian-torch calls the prior's standard deviation ``prior_variance``
            super().__init__(c_in, c_out, kernel_size, stride=stride, padding=padding,
                             prior_mean=0.0, prior_variance=PRIOR_SIGMA,
                             posterior_rho_init=_POSTERIOR_RHO_INIT, bias=True)
            self._reset()

        def _op(self, x, w, b):
            return F.conv2d(x, w, b, self.stride, self.padding, self.dilation, self.groups)

    class LRTLinear(_LRT, LinearReparameterization):
        """Bayesian fully connected layer with the local reparameterization trick."""

        _weight_names = ("mu_weight", "rho_weight")

        def __init__(self, n_in, n_out):
            super().__init__(n_in, n_out, prior_mean=0.0, prior_variance=PRIOR_SIGMA,
                             posterior_rho_init=_POSTERIOR_RHO_INIT, bias=True)
            self._reset()

        def _op(self, x, w, b):
            return F.linear(x, w, b)

    return LRTConv2d, LRTLinear


class _Pool(nn.MaxPool2d):
    """Max-pool over channels-last memory (vectorised on CPU, see robench.learn.train.MaxPool2x2;
    a no-op conversion inside :class:`PaperCNN`, which keeps activations channels-last)."""

    def forward(self, x):
        return super().forward(x.contiguous(memory_format=torch.channels_last))


def _layers(arch: str, bayesian: bool) -> tuple:
    """Return (conv part, fc part up to the penultimate features, their width, head class)."""
    conv_cls, lin_cls, act = ((*_bayes_layers(), nn.Softplus) if bayesian
                              else (nn.Conv2d, nn.Linear, nn.ReLU))

    def conv(c_in, c_out, k, s=1, p=0):
        return [conv_cls(c_in, c_out, k, stride=s, padding=p), act()]

    def fc(n_in, n_out):
        return [lin_cls(n_in, n_out), act()]

    if arch == "lenet":
        body = [*conv(1, 6, 5), _Pool(2, 2), *conv(6, 16, 5), _Pool(2, 2)]
        hidden, width = [*fc(16 * 5 * 5, 120), *fc(120, 84)], 84
    elif arch == "alexnet":
        body = [*conv(1, 64, 11, 4, 5), _Pool(2, 2), *conv(64, 192, 5, 1, 2), _Pool(2, 2),
                *conv(192, 384, 3, 1, 1), *conv(384, 256, 3, 1, 1), *conv(256, 256, 3, 1, 1),
                _Pool(2, 2)]
        hidden, width = [], 256
    elif arch == "3conv3fc":
        body = [*conv(1, 32, 5, 1, 2), _Pool(3, 2), *conv(32, 64, 5, 1, 2), _Pool(3, 2),
                *conv(64, 128, 5, 1, 1), _Pool(3, 2)]
        hidden, width = [*fc(128 * 2 * 2, 1000), *fc(1000, 1000)], 1000
    else:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
    return nn.Sequential(*body), nn.Sequential(nn.Flatten(), *hidden), width, lin_cls


class PaperCNN(nn.Module):
    """One of the paper's CNNs (``arch``: lenet, alexnet or 3conv3fc) with ``n_classes`` logits,
    on flat 784-value rows of 28x28 single-channel images."""

    bayesian = False
    #: Conv weights and inputs channels-last end to end (version 3; docs/profile.md).
    channels_last = True

    def __init__(self, arch: str, n_classes: int):
        super().__init__()
        self.arch = arch
        self.conv, self.fc, self.feature_width, lin_cls = _layers(arch, self.bayesian)
        self.head = lin_cls(self.feature_width, n_classes)
        if self.channels_last:
            self.to(memory_format=torch.channels_last)

    def _images(self, x: torch.Tensor) -> torch.Tensor:
        """Return flat rows ``x`` as zero-padded 32x32 images (channels-last if the net is)."""
        x = F.pad(x.view(x.shape[0], *INPUT_SHAPE), (_PAD, _PAD, _PAD, _PAD))
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(self._images(x)))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the penultimate-layer activations (the head's input) of flat rows ``x``."""
        return self._features(x)

    def conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last convolutional block's output, flattened (the coverage layer)."""
        return self.conv(self._images(x)).flatten(1)

    def from_conv_features(self, z: torch.Tensor) -> torch.Tensor:
        """Return class logits from flattened :meth:`conv_features` ``z``."""
        return self.head(self.fc(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits for flat rows ``x``."""
        return self.head(self._features(x))


class BayesianPaperCNN(PaperCNN):
    """The Bayesian version of a :class:`PaperCNN`: LRT layers, softplus, MC predictions.

    ``forward``: one stochastic pass's logits in training mode; in eval mode the log of the
    Monte Carlo predictive mean over ``mc_samples`` passes (so softmax of it is the predictive).
    """

    bayesian = True
    #: The Bayesian layers keep version 2's NCHW layout (channels-last was slower; docs/profile.md).
    channels_last = False

    def __init__(self, arch: str, n_classes: int, mc_samples: int = DEFAULT_MC_SAMPLES):
        super().__init__(arch, n_classes)
        if mc_samples < 1:
            raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
        self.mc_samples = int(mc_samples)

    def bayes_layers(self) -> list:
        """Return the module's Bayesian (local reparameterization) layers."""
        return [m for m in self.modules() if isinstance(m, _LRT)]

    def penalty(self, n_train: int) -> torch.Tensor:
        """Return KL(q || p) / N: the ELBO's complexity cost per training sample."""
        return sum(m.kl() for m in self.bayes_layers()) / max(int(n_train), 1)

    @contextmanager
    def _posterior_mean(self):
        """Run the block with the posterior-mean weights (no sampling)."""
        for m in self.bayes_layers():
            m.sample = False
        try:
            yield
        finally:
            for m in self.bayes_layers():
                m.sample = True

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return penultimate activations computed with the posterior-mean weights."""
        with self._posterior_mean():
            return self._features(x)

    def conv_features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the last convolutional block's output with the posterior-mean weights."""
        with self._posterior_mean():
            return super().conv_features(x)

    def from_conv_features(self, z: torch.Tensor) -> torch.Tensor:
        """Return logits from conv features with the posterior-mean weights (deterministic)."""
        with self._posterior_mean():
            return super().from_conv_features(z)

    def mc_probabilities(self, x: torch.Tensor, n_samples: int) -> torch.Tensor:
        """Return the mean softmax over ``n_samples`` stochastic forward passes."""
        return sum(torch.softmax(self.head(self._features(x)), dim=1)
                   for _ in range(int(n_samples))) / int(n_samples)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return one pass's logits (training) or the log MC predictive mean (eval)."""
        if self.training:
            return self.head(self._features(x))
        return torch.log(self.mc_probabilities(x, self.mc_samples).clamp_min(1e-12))
