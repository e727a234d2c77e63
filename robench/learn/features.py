"""Penultimate features of trained models, and reference models cached on disk.

A classifier exposes ``has_features = True`` and ``features(X)`` (docs/plugin-hooks.md). A
torch reference model's weights, training log and features are cached by content key under
``<cache>/reference-models/``, so a rerun rebuilds the model without training it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from robench.data.boundary import check_model_input
from robench.data.cache import cached_arrays, content_key
from robench.learn.devices import module_device, torch_device

#: Rows per call of a non-torch model's ``features`` (torch models batch themselves).
FEATURE_BATCH = 1024
_STATE = "state::"


def feature_support(classifier) -> Optional[str]:
    """Return why ``classifier`` has no feature space, or None if it has one."""
    if not getattr(classifier, "has_features", False) or not callable(
            getattr(classifier, "features", None)):
        return (f"{type(classifier).__name__} has no learned feature space "
                "(has_features is False), so feature-space metrics do not apply")
    return None


def features(classifier, X: np.ndarray, *, key: Optional[str] = None) -> np.ndarray:
    """Return the penultimate features of rows ``X`` (float32), batched; cached if ``key``."""
    reason = feature_support(classifier)
    if reason:
        raise ValueError(reason)
    check_model_input(X, type(classifier).__name__, "rows whose features are read")

    def compute():
        # max(..., 1): an empty X still makes one (empty) call
        Z = classifier.features(X) if _is_torch(classifier) else np.concatenate(
            [np.asarray(classifier.features(X[s:s + FEATURE_BATCH]))
             for s in range(0, max(len(X), 1), FEATURE_BATCH)])
        return {"Z": np.asarray(Z, dtype=np.float32).reshape(len(X), -1)}

    if key is None:
        return compute()["Z"]
    arrays, _ = cached_arrays("features", key, compute)
    return arrays["Z"]


def features_key(model_key: str, X: np.ndarray) -> str:
    """Return the cache key of a model's features on rows ``X``."""
    digest = hashlib.sha256(np.ascontiguousarray(X, dtype=np.float32).tobytes()).hexdigest()[:20]
    return content_key("features", model_key, list(X.shape), digest)


def _is_torch(classifier) -> bool:
    try:
        from robench.learn.train import TorchClassifier
    except ImportError:  # pragma: no cover - torch missing
        return False
    return isinstance(classifier, TorchClassifier)


_META_ATTRS = ("history_", "n_epochs_", "best_epoch_", "train_accuracy_", "val_accuracy_")


def train_reference(classifier, X, y, X_val, y_val, *, key: Optional[str] = None) -> tuple:
    """Fit ``classifier``; return (classifier, hit): a torch one cached under ``key``."""
    if key is None or not _is_torch(classifier):
        return classifier.fit(X, y, X_val, y_val), False
    import torch

    def compute():
        classifier.fit(X, y, X_val, y_val)
        arrays = {f"{_STATE}{k}": v.detach().cpu().contiguous().numpy()
                  for k, v in classifier.module_.state_dict().items()}
        meta = {a: getattr(classifier, a, None) for a in _META_ATTRS}
        arrays["meta"] = np.array(json.dumps(meta))
        return arrays

    arrays, hit = cached_arrays("reference-models", key, compute)
    if hit:
        torch.manual_seed(classifier.seed)
        module = classifier.build_module()
        state = {k[len(_STATE):]: torch.from_numpy(np.array(v)) for k, v in arrays.items()
                 if k.startswith(_STATE)}
        module.load_state_dict(state)
        device = torch_device()
        classifier.module_, classifier.device_ = module.to(device).eval(), str(device)
        for attr, value in json.loads(str(arrays["meta"])).items():
            setattr(classifier, attr, value)
    return classifier, hit


#: Rows per forward pass when encoding or applying a head.
SPACE_BATCH = 1024


@dataclass
class FeatureSpace:
    """A layer of a trained model (its encoder) and the rest of the network (its head)."""

    layer: str  # "last-conv" or "penultimate"
    description: str
    encode: Callable[[np.ndarray], np.ndarray]  # input rows -> features (n, D)
    logits: Callable[[np.ndarray], np.ndarray]  # features -> logits (n, classes)

    def proba(self, Z: np.ndarray) -> np.ndarray:
        """Return the head's softmax probabilities of features ``Z``."""
        return softmax(self.logits(Z))


def softmax(logits: np.ndarray) -> np.ndarray:
    """Return row-wise softmax probabilities (float64)."""
    L = np.asarray(logits, dtype=np.float64)
    L = L - L.max(axis=1, keepdims=True)
    E = np.exp(L)
    return E / E.sum(axis=1, keepdims=True)


def feature_space(classifier) -> tuple:
    """Return (FeatureSpace, None) for a fitted classifier, or (None, why it has none)."""
    own = getattr(classifier, "coverage_space", None)
    if callable(own):
        return own(), None
    module = getattr(classifier, "module_", None)
    if module is None:
        return None, (f"{type(classifier).__name__} has no learned feature space with a head "
                      "to evaluate, so a metric on its feature space does not apply")
    import torch

    if callable(getattr(module, "conv_features", None)) and callable(
            getattr(module, "from_conv_features", None)):
        enc, head, layer = module.conv_features, module.from_conv_features, "last-conv"
        desc = "output of the last convolutional block (after ReLU and pooling), flattened"
    elif callable(getattr(module, "features", None)) and isinstance(
            getattr(module, "head", None), torch.nn.Module):
        enc, head, layer = module.features, module.head, "penultimate"
        desc = "penultimate layer (input of the final linear layer)"
    else:
        return None, (f"{type(module).__name__} exposes neither conv_features/from_conv_features"
                      " nor features/head, so a metric on its feature space does not apply")

    def batched(fn):
        def apply(A):
            module.eval()
            device = module_device(module)
            A = np.asarray(A, dtype=np.float32)
            with torch.inference_mode():
                parts = [fn(torch.from_numpy(A[s:s + SPACE_BATCH]).to(device)).reshape(
                    len(A[s:s + SPACE_BATCH]), -1).cpu().numpy()
                    for s in range(0, max(len(A), 1), SPACE_BATCH)]
            return np.concatenate(parts).astype(np.float32, copy=False)
        return apply

    return FeatureSpace(layer, desc, batched(enc), batched(head)), None
