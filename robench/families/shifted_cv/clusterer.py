"""The ``vae-vgmm`` clusterers (Sun et al.): per class, a VAE and a variational Gaussian mixture
on its latent means (docs/shifted-cv.md); torch and scikit-learn are imported when used."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from robench.specs import ClustererSpec
from robench.data.sources import Labels

#: VAE epochs of the two registered clusterers: few for ``vae-vgmm`` (about 3 minutes for the
#: ten classes of mnist-5k on this kind of machine), the paper code's 20 for ``vae-vgmm-paper``.
VAE_EPOCHS_FAST = 5
VAE_EPOCHS_PAPER = 20
VERSION = "1"
#: Variational EM iterations of the mixture (scikit-learn's default is 100).
VGMM_MAX_ITER = 500


def fill_empty_components(Z, labels, k: int, *, seed: int) -> tuple:
    """Return (labels in 0..k-1, all used, record) from mixture labels that may leave some
    empty: the largest cluster split by 2-means until k are used (docs/shifted-cv.md)."""
    from sklearn.cluster import KMeans

    Z = np.asarray(Z)
    used, labels = np.unique(np.asarray(labels), return_inverse=True)
    labels = labels.ravel().astype(np.int64)
    if Z.shape[0] < k:
        raise ValueError(f"cannot make {k} non-empty sub-domains from {Z.shape[0]} samples")
    record = {"n_empty": int(k - used.size), "splits": []}
    while labels.max() + 1 < k:
        big = int(np.argmax(np.bincount(labels)))
        members = np.flatnonzero(labels == big)
        with warnings.catch_warnings():  # duplicate points: handled just below
            warnings.simplefilter("ignore")
            halves = KMeans(n_clusters=2, n_init=4, random_state=seed).fit_predict(Z[members])
        if halves.min() == halves.max():
            halves = np.arange(members.size) % 2
        labels[members[halves == 1]] = int(labels.max() + 1)
        record["splits"].append({"cluster": big, "size": int(members.size),
                                 "sizes_after": [int((halves == 0).sum()), int((halves == 1).sum())]})
    return labels, record


def vgmm_labels(Z, k: int, *, seed: int, max_iter: int = VGMM_MAX_ITER) -> tuple:
    """Return (k non-empty labels, record) of a variational GMM (Dirichlet-distribution prior,
    k full-covariance components) fitted to Z, after :func:`fill_empty_components`."""
    from sklearn.mixture import BayesianGaussianMixture

    Z = np.asarray(Z, dtype=np.float64)
    bgmm = BayesianGaussianMixture(
        n_components=k, covariance_type="full", max_iter=max_iter, random_state=seed,
        weight_concentration_prior_type="dirichlet_distribution")
    labels, record = fill_empty_components(Z, bgmm.fit(Z).predict(Z), k, seed=seed)
    record.update(converged=bool(bgmm.converged_), n_iter=int(bgmm.n_iter_),
                  weights=[round(float(w), 4) for w in bgmm.weights_])
    return labels, record


def _image_shape(Z) -> tuple | None:
    """Return (1, 28, 28) for rows of 784 values in [0, 1] (the paper's conv VAE), else None."""
    return (1, 28, 28) if Z.shape[1] == 784 and Z.min() >= 0 and Z.max() <= 1 else None


def vae_vgmm_fit_predict(Z, k: int, *, seed: int, true_sources=None,
                         epochs: int = VAE_EPOCHS_FAST, latent_dim: int = 62):
    """Cluster one class: VAE latent means (cached on disk), then a variational GMM with k parts
    (``info`` of the returned Labels records the repairs, the mixture and the VAE)."""
    from robench.families.shifted_cv.vae import architecture, cached_latent_means

    Z = np.asarray(Z, dtype=np.float32)
    shape = _image_shape(Z)
    arrays, hit = cached_latent_means(Z, image_shape=shape, latent_dim=latent_dim,
                                      epochs=epochs, seed=seed)
    labels, record = vgmm_labels(arrays["means"], k, seed=seed)
    record["vae"] = {"architecture": architecture(Z.shape[1], shape), "epochs": int(epochs),
                     "latent_dim": int(latent_dim), "final_loss": float(arrays["loss"][-1]),
                     "seconds": float(arrays["seconds"]), "cache_hit": bool(hit)}
    return Labels(labels, record)


def clusterer_specs():
    """Yield vae-vgmm (few VAE epochs) and vae-vgmm-paper (the paper code's 20), opt-in."""
    for name, epochs, what in (("vae-vgmm", VAE_EPOCHS_FAST, "few"),
                               ("vae-vgmm-paper", VAE_EPOCHS_PAPER, "the paper code's")):
        yield ClustererSpec(
            name, functools.partial(vae_vgmm_fit_predict, epochs=epochs),
            f"VAE ({what} {epochs} epochs, 62-d latent; the paper's conv VAE on 28x28 images, "
            "else an MLP VAE) + variational GMM with a Dirichlet prior on its latent means, per "
            "class; an empty component is refilled by splitting the largest (opt-in: slow).",
            version=VERSION, in_default_run=False,
        )
