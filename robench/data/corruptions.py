"""Image corruptions (ImageNet-C and its 4 extra), applied to a data set's images, cached.

Each ``imagecorruptions-imaug`` function is called as its ``corrupt()`` does: grey images
replicated to RGB and back by ITU-R 601 luma, images under 32 px resized to 32 px and back,
numpy's global generator seeded per (corruption, severity, seed) and restored; ``spatter``
is a fixed copy (:func:`spatter`). Corrupted sets are cached by content key, shared by
workers through per-corruption lock files.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from pathlib import Path

import numpy as np

# The finiteness checks live at the model boundary (robench.data.boundary); re-exported here.
from robench.data.boundary import NonFiniteError, check_finite, nonfinite_rows  # noqa: F401
from robench.data.cache import cache_dir, cached_arrays, content_key
from robench.stats.seeds import derived_seed

#: The 15 ImageNet-C test corruptions, by family, then the 4 extra ("validation") ones.
IMAGENET_C = {
    "noise": ("gaussian_noise", "shot_noise", "impulse_noise"),
    "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"),
    "weather": ("snow", "frost", "fog", "brightness"),
    "digital": ("contrast", "elastic_transform", "pixelate", "jpeg_compression"),
}
EXTRA = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
SEVERITIES = (1, 2, 3, 4, 5)
#: Images smaller than this on a side are upscaled before corrupting (the library's minimum).
MIN_SIDE = 32
#: Functions that take an explicit ``seed`` argument besides the global generator.
_SEEDED = {"glass_blur", "impulse_noise"}
_NAMESPACE = "corruptions"


def all_names() -> list:
    """Return the 19 library names: the 15 ImageNet-C corruptions, then the 4 extra."""
    return [n for fam in IMAGENET_C.values() for n in fam] + list(EXTRA)


def _seed_for(name: str, severity: int, seed: int) -> int:
    return derived_seed(seed, all_names().index(name) + 1, severity)


class _CachedCv2:
    """cv2 with ``imread`` memoised: frost reads its texture from disk on every image."""

    def __init__(self, cv2):
        self._cv2 = cv2

    def __getattr__(self, name):
        return getattr(self._cv2, name)

    @functools.lru_cache(maxsize=16)  # noqa: B019 - six texture files, one instance per process
    def imread(self, path, *args):
        return self._cv2.imread(str(path), *args)


@contextlib.contextmanager
def _library(name: str):
    """Yield the library's function ``name`` with frost's texture reads memoised."""
    import imagecorruptions.corruptions as lib
    from imagecorruptions import corruption_dict

    fn = spatter if name == "spatter" else corruption_dict[name]
    if name != "frost":
        yield fn
        return
    original = lib.cv2
    lib.cv2 = _CACHED_CV2.setdefault("cv2", _CachedCv2(original))
    try:
        yield fn
    finally:
        lib.cv2 = original


_CACHED_CV2: dict = {}


def spatter(x, severity: int = 1) -> np.ndarray:
    """Return the library's ``spatter`` of PIL image ``x`` in [0, 255], with the 0/0 fixed.

    A line-for-line copy of ``imagecorruptions.corruptions.spatter`` (imagecorruptions-imaug
    1.1.5; Hendrycks & Dietterich, "Benchmarking Neural Network Robustness to Common
    Corruptions and Perturbations", ICLR 2019, arXiv:1903.12261): the same parameters, the
    same draws from numpy's global generator in the same order, so every image the library
    handles is reproduced bit for bit. One change: in the water branch (severities 1-3) the
    mask ``m`` is divided by its per-channel maximum to peak at 1; where that maximum is 0 no
    liquid reaches any pixel, there is nothing to normalise, and the mask stays 0, so the
    image comes back with no spatter at all (the library computes 0/0 = NaN there and returns
    an all-NaN image). The mud branch (severities 4-5) has no division and is unchanged.
    """
    import cv2
    from imagecorruptions.corruptions import rgb2gray
    from skimage.filters import gaussian

    c = [(0.65, 0.3, 4, 0.69, 0.6, 0),
         (0.65, 0.3, 3, 0.68, 0.6, 0),
         (0.65, 0.3, 2, 0.68, 0.5, 0),
         (0.65, 0.3, 1, 0.65, 1.5, 1),
         (0.67, 0.4, 1, 0.65, 1.5, 1)][severity - 1]
    x_pil = x
    x = np.array(x, dtype=np.float32) / 255.

    liquid_layer = np.random.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    liquid_layer = gaussian(liquid_layer, sigma=c[2])
    liquid_layer[liquid_layer < c[3]] = 0
    if c[5] == 0:
        liquid_layer = (liquid_layer * 255).astype(np.uint8)
        dist = 255 - cv2.Canny(liquid_layer, 50, 150)
        dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
        _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
        dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
        dist = cv2.equalizeHist(dist)
        ker = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])
        dist = cv2.filter2D(dist, cv2.CV_8U, ker)
        dist = cv2.blur(dist, (3, 3)).astype(np.float32)

        m = cv2.cvtColor(liquid_layer * dist, cv2.COLOR_GRAY2BGRA)
        peak = np.max(m, axis=(0, 1))
        # The fix: a channel whose peak is 0 is all 0 (no liquid): leave it 0 instead of 0/0.
        m = np.divide(m, peak, out=np.zeros_like(m), where=peak > 0)
        m *= c[4]
        # water is pale turquoise
        color = np.concatenate((175 / 255. * np.ones_like(m[..., :1]),
                                238 / 255. * np.ones_like(m[..., :1]),
                                238 / 255. * np.ones_like(m[..., :1])), axis=2)
        color = cv2.cvtColor(color, cv2.COLOR_BGR2BGRA)

        if len(x.shape) < 3 or x.shape[2] < 3:
            add_spatter_color = cv2.cvtColor(np.clip(m * color, 0, 1), cv2.COLOR_BGRA2BGR)
            add_spatter_gray = rgb2gray(add_spatter_color)
            return np.clip(x + add_spatter_gray, 0, 1) * 255
        x = cv2.cvtColor(x, cv2.COLOR_BGR2BGRA)
        return cv2.cvtColor(np.clip(x + m * color, 0, 1), cv2.COLOR_BGRA2BGR) * 255

    m = np.where(liquid_layer > c[3], 1, 0)
    m = gaussian(m.astype(np.float32), sigma=c[4])
    m[m < 0.8] = 0
    x_rgb = np.array(x_pil.convert('RGB'))
    # mud brown
    color = np.concatenate((63 / 255. * np.ones_like(x_rgb[..., :1]),
                            42 / 255. * np.ones_like(x_rgb[..., :1]),
                            20 / 255. * np.ones_like(x_rgb[..., :1])), axis=2)
    color *= m[..., np.newaxis]
    if len(x.shape) < 3 or x.shape[2] < 3:
        x *= (1 - m)
        return np.clip(x + rgb2gray(color), 0, 1) * 255
    x *= (1 - m[..., np.newaxis])
    return np.clip(x + color, 0, 1) * 255


def corrupt_images(images: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
    """Return ``images`` (n, C, H, W; C 1 or 3) in [0, 1] corrupted by library corruption ``name``.

    Deterministic given (images, name, severity, seed); raises :class:`NonFiniteError` if the
    input or output holds a NaN or inf.
    """
    import cv2
    from PIL import Image

    images = np.asarray(images, dtype=np.float32)
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise ValueError(f"images must be (n, C, H, W) with C in (1, 3), got {images.shape}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be in 1..5, got {severity}")
    # A NaN input would come out NaN and be blamed on the corruption: name it as the input's.
    check_finite(images, f"input of corruption '{name}' (before corrupting)")
    n, c, h, w = images.shape
    up = min(h, w) < MIN_SIDE
    scale = MIN_SIDE / min(h, w)
    size_up = (max(MIN_SIDE, round(w * scale)), max(MIN_SIDE, round(h * scale))) if up else (w, h)
    s = _seed_for(name, severity, seed)
    out = np.empty_like(images)
    state = np.random.get_state()
    np.random.seed(s)
    try:
        with _library(name) as fn:
            kwargs = {"seed": s} if name in _SEEDED else {}
            for i in range(n):
                img = np.clip(images[i].transpose(1, 2, 0) * 255.0 + 0.5, 0, 255).astype(np.uint8)
                if up:
                    img = cv2.resize(img, size_up, interpolation=cv2.INTER_LINEAR)
                    if img.ndim == 2:
                        img = img[:, :, None]
                if img.shape[2] == 1:
                    img = np.repeat(img, 3, axis=2)
                res = np.asarray(fn(Image.fromarray(img), severity, **kwargs), dtype=np.float32)
                if res.ndim == 2:  # jpeg of a grey PIL image comes back grey
                    res = np.repeat(res[:, :, None], 3, axis=2)
                res = np.clip(res, 0, 255) / 255.0
                if up:
                    res = cv2.resize(res, (w, h), interpolation=cv2.INTER_AREA)
                if c == 1:
                    res = res[:, :, 0] * 0.299 + res[:, :, 1] * 0.587 + res[:, :, 2] * 0.114
                    res = res[:, :, None]
                out[i] = np.clip(res, 0.0, 1.0).transpose(2, 0, 1)
    finally:
        np.random.set_state(state)
    return check_finite(out, f"corruption '{name}' at severity {severity}")


def corrupted_key(fingerprint: str, index_hash: str, corruption: str, version: str,
                  severities, seed: int) -> str:
    """Return the cache key of one corruption's severities applied to a set of images."""
    return content_key("corrupted", fingerprint, index_hash, corruption, version,
                       [int(s) for s in severities], int(seed))


def index_hash(idx) -> str:
    """Return a short content hash of an index array."""
    return content_key("idx", np.asarray(idx, dtype=np.int64).tolist())


def corrupted_sets(images: np.ndarray, specs: list, severities, seed: int, *, fingerprint: str,
                   idx_key: str, poll: float = 0.2, timeout: float = 900.0) -> dict:
    """Return {(corruption name, severity): corrupted images} for every spec, cached.

    One entry per corruption; a worker locks an entry to compute it and collects the ones other
    workers locked once stored; a stale lock is broken after ``timeout`` seconds.
    """
    pending = {sp.name: sp for sp in specs}
    out: dict = {}
    started = time.monotonic()
    severities = [int(s) for s in severities]
    while pending:
        progressed = False
        for name, sp in list(pending.items()):
            key = corrupted_key(fingerprint, idx_key, name, f"{sp.plugin}/{sp.version}",
                                severities, seed)
            path = cache_dir() / _NAMESPACE / f"{key}.npz"
            lock = path.with_suffix(".lock")
            if not path.exists() and not _try_lock(lock, timeout):
                continue
            try:
                arrays = _finite_entry(key, sp, images, severities, seed)
            finally:
                lock.unlink(missing_ok=True)
            out.update({(name, s): arrays[f"s{s}"] for s in severities})
            del pending[name]
            progressed = True
        if pending and not progressed:
            if time.monotonic() - started > 2 * timeout:  # pragma: no cover - defensive
                raise TimeoutError(f"corruptions {sorted(pending)} stayed locked")
            time.sleep(poll)
    return out


def _finite_entry(key: str, sp, images: np.ndarray, severities: list, seed: int) -> dict:
    """Return one corruption's cached severities, computed (and checked finite) if missing.

    A cached entry holding a non-finite value (stored before the check) is recomputed.
    """
    def compute():
        return {f"s{s}": check_finite(
            sp.apply(images, s, seed),
            f"corruption '{sp.name}' (plugin '{sp.plugin}', version {sp.version}) at "
            f"severity {s}") for s in severities}

    arrays, hit = cached_arrays(_NAMESPACE, key, compute)
    if hit and any(nonfinite_rows(a) for a in arrays.values()):
        (cache_dir() / _NAMESPACE / f"{key}.npz").unlink(missing_ok=True)
        arrays, _ = cached_arrays(_NAMESPACE, key, compute)
    return arrays


def _try_lock(lock: Path, timeout: float) -> bool:
    """Create ``lock`` exclusively; return False if another live worker holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > timeout:
                lock.unlink(missing_ok=True)  # its holder died: take over next round
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True
