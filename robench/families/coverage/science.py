"""Coverage of a model's feature space and coverage-guided test generation (Mani et al., 2019).

Pure functions of arrays (plus a seed); :mod:`robench.families.coverage.protocol` runs them on
a trained model. docs/coverage.md gives the definitions (calibration, EP, CP, BC, PBC,
covariate shift, Algorithm 1's generation).
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from robench.learn.features import FeatureSpace, feature_space, softmax  # noqa: F401 (re-exported)
from robench.learn.devices import module_device, torch_device

#: wc_l of Algorithm 1 (true-class probability at or below which a point is a boundary seed);
#: robench's value, the paper gives none (docs/coverage.md, "Why these defaults").
PAPER_WC_L = 0.5
#: Boundary rules of :class:`Regions`: today's confidence band, and Algorithm 1's.
BOUNDARY_RULES = ("band", "paper")

#: centroid:boundary mixes (percent) and generated set sizes of the paper's Table 2.
MIXES = ((0, 100), (30, 70), (50, 50), (70, 30), (100, 0))
SIZES = (100, 300, 700, 1000)
EVAL_BATCH = 1024


def mix_name(mix) -> str:
    """Return the name of a centroid:boundary mix, e.g. ``"30-70"``."""
    return f"{int(mix[0])}-{int(mix[1])}"


#: Search range of the temperature, relative to the logits' own scale (see fit_temperature).
TEMPERATURE_RANGE = (1e-3, 1e3)


def logit_scale(logits: np.ndarray) -> float:
    """Return the mean absolute deviation of each row's logits from the row's mean (> 0).

    ``logit_scale(T * L) = T * logit_scale(L)``, so dividing by it removes any factor the
    logits carry. 1.0 when every row is constant.
    """
    L = np.asarray(logits, dtype=np.float64)
    s = float(np.abs(L - L.mean(axis=1, keepdims=True)).mean()) if L.size else 0.0
    return s if s > 0 and math.isfinite(s) else 1.0


def _nll(logits: np.ndarray, y: np.ndarray) -> float:
    """Return the mean negative log-likelihood of labels ``y`` under softmax(logits)."""
    L = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(L).sum(axis=1))
    return float((lse - L[np.arange(len(L)), y]).mean())


@dataclass(frozen=True)
class Calibration:
    """A temperature for a model's logits: calibrated logits = (logits / scale) / t.

    ``temperature = scale * t`` (Guo et al., 2017), in two steps (docs/coverage.md says why).
    ``method`` is "temperature" or "none" (the raw softmax).
    """

    scale: float = 1.0
    t: float = 1.0
    method: str = "none"
    nll_raw: Optional[float] = None  # validation NLL of the raw softmax
    nll_calibrated: Optional[float] = None  # validation NLL after scaling
    n_val: int = 0
    at_bound: bool = False  # the fitted t is at an end of TEMPERATURE_RANGE

    @property
    def temperature(self) -> float:
        """Return the temperature the raw logits are divided by."""
        return self.scale * self.t

    def logits(self, logits: np.ndarray) -> np.ndarray:
        """Return calibrated logits (float64)."""
        L = np.asarray(logits, dtype=np.float64)
        return L if self.method == "none" else (L / self.scale) / self.t

    def as_dict(self) -> dict:
        """Return the calibration's numbers (for a score's details)."""
        return {"method": self.method, "temperature": float(self.temperature),
                "scale": float(self.scale), "t": float(self.t), "nll_raw": self.nll_raw,
                "nll_calibrated": self.nll_calibrated, "n_val": int(self.n_val),
                "at_bound": bool(self.at_bound)}


def fit_temperature(logits_val: np.ndarray, y_val: np.ndarray) -> Calibration:
    """Fit temperature scaling by minimum NLL on a validation split (logits over
    :func:`logit_scale`; bounded Brent on log t in :data:`TEMPERATURE_RANGE`)."""
    from scipy.optimize import minimize_scalar

    L = np.asarray(logits_val, dtype=np.float64)
    y = np.asarray(y_val, dtype=np.int64)
    if L.ndim != 2 or len(L) == 0 or len(L) != len(y):
        raise ValueError("temperature scaling needs a non-empty validation split (logits of "
                         f"shape (n, classes) and n labels), got {L.shape} and {y.shape}")
    scale = logit_scale(L)
    Ln = L / scale
    lo, hi = (math.log(v) for v in TEMPERATURE_RANGE)
    u = float(minimize_scalar(lambda u: _nll(Ln / math.exp(u), y), bounds=(lo, hi),
                              method="bounded", options={"xatol": 1e-6}).x)
    t = math.exp(u)
    return Calibration(scale=scale, t=t, method="temperature", nll_raw=_nll(L, y),
                       nll_calibrated=_nll(Ln / t, y), n_val=int(len(y)),
                       at_bound=bool(min(u - lo, hi - u) < 1e-3))


def calibrated_space(space: FeatureSpace, calibration: Calibration) -> FeatureSpace:
    """Return ``space`` with its head's logits calibrated (same layer, encoder, predictions)."""
    return FeatureSpace(space.layer, space.description, space.encode,
                        lambda Z: calibration.logits(space.logits(Z)))


def equivalence_partitioning(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Return EP_i = ns_i * nc / ns for every class (eq. 3); 1 everywhere for a balanced set."""
    y = np.asarray(y, dtype=np.int64)
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    return counts * n_classes / max(len(y), 1)


def class_centroids(Z: np.ndarray, y: np.ndarray, n_classes: int) -> tuple:
    """Return (centroids (nc, D), RMS radius (nc,)) of each class's rows; NaN for empty classes."""
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y, dtype=np.int64)
    cent = np.full((n_classes, Z.shape[1]), np.nan)
    radius = np.full(n_classes, np.nan)
    for c in range(n_classes):
        rows = Z[y == c]
        if len(rows):
            cent[c] = rows.mean(axis=0)
            radius[c] = math.sqrt(float(((rows - cent[c]) ** 2).sum(axis=1).mean()))
    return cent, radius


def normalized_distance(Z: np.ndarray, y: np.ndarray, centroids: np.ndarray,
                        radius: np.ndarray) -> np.ndarray:
    """Return ``||z_j - c_{y_j}|| / R_{y_j}`` for every row (inf where R is 0)."""
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y, dtype=np.int64)
    d = np.sqrt(((Z - centroids[y]) ** 2).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = d / radius[y]
    out[(radius[y] == 0) & (d == 0)] = 0.0
    return out


def class_rate(mask: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Return the share of each class's rows where ``mask`` holds (NaN for an empty class)."""
    y = np.asarray(y, dtype=np.int64)
    n = np.bincount(y, minlength=n_classes).astype(np.float64)
    hits = np.bincount(y[np.asarray(mask, bool)], minlength=n_classes).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, hits / np.maximum(n, 1), np.nan)


def centroid_positioning(dist: np.ndarray, y: np.ndarray, n_classes: int, r: float) -> np.ndarray:
    """Return CP_i: share of class-i rows with normalized centroid distance <= r (eq. 4)."""
    return class_rate(np.asarray(dist) <= r, y, n_classes)


def confidence(proba: np.ndarray) -> np.ndarray:
    """Return each row's top class probability."""
    return np.asarray(proba, dtype=np.float64).max(axis=1)


def in_band(proba: np.ndarray, theta1: float, theta2: float) -> np.ndarray:
    """Return whether each row's confidence lies in [theta1, theta2] (a boundary point)."""
    conf = confidence(proba)
    return (conf >= theta1) & (conf <= theta2)


def true_class_confidence(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Return each row's probability of its true class ``y``."""
    P = np.asarray(proba, dtype=np.float64)
    return P[np.arange(len(P)), np.asarray(y, dtype=np.int64)]


def paper_boundary(proba: np.ndarray, y: np.ndarray, wc_l: float = PAPER_WC_L) -> np.ndarray:
    """Return whether each row is a boundary point by Algorithm 1: true-class proba <= wc_l."""
    return true_class_confidence(proba, y) <= wc_l


def paper_boundary_conditioning(proba: np.ndarray, y: np.ndarray, n_classes: int,
                                wc_l: float = PAPER_WC_L) -> np.ndarray:
    """Return bc_i of Algorithm 1: share of class-i rows with true-class probability <= wc_l."""
    return class_rate(paper_boundary(proba, y, wc_l), y, n_classes)


def boundary_conditioning(proba: np.ndarray, y: np.ndarray, n_classes: int, theta1: float,
                          theta2: float) -> np.ndarray:
    """Return BC_i: share of class-i rows with confidence in [theta1, theta2] (eq. 5)."""
    return class_rate(in_band(proba, theta1, theta2), y, n_classes)


def runner_up(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Return each row's most probable class other than its true class ``y``."""
    P = np.array(proba, dtype=np.float64)
    P[np.arange(len(P)), np.asarray(y, dtype=np.int64)] = -np.inf
    return P.argmax(axis=1)


def pairwise_boundary(proba: np.ndarray, y: np.ndarray, n_classes: int, theta1: float,
                      theta2: float) -> np.ndarray:
    """Return PBC (nc x nc): PBC_ij = share of class-i rows in the band whose runner-up is j
    (rows sum to BC_i; NaN rows for empty classes)."""
    band, other = in_band(proba, theta1, theta2), runner_up(proba, y)
    return np.stack([class_rate(band & (other == j), y, n_classes) for j in range(n_classes)],
                    axis=1)


def summarize_pbc(pbc: np.ndarray) -> dict:
    """Return the mean PBC over ordered pairs i != j and the share of class pairs it covers."""
    pbc = np.asarray(pbc, dtype=np.float64)
    nc = pbc.shape[0]
    vals = pbc[~np.eye(nc, dtype=bool)]
    vals = vals[np.isfinite(vals)]
    sym = np.nan_to_num(pbc) + np.nan_to_num(pbc).T
    iu = np.triu_indices(nc, k=1)
    return {"mean": float(vals.mean()) if vals.size else None,
            "pairs_covered": float((sym[iu] > 0).mean()) if iu[0].size else None}


def gmm_js(A: np.ndarray, B: np.ndarray, *, n_components: int = 10,
           covariance_type: str = "diag", n_mc: int = 2000, seed: int = 0) -> dict:
    """Return the Jensen-Shannon divergence / ln 2 of GMMs fitted to A and to B, in [0, 1].

    Returns ``js``, its Monte Carlo standard error ``se`` and the GMMs' ``components``.
    """
    from sklearn.mixture import GaussianMixture

    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    k = max(1, min(int(n_components), len(A) // 2, len(B) // 2))

    def fit(X, s):
        return GaussianMixture(k, covariance_type=covariance_type, reg_covar=1e-4,
                               random_state=s, max_iter=200).fit(X)

    p, q = fit(A, seed), fit(B, seed + 1)
    xp, xq = p.sample(int(n_mc))[0], q.sample(int(n_mc))[0]
    log2 = math.log(2.0)

    def terms(x, own, other):
        lo, lt = own.score_samples(x), other.score_samples(x)
        return lo - (np.logaddexp(lo, lt) - log2)  # log own(x) - log m(x)

    tp, tq = terms(xp, p, q), terms(xq, q, p)
    js = 0.5 * (tp.mean() + tq.mean()) / log2
    se = 0.5 * math.sqrt(tp.var(ddof=1) / len(tp) + tq.var(ddof=1) / len(tq)) / log2
    return {"js": float(min(max(js, 0.0), 1.0)), "se": float(se), "components": int(k)}


def covariate_shift(Z_train, y_train, Z_test, y_test, n_classes: int, *, dims: int = 10,
                    n_components: int = 10, covariance_type: str = "diag", n_mc: int = 2000,
                    seed: int = 0) -> dict:
    """Return per-class train-vs-test GMM Jensen-Shannon divergence in ``dims`` principal
    components, and ``null``: the same between two parts of the class's training rows."""
    from sklearn.decomposition import PCA

    Z_train, Z_test = np.asarray(Z_train, dtype=np.float64), np.asarray(Z_test, dtype=np.float64)
    y_train, y_test = np.asarray(y_train, dtype=np.int64), np.asarray(y_test, dtype=np.int64)
    d = max(1, min(int(dims), Z_train.shape[1], len(Z_train) - 1))
    pca = PCA(d, random_state=seed).fit(Z_train)
    P_train, P_test = pca.transform(Z_train), pca.transform(Z_test)
    rng = np.random.default_rng(seed)
    gmm = dict(n_components=n_components, covariance_type=covariance_type, n_mc=n_mc)
    js, se, null = [], [], []
    for c in range(n_classes):
        a, b = P_train[y_train == c], P_test[y_test == c]
        r = gmm_js(a, b, **gmm, seed=seed + 2 * c) if len(a) >= 4 and len(b) >= 4 else {}
        js.append(r.get("js")), se.append(r.get("se"))
        if r and len(a) >= len(b) + 4:
            perm = rng.permutation(len(a))
            null.append(gmm_js(a[perm[len(b):]], a[perm[:len(b)]], **gmm,
                               seed=seed + 2 * c + 1)["js"])
        else:
            null.append(None)
    return {"js": js, "se": se, "null": null, "dims": d,
            "explained_variance": float(pca.explained_variance_ratio_.sum())}


class NoSeeds(ValueError):
    """A generated set needs seeds of a region that the test set does not have."""


@dataclass
class Regions:
    """The centroid and boundary regions of a feature space, and how to stay inside them."""

    centroids: np.ndarray  # (nc, D) class centroids of the training features
    radius: np.ndarray  # (nc,) RMS training radius of each class
    r: float
    theta1: float
    theta2: float
    proba: Callable[[np.ndarray], np.ndarray]  # features -> softmax probabilities
    clip_min: Optional[float] = None  # lower bound of the feature space (0 after a ReLU)
    spread: Optional[np.ndarray] = None  # (nc, D) per-coordinate std of each class's features
    boundary_rule: str = "band"  # "band": confidence in [theta1, theta2]; "paper": Algorithm 1
    wc_l: float = PAPER_WC_L  # the "paper" rule's bound on the true-class probability

    def __post_init__(self):
        if self.boundary_rule not in BOUNDARY_RULES:
            raise ValueError(f"unknown boundary rule {self.boundary_rule!r}; use one of "
                             f"{BOUNDARY_RULES}")

    def in_centroid(self, Z, y) -> np.ndarray:
        """Return whether each row is within r of its class centroid (normalized)."""
        return normalized_distance(Z, y, self.centroids, self.radius) <= self.r

    def in_boundary(self, Z, y=None) -> np.ndarray:
        """Return whether each row is a boundary point by ``boundary_rule`` ("paper" needs y)."""
        if self.boundary_rule == "paper":
            if y is None:
                raise ValueError("the paper's boundary rule (true-class probability <= wc_l) "
                                 "needs the labels: call in_boundary(Z, y)")
            return paper_boundary(self.proba(Z), y, self.wc_l)
        return in_band(self.proba(Z), self.theta1, self.theta2)

    def inside(self, region: str, Z, y) -> np.ndarray:
        """Return membership of ``region`` ("centroid" or "boundary")."""
        return self.in_centroid(Z, y) if region == "centroid" else self.in_boundary(Z, y)


def class_spread(Z: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Return the per-coordinate standard deviation of each class's rows, (nc, D)."""
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y, dtype=np.int64)
    out = np.zeros((n_classes, Z.shape[1]))
    for c in range(n_classes):
        rows = Z[y == c]
        if len(rows):
            out[c] = rows.std(axis=0)
    return out


def perturb_within(Z: np.ndarray, y: np.ndarray, region: str, regions: Regions, rng, *,
                   step: float, max_tries: int) -> tuple:
    """Return (Z', tries): seeds plus Gaussian noise that keeps every row in ``region``.

    Noise ``N(0, diag((step * s_i)^2))`` (isotropic of the same norm without ``spread``),
    clipped, halved on each redraw; a row never accepted keeps its seed (tries = max + 1).
    """
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y, dtype=np.int64)
    out = Z.copy()
    tries = np.full(len(Z), max_tries + 1, dtype=np.int64)
    todo = np.arange(len(Z))
    if regions.spread is not None:
        sigma = step * np.asarray(regions.spread, dtype=np.float64)[y]
    else:
        sigma = np.repeat((step * regions.radius[y] / math.sqrt(max(Z.shape[1], 1)))[:, None],
                          Z.shape[1], axis=1)
    for t in range(max_tries):
        if not todo.size:
            break
        cand = Z[todo] + rng.standard_normal((todo.size, Z.shape[1])) * (
            sigma[todo] * 0.5 ** t)
        if regions.clip_min is not None:
            np.maximum(cand, regions.clip_min, out=cand)
        ok = regions.inside(region, cand, y[todo])
        out[todo[ok]] = cand[ok]
        tries[todo[ok]] = t + 1
        todo = todo[~ok]
    return out, tries


def allocate(total: int, classes: np.ndarray, rng) -> dict:
    """Split ``total`` points as evenly as possible over ``classes`` (random remainder)."""
    classes = np.asarray(classes)
    if total <= 0:
        return {}
    if not classes.size:
        raise NoSeeds("no class has seeds")
    base, extra = divmod(int(total), len(classes))
    counts = {int(c): base for c in classes}
    for c in rng.choice(classes, size=extra, replace=False):
        counts[int(c)] += 1
    return counts


def generate(Z_test: np.ndarray, y_test: np.ndarray, regions: Regions, mix, size: int, *,
             seed: int, step: float = 0.1, max_tries: int = 12) -> dict:
    """Generate one coverage-guided test set of ``size`` features at ``mix = (c, b)`` percent
    (Algorithm 1): Z, y (the seeds' labels), origin ("c"/"b"), seed indices, acceptance."""
    rng = np.random.default_rng(seed)
    y_test = np.asarray(y_test, dtype=np.int64)
    n_c = int(round(size * mix[0] / 100.0))
    parts = []
    for region, n, code in (("centroid", n_c, "c"), ("boundary", int(size) - n_c, "b")):
        if n <= 0:
            continue
        member = regions.inside(region, Z_test, y_test)
        seeded = np.unique(y_test[member])
        if not seeded.size:
            raise NoSeeds(f"the test set has no {region} point (needed by mix {mix_name(mix)})")
        counts = allocate(n, seeded, rng)
        idx = np.concatenate([rng.choice(np.flatnonzero(member & (y_test == c)), size=k)
                              for c, k in sorted(counts.items()) if k])
        Zg, tries = perturb_within(Z_test[idx], y_test[idx], region, regions, rng, step=step,
                                   max_tries=max_tries)
        parts.append((Zg, y_test[idx], np.full(len(idx), code), idx, tries))
    Z, y, origin, seed_index, tries = (np.concatenate(p) for p in zip(*parts))
    return {"Z": Z, "y": y, "origin": origin, "seed_index": seed_index,
            "unperturbed": int((tries > max_tries).sum()),
            "mean_tries": float(tries.mean()) if tries.size else 0.0}


def coverage_guided_accuracy(acc_by_mix: dict) -> Optional[float]:
    """Return the mean of the mixes' accuracies (None if any mix has none)."""
    vals = list(acc_by_mix.values())
    return None if not vals or any(v is None for v in vals) else float(np.mean(vals))


def train_decoder(Z: np.ndarray, images: np.ndarray, *, seed: int, epochs: int = 6,
                  width: int = 16, batch_size: int = 64, lr: float = 2e-3):
    """Train an up-convolutional decoder from features to images in [0, 1] (Dosovitskiy &
    Brox, 2016, in small: docs/coverage.md); return it."""
    import torch
    from torch import nn

    Z, images = np.asarray(Z, dtype=np.float32), np.asarray(images, dtype=np.float32)
    C, H, W = images.shape[1:]
    h0, w0 = -(-H // 4), -(-W // 4)
    mean, std = Z.mean(axis=0), Z.std(axis=0) + 1e-6

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.from_numpy(mean))
            self.register_buffer("std", torch.from_numpy(std))
            self.fc = nn.Sequential(nn.Linear(Z.shape[1], 256), nn.ReLU(),
                                    nn.Linear(256, 2 * width * h0 * w0), nn.ReLU())
            self.up = nn.Sequential(
                nn.ConvTranspose2d(2 * width, width, 4, stride=2, padding=1), nn.ReLU(),
                nn.ConvTranspose2d(width, C, 4, stride=2, padding=1))

        def forward(self, z):  # logits of the pixels
            h = self.fc((z - self.mean) / self.std).view(len(z), 2 * width, h0, w0)
            return self.up(h)[:, :, :H, :W]

    torch.manual_seed(seed)
    device = torch_device()  # the trial's device
    dec = Decoder().to(device)
    opt = torch.optim.Adam(dec.parameters(), lr=lr)
    Zt, It = torch.from_numpy(Z), torch.from_numpy(images)
    gen = torch.Generator().manual_seed(seed)
    loss_fn = nn.BCEWithLogitsLoss()
    dec.train()
    for _ in range(int(epochs)):
        order = torch.randperm(len(Zt), generator=gen)
        for s in range(0, len(Zt), batch_size):
            b = order[s:s + batch_size]
            loss = loss_fn(dec(Zt[b].to(device)), It[b].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    dec.eval()
    return dec


def decode(decoder, Z: np.ndarray) -> np.ndarray:
    """Return the decoder's images (n, C, H, W) in [0, 1] for features ``Z``."""
    import torch

    Z = np.asarray(Z, dtype=np.float32)
    device = module_device(decoder)
    with torch.inference_mode():
        parts = [torch.sigmoid(decoder(torch.from_numpy(Z[s:s + EVAL_BATCH]).to(device)))
                 .cpu().numpy() for s in range(0, max(len(Z), 1), EVAL_BATCH)]
    return np.concatenate(parts)


# Fill of a cell with nothing to show (a class with no seed in a region): distinct from the white
# gaps between cells and from the black background of MNIST-like images.
MISSING_GREY = 200


def png_strip(images: np.ndarray, *, scale: Optional[int] = None, gap: int = 1) -> str:
    """Return one row of images (n, C, H, W) in [0, 1] as a base64 PNG (None -> a grey cell).

    Pixels are enlarged ``scale`` times (default: to at least 32 pixels a side, at least 2x).
    """
    from PIL import Image

    cells = [None if im is None else np.asarray(im, dtype=np.float64) for im in images]
    shape = next((c.shape for c in cells if c is not None), None)
    if shape is None:
        return ""
    C, H, W = shape
    scale = int(scale or max(2, -(-32 // H)))
    h, w = H * scale, W * scale
    canvas = np.full((h, len(cells) * (w + gap) - gap, 3), 255, dtype=np.uint8)
    for j, cell in enumerate(cells):
        if cell is None:
            canvas[:, j * (w + gap): j * (w + gap) + w] = MISSING_GREY
            continue
        px = np.clip(cell, 0.0, 1.0)
        px = np.repeat(px, 3, axis=0) if C == 1 else px[:3]
        px = np.kron(np.transpose(px, (1, 2, 0)), np.ones((scale, scale, 1)))
        canvas[:, j * (w + gap): j * (w + gap) + w] = np.round(255 * px).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(canvas, "RGB").save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")
