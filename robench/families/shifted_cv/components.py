"""Built-in plugin for the VAE-VGMM paper (Sun et al.): clusterer, CNNs and the shifted-cv metric.

* clusterers ``vae-vgmm`` and ``vae-vgmm-paper``: per class, a VAE (:mod:`robench.vae`) and a
  variational Gaussian mixture on its latent means; they differ only in the VAE's epochs.
* models ``lenet``, ``alexnet``, ``3conv3fc`` and ``bayesian-*`` (:mod:`robench.cnns`), for
  single-channel 28x28 images only.
* metric ``shifted-cv``: shifted vs random K-fold CV and the fold Wasserstein ratio
  (:mod:`robench.protocols.shifted_cv`).

Importing this module stays cheap (``robench list`` imports it): torch, scikit-learn and POT
are imported inside the functions that use them.
"""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np

from robench import hookimpl
from robench.specs import ClustererSpec, MetricSpec, ModelContext, ModelSpec, Score

#: VAE epochs of the two registered clusterers: few for ``vae-vgmm`` (about 3 minutes for the
#: ten classes of mnist-5k on this kind of machine), the paper code's 20 for ``vae-vgmm-paper``.
VAE_EPOCHS_FAST = 5
VAE_EPOCHS_PAPER = 20
#: Variational EM iterations of the mixture (scikit-learn's default is 100).
VGMM_MAX_ITER = 500
ARCHITECTURES = ("lenet", "alexnet", "3conv3fc")


# --- the clusterer ---------------------------------------------------------------------------


def fill_empty_components(Z, labels, k: int, *, seed: int) -> tuple:
    """Return (labels in 0..k-1 with all k used, record) from mixture labels that may leave some empty.

    A variational mixture with a Dirichlet prior can switch components off: ``predict`` then
    uses fewer than k. The rule: renumber the used components 0..m-1 in component order, then,
    while fewer than k are used, split the largest cluster in two with 2-means (k-means++,
    4 restarts, seeded) on the same latent codes; the new part takes the next free label. (If
    2-means cannot split it, e.g. identical points, its members are halved by position.) The
    record says how many components were empty and every split made.
    """
    from sklearn.cluster import KMeans

    Z = np.asarray(Z)
    used, labels = np.unique(np.asarray(labels), return_inverse=True)
    labels = labels.ravel().astype(np.int64)
    if Z.shape[0] < k:
        raise ValueError(f"cannot make {k} non-empty sub-domains from {Z.shape[0]} samples")
    record = {"n_empty": int(k - used.size), "splits": []}
    while labels.max() + 1 < k:
        sizes = np.bincount(labels)
        big = int(np.argmax(sizes))
        members = np.flatnonzero(labels == big)
        with warnings.catch_warnings():  # duplicate points: handled just below
            warnings.simplefilter("ignore")
            halves = KMeans(n_clusters=2, n_init=4, random_state=seed).fit_predict(Z[members])
        if halves.min() == halves.max():
            halves = np.arange(members.size) % 2
        new = int(labels.max() + 1)
        labels[members[halves == 1]] = new
        record["splits"].append({"cluster": big, "size": int(members.size),
                                 "sizes_after": [int((halves == 0).sum()), int((halves == 1).sum())]})
    return labels, record


def vgmm_labels(Z, k: int, *, seed: int, max_iter: int = VGMM_MAX_ITER) -> tuple:
    """Fit a variational GMM (Dirichlet-distribution prior, k full-covariance components) to Z.

    Returns (labels with exactly k non-empty clusters, record) after
    :func:`fill_empty_components`; the record adds the mixture's convergence and weights.
    """
    from sklearn.mixture import BayesianGaussianMixture

    Z = np.asarray(Z, dtype=np.float64)
    bgmm = BayesianGaussianMixture(
        n_components=k, covariance_type="full",
        weight_concentration_prior_type="dirichlet_distribution",
        max_iter=max_iter, random_state=seed,
    )
    raw = bgmm.fit(Z).predict(Z)
    labels, record = fill_empty_components(Z, raw, k, seed=seed)
    record.update(converged=bool(bgmm.converged_), n_iter=int(bgmm.n_iter_),
                  weights=[round(float(w), 4) for w in bgmm.weights_])
    return labels, record


def _image_shape(Z) -> tuple | None:
    """Return (1, 28, 28) for rows of 784 values in [0, 1] (the paper's conv VAE), else None."""
    if Z.shape[1] == 784 and Z.min() >= 0 and Z.max() <= 1:
        return (1, 28, 28)
    return None


def vae_vgmm_fit_predict(Z, k: int, *, seed: int, true_sources=None,
                         epochs: int = VAE_EPOCHS_FAST, latent_dim: int = 62):
    """Cluster one class: VAE latent means (cached on disk), then a variational GMM with k parts.

    Returns :class:`robench.sources.Labels` whose ``info`` records the empty-component repairs,
    the mixture's convergence and the VAE's training (stored with the sources).
    """
    from robench.sources import Labels
    from robench.vae import architecture, cached_latent_means

    Z = np.asarray(Z, dtype=np.float32)
    shape = _image_shape(Z)
    arrays, hit = cached_latent_means(Z, image_shape=shape, latent_dim=latent_dim,
                                      epochs=epochs, seed=seed)
    labels, record = vgmm_labels(arrays["means"], k, seed=seed)
    record["vae"] = {"architecture": architecture(Z.shape[1], shape), "epochs": int(epochs),
                     "latent_dim": int(latent_dim), "final_loss": float(arrays["loss"][-1]),
                     "seconds": float(arrays["seconds"]), "cache_hit": bool(hit)}
    return Labels(labels, record)


@hookimpl
def register_clusterers(register):
    """Register vae-vgmm (few VAE epochs) and vae-vgmm-paper (the paper code's 20)."""
    for name, epochs, what in (("vae-vgmm", VAE_EPOCHS_FAST, "few"),
                               ("vae-vgmm-paper", VAE_EPOCHS_PAPER, "the paper code's")):
        register(ClustererSpec(
            name, functools.partial(vae_vgmm_fit_predict, epochs=epochs),
            f"VAE ({what} {epochs} epochs, 62-d latent; the paper's conv VAE on 28x28 images, "
            "else an MLP VAE) + variational GMM with a Dirichlet prior on its latent means, per "
            "class; an empty component is refilled by splitting the largest (opt-in: slow).",
            version="1", in_default_run=False,
        ))


# --- the models ------------------------------------------------------------------------------


def build_paper_cnn(ctx: ModelContext, arch: str, bayesian: bool):
    """Return an untrained paper CNN (Bayesian: LRT layers, softplus, MC predictions)."""
    from robench.builtin.models import _budget
    from robench.cnns import DEFAULT_MC_SAMPLES, INPUT_SHAPE, BayesianPaperCNN, PaperCNN
    from robench.train import TorchClassifier

    if tuple(ctx.image_shape or ()) != INPUT_SHAPE:
        raise ValueError(f"{arch} needs 1x28x28 images, got image_shape {ctx.image_shape}")
    if bayesian:
        mc = int(ctx.train.get("mc_samples", DEFAULT_MC_SAMPLES))
        module = functools.partial(BayesianPaperCNN, arch, ctx.n_classes, mc_samples=mc)
    else:
        module = functools.partial(PaperCNN, arch, ctx.n_classes)
    return TorchClassifier(module, seed=ctx.seed, **_budget(ctx))


_DESCRIPTIONS = {
    "lenet": "LeNet-5 (conv 6-16, fc 120-84)",
    "alexnet": "AlexNet for small images (conv 64-192-384-256-256, the paper code's)",
    "3conv3fc": "3conv3fc (conv 32-64-128, fc 1000-1000)",
}


@hookimpl
def register_models(register):
    """Register lenet, alexnet, 3conv3fc and their Bayesian versions (28x28 grey images only)."""
    for arch in ARCHITECTURES:
        register(ModelSpec(
            arch, functools.partial(build_paper_cnn, arch=arch, bayesian=False),
            f"{_DESCRIPTIONS[arch]}, ReLU, 28x28 zero-padded to 32x32, Adam, early stopping on "
            "validation (opt-in: slow)",
            version="2",  # 2: fused Adam step
            requires_image=True, image_shapes=((1, 28, 28),), in_default_run=False,
        ))
        register(ModelSpec(
            f"bayesian-{arch}", functools.partial(build_paper_cnn, arch=arch, bayesian=True),
            f"Bayesian {_DESCRIPTIONS[arch]}: Bayes by Backprop, local reparameterization "
            "(bayesian-torch layers), N(0,1) prior, softplus, KL/N, MC-averaged predictions "
            "(opt-in: slow)",
            version="2",  # 2: fused Adam step
            requires_image=True, image_shapes=((1, 28, 28),), in_default_run=False,
        ))


# --- the metric ------------------------------------------------------------------------------

SHIFTED_CV_DEFINITION = (
    "Shifted K-fold cross-validation (Sun et al., Algorithms 1-2) vs random stratified K-fold. "
    "Sub-domains: the run's clusterer with k = K per class (vae-vgmm: a VAE per class and a "
    "variational GMM, Dirichlet-distribution prior, on its latent means; an empty component is "
    "refilled by splitting the largest cluster with 2-means). Per class the K sub-domains are "
    "assigned to the K folds (shuffled per class and repeat when repeats > 1); each fold is the "
    "test set once; the other folds are split at random, stratified, 80/20 into train and "
    "validation; the model early-stops and selects its epoch on validation only. Random CV "
    "uses the same rule on StratifiedKFold folds. shifted-cv (headline): mean test accuracy "
    "over the shifted folds x repeats. acc_random: the same under random CV. drop: acc_random "
    "- shifted-cv. gap_shifted / gap_random: mean over folds of validation minus test accuracy "
    "(the paper's 26-point drop is gap_shifted at the last epoch). std_ratio: sample std of "
    "the shifted test accuracies / sample std of their validation accuracies (the paper's ~14); "
    "details hold std_ratio_random (shifted test std / random test std), the last-epoch "
    "figures, every fold and the mean train / validation / test curves per epoch (test read by "
    "an observer after each epoch, never for selection). wasserstein_ratio (model ''): mean "
    "off-diagonal W1 distance between the K shifted folds / that between the K random folds, "
    "in the latent means of one VAE trained on all classes (POT emd2, Euclidean cost, exact; "
    "folds subsampled to max_points; a distance counts only if POT converged)."
)


def _details(row: dict) -> dict:
    d = row.get("details")
    if isinstance(d, str):
        try:
            return json.loads(d)
        except ValueError:
            return {}
    return d or {}


def _diff(a, b):
    return None if a is None or b is None else a - b


def _ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def aggregate_shifted_cv(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s fold trials into scores, plus the fold distances."""
    from robench.protocols import shifted_cv as sc

    clus = group["clusterer"]
    base = dict(dataset=group["dataset"], model=group["model"], clusterer=clus,
                metric="shifted-cv")
    summary = sc.summarize(trials, clus)
    stats = {}
    for kind in sc.KINDS:
        s = summary[kind]
        gaps = [_diff(v, t) for v, t in zip(s["val"], s["test"])]
        last_gaps = [_diff(v, t) for v, t in zip(s["last_val"], s["last_test"])]
        stats[kind] = {
            "test": sc.mean_std(s["test"]), "val": sc.mean_std(s["val"]),
            "train": sc.mean_std(s["train"]), "gap": sc.mean_std(gaps),
            "last_test": sc.mean_std(s["last_test"]), "last_val": sc.mean_std(s["last_val"]),
            "last_gap": sc.mean_std(last_gaps), "n": len(s["test"]),
        }
    sh, ra = stats["shifted"], stats["random"]
    n_failed = sum(1 for t in trials if t.get("status") != "ok" and t.get("kind") in sc.KINDS)
    table = {kind: {name: {"mean": v[0], "std": v[1]} for name, v in st.items() if name != "n"}
             for kind, st in stats.items()}
    details = {"table": table, "n_failed": n_failed,
               "folds": {k: summary[k]["folds"] for k in sc.KINDS},
               "per_fold": {k: {f: summary[k][f] for f in ("train", "val", "test", "last_val",
                                                           "last_test")} for k in sc.KINDS},
               "curves": {k: summary[k]["curves"] for k in sc.KINDS},
               "std_ratio_random": _ratio(sh["test"][1], ra["test"][1]),
               "last_epoch": {"drop": _diff(ra["last_test"][0], sh["last_test"][0]),
                              "gap_shifted": sh["last_gap"][0],
                              "std_ratio": _ratio(sh["last_test"][1], sh["last_val"][1])}}
    scores = [
        Score(**base, score="shifted-cv", value=sh["test"][0], n=sh["n"],
              details={**details, "std": sh["test"][1]}),
        Score(**base, score="acc_random", value=ra["test"][0], n=ra["n"],
              details={"std": ra["test"][1], "per_fold": summary["random"]["test"]}),
        Score(**base, score="drop", value=_diff(ra["test"][0], sh["test"][0]),
              n=min(sh["n"], ra["n"]), higher_is_better=False),
        Score(**base, score="gap_shifted", value=sh["gap"][0], n=sh["n"], higher_is_better=False,
              details={"std": sh["gap"][1], "val_mean": sh["val"][0], "val_std": sh["val"][1]}),
        Score(**base, score="gap_random", value=ra["gap"][0], n=ra["n"], higher_is_better=False,
              details={"std": ra["gap"][1], "val_mean": ra["val"][0], "val_std": ra["val"][1]}),
        Score(**base, score="std_ratio", value=_ratio(sh["test"][1], sh["val"][1]), n=sh["n"],
              higher_is_better=False,
              details={"test_std": sh["test"][1], "val_std": sh["val"][1],
                       "std_ratio_random": details["std_ratio_random"]}),
    ]
    for t in trials:
        if t.get("kind") != sc.WASSERSTEIN:
            continue
        w = _details(t) if t.get("status") == "ok" else {}
        scores.append(Score(
            dataset=group["dataset"], model="", clusterer=clus, metric="shifted-cv",
            score="wasserstein_ratio", value=w.get("ratio"),
            n=len(w.get("repeats") or []), higher_is_better=True,
            details={**w, "error": (t.get("error") or "").splitlines()[0] if t.get("error")
                     else None},
        ))
    return scores


@hookimpl
def register_metrics(register):
    """Register shifted-cv."""
    register(MetricSpec(
        name="shifted-cv",
        description="Shifted (sub-domain) vs random K-fold CV: test accuracy, the "
                    "validation-test gap, std ratio, and the fold Wasserstein ratio.",
        protocol="shifted-cv",
        aggregate=aggregate_shifted_cv,
        definition=SHIFTED_CV_DEFINITION,
        higher_is_better=True,
        uses_clusterer=True,
        version="1",
    ))
