"""Models by name from timm: ``-m timm:ARCH[?pretrained=0|1][&min_size=N][&size=N]``.

``timm.create_model(ARCH, num_classes=0, in_chans=C)`` plus a linear head, trained by
:class:`robench.learn.train.TorchClassifier`; features are timm's pre-logits; pretrained
weights come from the local cache only. docs/data-and-models.md has the rules and why.
"""

from __future__ import annotations

import difflib
import functools
import os
from urllib.parse import urlparse

from robench import hookimpl
from robench.data.model_references import ModelReferenceError
from robench.specs import ModelContext, ModelResolverSpec, ModelSpec

#: Shorter image side below which inputs are upsampled, unless ``min_size`` says otherwise.
DEFAULT_MIN_SIZE = 32
#: Curated examples ``robench list models`` shows (any name ``timm.list_models()`` gives works).
EXAMPLES = ("timm:resnet18", "timm:convnext_atto", "timm:efficientnet_b0",
            "timm:mobilenetv3_small_050", "timm:vit_tiny_patch16_224",
            "timm:resnet18?pretrained=1", "timm:test_resnet")
SYNTAX = "timm:ARCH[?pretrained=0|1][&min_size=N][&size=N]"
#: Weight file names timm reads from a Hugging Face hub repository, preferred first.
HUB_FILES = ("model.safetensors", "pytorch_model.bin", "open_clip_model.safetensors",
             "open_clip_pytorch_model.bin")


#: Largest input side ``size``/``min_size`` may ask for: a mini-batch of 64 RGB images at
#: 2048x2048 is 3.2 GB of float32 before any activation; larger is refused up front.
MAX_SIZE = 2048


def _int_option(reference: str, key: str, value: str, minimum: int) -> int:
    if (not value.isdigit() or len(value) > 6 or str(int(value)) != value
            or not minimum <= int(value) <= MAX_SIZE):
        raise ModelReferenceError(f"{reference}: {key} must be an integer from {minimum} to "
                                  f"{MAX_SIZE} (pixels) written without leading zeros, got "
                                  f"'{value[:40]}'")
    return int(value)


def parse_options(arch: str, options: dict) -> dict:
    """Return the checked options of ``timm:ARCH?...``: pretrained, min_size, size."""
    ref = f"timm:{arch}"
    pretrained = options.get("pretrained", "0")
    if pretrained not in ("0", "1"):
        raise ModelReferenceError(f"{ref}: pretrained must be 0 or 1, got '{pretrained}'")
    out = {"pretrained": pretrained == "1",
           "min_size": _int_option(ref, "min_size", options.get("min_size", str(DEFAULT_MIN_SIZE)), 1),
           "size": None}
    if "size" in options:
        out["size"] = _int_option(ref, "size", options["size"], 1)
        if "min_size" in options:
            raise ModelReferenceError(f"{ref}: give size or min_size, not both")
    return out


def input_size(image_shape: tuple, *, min_size: int, size=None) -> tuple:
    """Return the (H, W) that ``image_shape`` is resized to: ``size``, or up to ``min_size``."""
    _, h, w = (int(v) for v in image_shape)
    if size:
        return int(size), int(size)
    short = min(h, w)
    if short >= min_size:
        return h, w
    scale = min_size / short
    return max(min_size, round(h * scale)), max(min_size, round(w * scale))


def local_weights(arch: str) -> tuple:
    """Return (path, id) of the cached pretrained weights of ``arch`` (HF, torch hub), or raise."""
    import timm

    cfg = timm.models.get_pretrained_cfg(arch)
    if cfg is None or not (cfg.hf_hub_id or cfg.url or cfg.file):
        raise ModelReferenceError(f"timm:{arch}?pretrained=1: timm has no pretrained weights "
                                  f"for '{arch}' (drop pretrained=1, or pick a name from "
                                  "timm.list_pretrained())")
    if cfg.file and os.path.isfile(cfg.file):
        return cfg.file, os.path.basename(cfg.file)
    tried = []
    if cfg.hf_hub_id:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - a timm dependency
            try_to_load_from_cache = None
        if try_to_load_from_cache is not None:
            cache = os.environ.get("HF_HUB_CACHE") or None
            for name in (cfg.hf_hub_filename,) if cfg.hf_hub_filename else HUB_FILES:
                found = try_to_load_from_cache(cfg.hf_hub_id, name, cache_dir=cache)
                if isinstance(found, str) and os.path.isfile(found):
                    return found, cfg.hf_hub_id
            tried.append(f"the Hugging Face hub cache ({cache or 'default'}) for {cfg.hf_hub_id}")
    if cfg.url:
        import torch.hub

        path = os.path.join(torch.hub.get_dir(), "checkpoints",
                            os.path.basename(urlparse(cfg.url).path))
        if os.path.isfile(path):
            return path, os.path.basename(path)
        tried.append(path)
    raise ModelReferenceError(
        f"timm:{arch}?pretrained=1: the pretrained weights are not in the local cache "
        f"(looked in {'; '.join(tried)}); robench never downloads weights at run time. Fetch "
        f"them once where a network exists: python -c \"import timm; "
        f"timm.create_model('{arch}', pretrained=True)\", or drop pretrained=1")


def make_timm_net(arch: str, image_shape: tuple, n_classes: int, *, pretrained: bool,
                  min_size: int, size=None, weights=None):
    """Return the torch module of ``timm:ARCH``: resize, timm body (no classifier), linear head."""
    import timm
    import torch
    from torch import nn
    from torch.nn import functional as F

    c, h, w = (int(v) for v in image_shape)
    hw = input_size(image_shape, min_size=min_size, size=size)

    class TimmNet(nn.Module):
        """A timm network on flat image rows: resized, (normalised), body, linear head."""

        def __init__(self):
            super().__init__()
            self.image_shape, self.input_hw, self.arch = (c, h, w), hw, arch
            kwargs = {}
            fixed = timm.models.get_pretrained_cfg(arch)
            if fixed is not None and fixed.fixed_input_size:
                kwargs["img_size"] = hw
            if pretrained:
                # the file by path: timm reads it, no hub lookup, no network
                kwargs["pretrained_cfg_overlay"] = {"file": weights, "source": ""}
            try:
                self.body = timm.create_model(arch, pretrained=bool(pretrained), num_classes=0,
                                              in_chans=c, **kwargs)
            except Exception as exc:  # noqa: BLE001 - re-raised with what was asked
                raise ValueError(f"timm could not build '{arch}' for {c}x{h}x{w} images "
                                 f"resized to {hw[0]}x{hw[1]}: {type(exc).__name__}: {exc} "
                                 "(try timm:ARCH?size=N)") from exc
            cfg = self.body.pretrained_cfg if pretrained else {}
            mean, std = cfg.get("mean"), cfg.get("std")
            self.normalise = bool(pretrained and mean and std)
            if self.normalise:
                if c != len(mean):
                    mean, std = [sum(mean) / len(mean)] * c, [sum(std) / len(std)] * c
                self.register_buffer("mean", torch.tensor(mean).view(1, c, 1, 1))
                self.register_buffer("std", torch.tensor(std).view(1, c, 1, 1))
            was_training = self.body.training
            self.body.eval()
            with torch.no_grad():  # the feature width, from the model itself
                width = self.features(torch.zeros(1, c * h * w)).shape[1]
            self.body.train(was_training)
            self.feature_width = int(width)
            self.head = nn.Linear(self.feature_width, n_classes)

        def images(self, x):
            """Return flat rows ``x`` as (n, C, H', W') network inputs (resized, normalised)."""
            x = x.reshape(x.shape[0], c, h, w)
            if (h, w) != hw:
                x = F.interpolate(x, size=hw, mode="bilinear", align_corners=False)
            if self.normalise:
                x = (x - self.mean) / self.std
            return x

        def features(self, x):
            """Return timm's pooled pre-logits features of flat image rows ``x``."""
            body = self.body
            return body.forward_head(body.forward_features(self.images(x)), pre_logits=True)

        def forward(self, x):
            """Return class logits of flat image rows ``x``."""
            return self.head(self.features(x))

    return TimmNet()


def build_timm(ctx: ModelContext, *, arch: str, options: dict, weights=None):
    """Return an untrained TorchClassifier around ``timm:ARCH`` for the trial ``ctx``."""
    from robench.learn.train import TorchClassifier

    if ctx.image_shape is None:
        raise ValueError(f"timm:{arch} needs image data (ModelContext.image_shape is None)")

    def module(ctx):
        return make_timm_net(arch, ctx.image_shape, ctx.n_classes,
                             pretrained=options["pretrained"], min_size=options["min_size"],
                             size=options["size"], weights=weights)

    return TorchClassifier.from_context(ctx, module)


def resolve_timm(target: str, options: dict) -> ModelSpec:
    """Return the ModelSpec of ``timm:ARCH?...`` (timm is imported here, not at start-up)."""
    opts = parse_options(target, options)
    try:
        import timm
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ModelReferenceError(f"timm:{target} needs timm: pip install timm ({exc})") from None
    if not timm.is_model(target):
        close = difflib.get_close_matches(target, timm.list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ModelReferenceError(f"timm has no architecture '{target}'.{hint} Any name from "
                                  "timm.list_models() works, e.g. timm:resnet18")
    version = f"1+timm-{timm.__version__}"
    weights = None
    if opts["pretrained"]:
        weights, weights_id = local_weights(target)
        version += f"+{weights_id}"
    shape = f"{opts['size']}x{opts['size']}" if opts["size"] else \
        f"upsampled to >= {opts['min_size']} px"
    return ModelSpec(
        "timm",  # replaced by the canonical reference
        functools.partial(build_timm, arch=target, options=opts, weights=weights),
        f"timm {target} ({'pretrained, local cache' if opts['pretrained'] else 'random init'}"
        f", inputs {shape}), linear head, Adam, early stopping on validation; "
        "features: timm's pre-logits", version=version, requires_image=True, has_features=True)


@hookimpl
def register_model_resolvers(register):
    """Register the ``timm:`` model reference scheme."""
    register(ModelResolverSpec(
        "timm", resolve_timm, "any timm architecture (timm.list_models()); random init unless "
        "pretrained=1 and the weights are in the local cache (never downloaded); images "
        f"upsampled to >= min_size px (default {DEFAULT_MIN_SIZE}) or resized to size x size; "
        "features from timm's pre-logits", syntax=SYNTAX,
        options=("pretrained", "min_size", "size"), examples=EXAMPLES, version="1",
    ))
