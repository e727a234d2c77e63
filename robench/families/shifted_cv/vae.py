"""Variational autoencoders: the latent spaces of the ``vae-vgmm`` clusterer and of shifted-cv.

Imports torch: callers import it inside their functions. docs/shifted-cv.md gives the two
architectures (``conv28``, the paper's, and ``mlp``), the likelihoods and the training.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from robench.data.cache import cached_arrays, content_key
from robench.learn.devices import torch_device

#: Bump when training or architecture changes: part of every cached latent space's key.
VAE_VERSION = "1"
LATENT_DIM = 62
BATCH_SIZE = 64
LR = 1e-3
BETAS = (0.5, 0.999)
MLP_HIDDEN = (512, 256)
_STD_EPS = 1e-6


def architecture(n_features: int, image_shape=None) -> str:
    """Return ``"conv28"`` for single-channel 28x28 images, else ``"mlp"``."""
    square = image_shape is not None and tuple(int(s) for s in image_shape) == (1, 28, 28)
    return "conv28" if square else "mlp"


class _VAE(nn.Module):
    """A VAE whose ``encoder`` outputs a latent mean and a pre-softplus scale per row."""

    def encode(self, x: torch.Tensor) -> tuple:
        """Return the latent mean and standard deviation of flat rows ``x``."""
        mu, s = self.encoder(x).chunk(2, dim=1)
        return mu, F.softplus(s) + _STD_EPS

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Return flat decoder outputs (logits or Gaussian means) of latent codes ``z``."""
        return self.decoder(z)


class ConvVAE28(_VAE):
    """The paper's VAE for single-channel 28x28 images (section III-C); outputs logits."""

    def __init__(self, latent_dim: int = LATENT_DIM):
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = nn.Sequential(
            nn.Unflatten(1, (1, 28, 28)),
            nn.Conv2d(1, 64, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(64, 128, 4, stride=2, padding=1), nn.BatchNorm2d(128), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(128 * 7 * 7, 1024), nn.BatchNorm1d(1024), nn.LeakyReLU(0.2),
            nn.Linear(1024, 2 * latent_dim),
        )
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, 1024), nn.BatchNorm1d(1024), nn.ReLU(),
            nn.Linear(1024, 128 * 7 * 7), nn.BatchNorm1d(128 * 7 * 7), nn.ReLU(),
            nn.Unflatten(1, (128, 7, 7)),
            nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 1, 4, stride=2, padding=1), nn.Flatten(),
        )


def _mlp(*widths: int) -> nn.Sequential:
    """Return Linear layers through ``widths`` with a ReLU between each two."""
    layers = [m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
    return nn.Sequential(*layers[:-1])


class MLPVAE(_VAE):
    """Fully connected VAE for flat inputs of any width; outputs logits or Gaussian means."""

    def __init__(self, n_features: int, latent_dim: int = LATENT_DIM, hidden: tuple = MLP_HIDDEN):
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = _mlp(n_features, *hidden, 2 * latent_dim)
        self.decoder = _mlp(latent_dim, *reversed(hidden), n_features)


def negative_elbo(module, x: torch.Tensor, bernoulli: bool) -> torch.Tensor:
    """Return the mean over the batch of -ELBO = reconstruction NLL + KL(q(z|x) || N(0, I))."""
    mu, std = module.encode(x)
    out = module.decode(mu + std * torch.randn_like(std))
    nll = (F.binary_cross_entropy_with_logits(out, x, reduction="none").sum(1) if bernoulli
           else 0.5 * ((out - x) ** 2).sum(1))
    kl = 0.5 * (mu**2 + std**2 - 2 * torch.log(std) - 1).sum(1)
    return (nll + kl).mean()


def train_vae(X, *, image_shape=None, latent_dim: int = LATENT_DIM, epochs: int, seed: int,
              batch_size: int = BATCH_SIZE, max_train: int | None = None) -> dict:
    """Train a VAE on the rows of ``X`` (a seeded subset of ``max_train`` rows if set) and
    return arrays: ``means`` (n, latent_dim) float32 of every row, ``loss`` (mean -ELBO per
    epoch), ``seconds``, ``n_train``. Deterministic given ``seed`` on the CPU."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"a VAE needs at least 2 rows of flat inputs, got shape {X.shape}")
    if epochs < 1:
        raise ValueError(f"VAE epochs must be >= 1, got {epochs}")
    t0 = time.perf_counter()
    bernoulli = bool(X.min() >= 0.0 and X.max() <= 1.0)
    if not bernoulli:
        X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    arch = architecture(X.shape[1], image_shape)

    torch.manual_seed(seed)
    device = torch_device()  # the trial's device; the latent means come back on the CPU
    module = ConvVAE28(latent_dim) if arch == "conv28" else MLPVAE(X.shape[1], latent_dim)
    module.to(device)
    # fused: the conv VAE has 13M parameters and the unfused CPU Adam step took 40% of a step
    optimizer = torch.optim.Adam(module.parameters(), lr=LR, betas=BETAS, fused=True)
    generator = torch.Generator().manual_seed(seed)
    Xt = X_all = torch.from_numpy(X)
    if max_train is not None and X.shape[0] > int(max_train):
        rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], int(max_train), replace=False))
        Xt = X_all[torch.from_numpy(rows)]
    n = Xt.shape[0]
    losses = []
    for _ in range(epochs):
        module.train()
        order = torch.randperm(n, generator=generator)
        total, seen = 0.0, 0
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            if idx.numel() < 2:  # batch norm needs two rows; one leftover row waits a turn
                continue
            loss = negative_elbo(module, Xt[idx].to(device), bernoulli)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * idx.numel()
            seen += idx.numel()
        losses.append(total / max(seen, 1))
    module.eval()
    with torch.inference_mode():
        means = torch.cat([module.encode(X_all[s:s + 512].to(device))[0].cpu()
                           for s in range(0, X_all.shape[0], 512)])
    return {"means": means.numpy().astype(np.float32), "loss": np.asarray(losses, np.float64),
            "seconds": np.array(time.perf_counter() - t0), "n_train": np.array(n)}


def data_key(X) -> str:
    """Return a content hash of an array (shape, dtype and bytes)."""
    X = np.ascontiguousarray(X)
    h = hashlib.sha256(f"{X.shape}{X.dtype}".encode())
    h.update(X.tobytes())
    return h.hexdigest()[:24]


def cached_latent_means(X, *, image_shape=None, latent_dim: int = LATENT_DIM, epochs: int,
                        seed: int, batch_size: int = BATCH_SIZE,
                        max_train: int | None = None) -> tuple:
    """Return (arrays of :func:`train_vae`, cache hit), trained once per content, settings,
    seed and :data:`VAE_VERSION` (under ``<cache>/vae/``)."""
    shape = None if image_shape is None else [int(s) for s in image_shape]
    key = content_key("vae", VAE_VERSION, data_key(np.asarray(X, np.float32)), shape,
                      int(latent_dim), int(epochs), int(seed), int(batch_size),
                      None if max_train is None else int(max_train))
    return cached_arrays("vae", key, lambda: train_vae(
        X, image_shape=image_shape, latent_dim=latent_dim, epochs=epochs, seed=seed,
        batch_size=batch_size, max_train=max_train))
