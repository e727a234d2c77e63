"""Frozen descriptions of the things plugins register.

A plugin never hands robench a live object at registration time, only a spec whose callables
build the real thing when a run needs it; that keeps ``robench list`` fast (no torch import)
and lets a worker process rebuild any component from its name alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from robench.data import Dataset

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def check_slug(name: str) -> str:
    """Return ``name`` if it is a lowercase slug, else raise ValueError."""
    if not isinstance(name, str) or not _SLUG.match(name):
        raise ValueError(
            f"component name {name!r} is not a lowercase slug (letters, digits and '-')"
        )
    return name


class Classifier(Protocol):
    """What a model's ``build`` returns: a small scikit-learn-like estimator."""

    def fit(self, X: "np.ndarray", y: "np.ndarray", X_val: "np.ndarray", y_val: "np.ndarray") -> "Classifier":
        """Train on (X, y); use only (X_val, y_val) for early stopping and selection."""

    def predict(self, X: "np.ndarray") -> "np.ndarray":
        """Return integer class predictions for X."""


@dataclass(frozen=True)
class ModelContext:
    """What a model factory is told about the data it will be trained on."""

    n_features: int
    n_classes: int
    image_shape: Optional[tuple]  # (channels, height, width) or None for tabular data
    seed: int
    train: dict = field(default_factory=dict)  # training budget from the profile


@dataclass(frozen=True)
class DatasetSpec:
    """A data set: ``load()`` returns a validated :class:`robench.data.Dataset`."""

    name: str
    load: Callable[[], "Dataset"]
    description: str
    version: str = "1"
    has_sources: bool = False
    is_image: bool = False
    plugin: str = ""
    image_shape: Optional[tuple] = None  # (C, H, W) when known without loading; read by ModelSpec.image_shapes

    def __post_init__(self):
        check_slug(self.name)


@dataclass(frozen=True)
class ModelSpec:
    """A classifier: ``build(ModelContext)`` returns a fresh, untrained :class:`Classifier`."""

    name: str
    build: Callable[[ModelContext], Classifier]
    description: str
    version: str = "1"
    requires_image: bool = False
    plugin: str = ""
    image_shapes: tuple = ()  # non-empty: the only (C, H, W) image shapes the model accepts
    in_default_run: bool = True  # False: opt-in (slow); quick-profile runs skip it unless named
    # False: its classifiers have no learned feature space, so metrics that need one
    # (MetricSpec.needs_features) skip it when planning. None: not declared; the trial finds
    # out from the built classifier (``has_features``) and records "not applicable".
    has_features: Optional[bool] = None

    def __post_init__(self):
        check_slug(self.name)

    def not_applicable_to(self, metric: "MetricSpec") -> Optional[str]:
        """Return why ``metric`` cannot score this model whatever the data, or None."""
        if metric.needs_features and self.has_features is False:
            return (f"metric '{metric.name}' needs a learned feature space and model "
                    f"'{self.name}' declares none (has_features=False)")
        return None

    def not_applicable(self, dataset_spec: DatasetSpec) -> Optional[str]:
        """Return why this model cannot run on the data set, or None if it can."""
        if (self.requires_image or self.image_shapes) and not dataset_spec.is_image:
            return f"model '{self.name}' needs images and data set '{dataset_spec.name}' is tabular"
        if self.image_shapes:
            shapes = " or ".join("x".join(str(d) for d in s) for s in self.image_shapes)
            shape = dataset_spec.image_shape
            if shape is None or tuple(shape) not in {tuple(s) for s in self.image_shapes}:
                has = ("declares no image_shape" if shape is None
                       else "has " + "x".join(str(d) for d in shape) + " images")
                return (f"model '{self.name}' needs {shapes} (CxHxW) images and data set "
                        f"'{dataset_spec.name}' {has}")
        return None


@dataclass(frozen=True)
class ClustererSpec:
    """A clusterer: ``fit_predict(Z, k, seed=..., true_sources=...)`` returns labels in [0, k)."""

    name: str
    fit_predict: Callable[..., "np.ndarray"]
    description: str
    version: str = "1"
    requires_true_sources: bool = False
    plugin: str = ""
    in_default_run: bool = True  # False: opt-in (slow); quick-profile runs skip it unless named

    def __post_init__(self):
        check_slug(self.name)

    def not_applicable(self, dataset_spec: DatasetSpec) -> Optional[str]:
        """Return why this clusterer cannot run on the data set, or None if it can."""
        if self.requires_true_sources and not dataset_spec.has_sources:
            return (
                f"clusterer '{self.name}' needs true source ids and data set "
                f"'{dataset_spec.name}' has none"
            )
        return None


@dataclass(frozen=True)
class Score:
    """One number a metric produced, with everything needed to rank and trace it."""

    dataset: str
    model: str
    clusterer: str  # "" where the score does not depend on a clusterer
    metric: str
    score: str  # the sub-score's name, e.g. "rho" or "acc_exclusive"
    value: Optional[float]
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: Optional[int] = None
    higher_is_better: bool = True
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class MetricSpec:
    """A metric: the trials of one protocol, grouped, turned into scores.

    ``aggregate(group, trials)`` gets the group's key (a dict with dataset, model and, if
    ``uses_clusterer``, clusterer) and the finished trial rows of that group (dicts as stored),
    and returns a list of :class:`Score`.
    """

    name: str
    description: str
    protocol: str
    aggregate: Callable[[dict, list], list]
    definition: str
    higher_is_better: bool = True
    uses_clusterer: bool = True
    version: str = "1"
    plugin: str = ""
    in_default_run: bool = True  # False: opt-in (slow); quick-profile runs skip it unless named
    needs_features: bool = False  # True: models declaring has_features=False are skipped

    def __post_init__(self):
        check_slug(self.name)


@dataclass(frozen=True)
class ExecutorSpec:
    """An executor: ``create(registry, jobs=N, **options)`` returns a :class:`robench.executors.Executor`."""

    name: str
    create: Callable[..., Any]
    description: str
    version: str = "1"
    plugin: str = ""

    def __post_init__(self):
        check_slug(self.name)


@dataclass(frozen=True)
class CorruptionSpec:
    """An image corruption: ``apply(images, severity, seed)`` returns corrupted copies.

    ``images`` is an ``(n, C, H, W)`` float32 array in ``[0, 1]``; ``severity`` is an integer in
    ``1..severities``; the result has the same shape and range and must be a deterministic
    function of (images, severity, seed).
    """

    name: str
    apply: Callable[..., "np.ndarray"]
    description: str
    version: str = "1"
    severities: int = 5
    family: str = ""  # noise | blur | weather | digital | extra
    imagenet_c: bool = True  # one of the 15 ImageNet-C test corruptions (False: the 4 extra)
    plugin: str = ""

    def __post_init__(self):
        check_slug(self.name)

    def not_applicable(self, dataset_spec: DatasetSpec) -> Optional[str]:
        """Return why this corruption cannot run on the data set, or None if it can."""
        if not dataset_spec.is_image:
            return (f"corruption '{self.name}' needs images and data set "
                    f"'{dataset_spec.name}' is tabular")
        return None


#: Component kinds, the hook that registers each, and its spec class.
KINDS = {
    "datasets": ("register_datasets", DatasetSpec),
    "models": ("register_models", ModelSpec),
    "clusterers": ("register_clusterers", ClustererSpec),
    "metrics": ("register_metrics", MetricSpec),
    "executors": ("register_executors", ExecutorSpec),
    "corruptions": ("register_corruptions", CorruptionSpec),
}
