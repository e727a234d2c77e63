"""Frozen descriptions of the things plugins register.

A plugin hands robench a spec whose callables build the real thing when a run needs it, so
``robench list`` stays fast (no torch) and a worker rebuilds any component from its name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Union

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from robench.data import Dataset

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def check_slug(name: str) -> str:
    """Return ``name`` if it is a lowercase slug, else raise ValueError."""
    if not isinstance(name, str) or not _SLUG.match(name):
        raise ValueError(f"component name {name!r} is not a lowercase slug (letters, digits "
                         "and '-')")
    return name


class _Slug:
    """A spec whose ``name`` is a lowercase slug, checked when it is made."""

    def __post_init__(self):
        check_slug(self.name)


class Classifier(Protocol):
    """What a model's ``build`` returns: a small scikit-learn-like estimator."""

    def fit(self, X: "np.ndarray", y: "np.ndarray", X_val: "np.ndarray", y_val: "np.ndarray") -> "Classifier":
        """Train on (X, y); use only (X_val, y_val) for early stopping and selection."""

    def predict(self, X: "np.ndarray") -> "np.ndarray":
        """Return integer class predictions for X."""

    # Optional: ``defer_train_accuracy = False``. robench sets it to True before ``fit`` and
    # then derives a None ``train_accuracy_`` from its prediction on every row (the fit rows
    # included); see robench.learn.train.TorchClassifier and docs/plugin-hooks.md.


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
    # fingerprint() -> the content fingerprint of what load() returns, without loading it
    # where that is cheaper (a file's hash cached by size and mtime); None: the registry
    # loads the data and hashes it (Dataset.fingerprint).
    fingerprint: Optional[Callable[[], str]] = None

    def __post_init__(self):
        # a registered name is a slug; a resolved one is its reference, whose scheme is a slug
        check_slug(self.name.split(":", 1)[0])


@dataclass(frozen=True)
class ResolverSpec(_Slug):
    """A data set reference scheme: ``-d SCHEME:TARGET?KEY=VALUE&...`` needs no plugin per data set.

    ``resolve(target, options)`` returns the :class:`DatasetSpec` (renamed to the canonical
    reference) or raises :class:`robench.data.DatasetError` in one line; ``target`` is absolute
    when ``takes_path``; ``options`` holds only keys listed in ``options``. docs/plugin-hooks.md.
    """

    name: str  # the scheme, e.g. "npz"
    resolve: Callable[[str, dict], DatasetSpec]
    description: str
    syntax: str
    options: tuple = ()
    takes_path: bool = True
    version: str = "1"
    plugin: str = ""


@dataclass(frozen=True)
class ModelResolverSpec(ResolverSpec):
    """A model reference scheme: ``-m SCHEME:TARGET?KEY=VALUE&...`` needs no plugin per model.

    ``resolve`` returns a :class:`ModelSpec` or raises ``ModelReferenceError``; ``examples`` are
    shown by ``robench list models``. docs/plugin-hooks.md has the contract.
    """

    takes_path: bool = False
    examples: tuple = ()


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
    # False: no learned feature space (needs_features metrics skip it); None: the trial
    # asks the built classifier and records "not applicable"
    has_features: Optional[bool] = None
    # the leaderboard's model page: a link (paper, code, card) and trainable parameters (an
    # int, or a text where they depend on the data)
    url: str = ""
    params: Union[int, str, None] = None

    def __post_init__(self):
        check_slug(self.name.split(":", 1)[0])  # as DatasetSpec's
        p = self.params
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, str))
                              or (isinstance(p, int) and p < 0)
                              or (isinstance(p, str) and not p.strip())):
            raise ValueError(f"model '{self.name}': params must be a number of trainable "
                             "parameters (an int >= 0) or a text saying how it depends on "
                             f"the data, not {p!r}")

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
class ClustererSpec(_Slug):
    """A clusterer: ``fit_predict(Z, k, seed=..., true_sources=...)`` returns labels in [0, k)."""

    name: str
    fit_predict: Callable[..., "np.ndarray"]
    description: str
    version: str = "1"
    requires_true_sources: bool = False
    plugin: str = ""
    in_default_run: bool = True  # False: opt-in (slow); quick-profile runs skip it unless named
    # clusters_per_class(dataset, k) -> clusters per class when known without clustering
    # (the oracle's true sources); None: k in every class (expected_clusters)
    clusters_per_class: Optional[Callable[["Dataset", int], Any]] = None

    def not_applicable(self, dataset_spec: DatasetSpec) -> Optional[str]:
        """Return why this clusterer cannot run on the data set, or None if it can."""
        if self.requires_true_sources and not dataset_spec.has_sources:
            return (f"clusterer '{self.name}' needs true source ids and data set "
                    f"'{dataset_spec.name}' has none")
        return None

    def expected_clusters(self, dataset: "Dataset", k: int) -> list:
        """Return how many clusters each class of ``dataset`` gets when k are asked for."""
        if self.clusters_per_class is None:
            return [int(k)] * int(dataset.n_classes)
        return [int(n) for n in self.clusters_per_class(dataset, int(k))]


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
class LeaderboardSection:
    """What a metric adds to each data set's part of the leaderboard (docs/plugin-hooks.md).

    ``build(rows)`` gives the context of the jinja2 ``template`` in ``templates``, or None; the
    static site also reads ``headline``, ``columns``, ``legend``, ``plots``, ``pseudo_models``
    and ``ranks``.
    """

    build: Callable[[list], Optional[dict]]
    template: str
    templates: str
    title: str = ""
    headline: Optional[Callable[[list], Optional[dict]]] = None
    columns: tuple = ()
    plots: Optional[Callable[[list], list]] = None
    pseudo_models: tuple = ()
    legend: str = ""
    ranks: Optional[Callable[[list], list]] = None


@dataclass(frozen=True)
class PairedComparison:
    """How a metric compares models repeat by repeat, for ``robench run --until decided``.

    ``values(trial)`` gives ``("x", v)``, ``("i", v)`` or None for the ratio ``score``;
    ``interval(score, level)``; ``repeats_knob`` (None: ``--repeats``); ``margin`` (None:
    :data:`robench.stats.sequential.PRECISION`); ``kinds`` (None: every trial kind).
    docs/plugin-hooks.md (``paired``) in full.
    """

    score: str
    values: Callable[[dict], Optional[tuple]]
    interval: Callable[["Score", float], Any]
    repeats_knob: Optional[str] = None
    margin: Optional[float] = None
    kinds: Optional[tuple] = None


@dataclass(frozen=True)
class MetricSpec(_Slug):
    """A metric: the trials of one protocol, grouped, turned into scores.

    ``aggregate(group, trials)`` returns a list of :class:`Score` for the group's key (dataset,
    model and, if ``uses_clusterer``, clusterer) and its finished trial rows. ``report(rows)``
    and ``leaderboard`` replace the generic table, shown in ``display_order``.
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
    # applies_to(dataset_spec, model_spec) -> None, or why the metric cannot score that pair
    applies_to: Optional[Callable[["DatasetSpec", "ModelSpec"], Optional[str]]] = None
    report: Optional[Callable[[list], list]] = None
    leaderboard: Optional[LeaderboardSection] = None
    display_order: int = 100
    # claims(score_rows) -> [robench.stats.claims.Claim] its scores decide (docs/claims.md)
    claims: Optional[Callable[[list], list]] = None
    # the plugin that registered it before a move: score fingerprints keep naming it
    moved_from: str = ""
    # (title, url) of the papers behind it, for the leaderboard's methods page
    references: tuple = ()
    # how ``--until decided`` races its tables (None: run once at the maximum repeats)
    paired: Optional[PairedComparison] = None

    @classmethod
    def from_module(cls, module, *, protocol, **wiring) -> "MetricSpec":
        """Return the spec of the metric ``module`` defines (the family kit's one constructor).

        Reads ``METRIC``, ``VERSION``, ``DEFINITION``, ``DESCRIPTION``, ``aggregate`` (required) and
        the optional names of :data:`_METRIC_MODULE`; ``paired`` where the module defines both
        ``paired_values`` and ``interval_at`` (with ``REPEATS_KNOB``, ``MARGIN``, ``PAIRED_KINDS``).
        ``protocol``: its module or name; ``wiring`` (``report``, ``claims``, ``leaderboard``) wins.
        """
        fields = _module_fields(module, "metric", _METRIC_MODULE)
        pair = [hasattr(module, name) for name in ("paired_values", "interval_at")]
        if any(pair) and not all(pair):
            raise TypeError(f"metric module {module.__name__}: a paired comparison needs both "
                            "paired_values and interval_at")
        if all(pair):
            fields["paired"] = PairedComparison(
                score=module.METRIC, values=module.paired_values, interval=module.interval_at,
                repeats_knob=getattr(module, "REPEATS_KNOB", None),
                margin=getattr(module, "MARGIN", None),
                kinds=getattr(module, "PAIRED_KINDS", None))
        fields["protocol"] = protocol if isinstance(protocol, str) else protocol.NAME
        return cls(**{**fields, **wiring})


#: MetricSpec field -> the name a metric module gives it (MetricSpec.from_module).
_METRIC_MODULE = {
    "name": "METRIC", "version": "VERSION", "definition": "DEFINITION",
    "description": "DESCRIPTION", "aggregate": "aggregate", "higher_is_better": "HIGHER_IS_BETTER",
    "uses_clusterer": "USES_CLUSTERER", "needs_features": "NEEDS_FEATURES",
    "in_default_run": "IN_DEFAULT_RUN", "display_order": "DISPLAY_ORDER",
    "references": "REFERENCES", "moved_from": "MOVED_FROM", "applies_to": "applies_to",
}


class _Unset:
    """The default of a knob that is not set unless asked for (the component decides)."""

    def __repr__(self) -> str:
        return "UNSET"


#: Default of a :class:`Knob` that has no value unless a profile or ``--set`` gives one.
UNSET = _Unset()

#: Knob types: what ``--set SECTION.KEY=VALUE`` accepts for each.
KNOB_TYPES = ("int", "float", "bool", "str", "list", "dict")


@dataclass(frozen=True)
class Knob:
    """One setting of a protocol, changed with ``robench run --set SECTION.NAME=VALUE``.

    Parameters
    ----------
    name : str
        The knob's name within its section.
    type : str
        One of ``int``, ``float``, ``bool``, ``str``, ``list``, ``dict``.
    help : str
        One line saying what it does (``robench knobs`` prints it).
    default : object
        Its value when the run's profile gives none; :data:`UNSET` means it is left out (the
        component that reads it decides).
    profiles : dict
        Profile name -> value, e.g. ``{"quick": 4, "paper": 60}``.
    minimum, maximum : float, optional
        Inclusive bounds of an int or float, or of every number in a list.
    items : str, optional
        The type of a list's items (``int``, ``float``, ``str`` or ``list``).
    choices : tuple, optional
        The values a str knob (or a list of str's items) may take.
    nullable : bool
        Whether ``null`` (None) is a valid value.
    min_items : int
        The fewest items a list may have (e.g. 1 where an empty list would silently mean the
        default).
    """

    name: str
    type: str
    help: str
    default: Any = UNSET
    profiles: dict = field(default_factory=dict)
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    items: Optional[str] = None
    choices: Optional[tuple] = None
    nullable: bool = False
    min_items: int = 0

    def __post_init__(self):
        if not re.match(r"^[a-z][a-z0-9_]*$", self.name):
            raise ValueError(f"knob name {self.name!r} must be lowercase letters, digits, '_'")
        if self.type not in KNOB_TYPES:
            raise ValueError(f"knob {self.name!r}: type must be one of {KNOB_TYPES}, "
                             f"got {self.type!r}")

    def value_for(self, profile: str) -> Any:
        """Return the knob's value in ``profile``, else its :data:`PROFILE_FALLBACK`'s, else default."""
        while profile is not None:
            if profile in self.profiles:
                return self.profiles[profile]
            profile = PROFILE_FALLBACK.get(profile)
        return self.default


#: A profile whose knob values default to another's where a knob gives none for it:
#: ``standard`` is the quick profile with more repeats and epochs (robench.run.config.PROFILES).
PROFILE_FALLBACK = {"standard": "quick"}


@dataclass(frozen=True)
class ProtocolSpec:
    """A protocol: how a metric's trials are planned and run (docs/plugin-hooks.md in full).

    ``plan(combo, cfg, registry)`` returns keyed trial specs; ``run(spec, env)`` runs one trial
    in a worker (a pure function of the spec); ``prepare``, if given, does a combination's
    driver-side work first; protocols in ``after`` run first. ``knobs`` live in ``--set``
    section ``section``. ``run`` may be called twice for one trial (batched training): what it
    does before its first ``fit`` must have no effect outside the trial.
    """

    name: str
    plan: Callable[..., list]
    run: Callable[..., dict]
    description: str
    version: str = "1"
    prepare: Optional[Callable[..., dict]] = None
    after: tuple = ()
    section: str = ""
    knobs: tuple = ()
    check_knobs: Optional[Callable[[dict], None]] = None
    # sources_per_class(cfg) -> k sources ``prepare`` splits each class into (planner check)
    sources_per_class: Optional[Callable[[Any], int]] = None
    preconditions: Optional[Callable[..., Optional[str]]] = None
    plugin: str = ""
    # older versions whose trials this one still runs unchanged (``robench verify`` too)
    trial_versions: tuple = ()
    # partition(spec, dataset, registry) -> (train, val, test) rows of a trial (board checks)
    partition: Optional[Callable[..., tuple]] = None

    def __post_init__(self):
        check_slug(self.name)
        if self.knobs and not re.match(r"^[a-z][a-z0-9_]*$", self.section):
            raise ValueError(f"protocol {self.name!r} declares knobs without a valid section "
                             f"name (lowercase letters, digits, '_'), got {self.section!r}")
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"protocol {self.name!r} declares a knob twice: {names}")

    @classmethod
    def from_module(cls, module, **wiring) -> "ProtocolSpec":
        """Return the spec of the protocol ``module`` defines; a family's ``__init__`` wires it.

        Reads the names of :data:`_PROTOCOL_MODULE`; optional callables come only from ``wiring``.
        """
        return cls(**{**_module_fields(module, "protocol", _PROTOCOL_MODULE), **wiring})


#: ProtocolSpec field -> the name a protocol module gives it (ProtocolSpec.from_module).
_PROTOCOL_MODULE = {
    "name": "NAME", "version": "VERSION", "description": "DESCRIPTION", "plan": "plan",
    "run": "run", "section": "SECTION", "knobs": "KNOBS", "after": "AFTER",
    "trial_versions": "TRIAL_VERSIONS",
}


def _module_fields(module, kind: str, names: dict) -> dict:
    """Return {field: value} of the ``names`` ``module`` defines (the first five are required)."""
    missing = [attr for attr in tuple(names.values())[:5] if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"{kind} module {module.__name__} defines no {', '.join(missing)}")
    fields = {field: getattr(module, attr) for field, attr in names.items()
              if hasattr(module, attr)}
    return {**fields, "version": str(fields["version"])}


@dataclass(frozen=True)
class ExecutorSpec(_Slug):
    """An executor: ``create(registry, jobs=N, **options)`` returns a robench.run.executors.Executor."""

    name: str
    create: Callable[..., Any]
    description: str
    version: str = "1"
    plugin: str = ""


@dataclass(frozen=True)
class CorruptionSpec(_Slug):
    """An image corruption: ``apply(images, severity, seed)`` returns corrupted copies.

    ``images``: ``(n, C, H, W)`` float32 in ``[0, 1]``; ``severity`` in ``1..severities``; the
    result has the same shape and range, deterministic in (images, severity, seed).
    """

    name: str
    apply: Callable[..., "np.ndarray"]
    description: str
    version: str = "1"
    severities: int = 5
    family: str = ""  # noise | blur | weather | digital | extra
    imagenet_c: bool = True  # one of the 15 ImageNet-C test corruptions (False: the 4 extra)
    plugin: str = ""

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
    "protocols": ("register_protocols", ProtocolSpec),
    "executors": ("register_executors", ExecutorSpec),
    "corruptions": ("register_corruptions", CorruptionSpec),
    "resolvers": ("register_dataset_resolvers", ResolverSpec),
    "model-resolvers": ("register_model_resolvers", ModelResolverSpec),
}
