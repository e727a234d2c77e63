"""The data set checks (:func:`dataset_checks`, :func:`check_dataset`) and the small
synthetic data set the model checks train on (:func:`synthetic_dataset`)."""

from __future__ import annotations

from typing import Mapping, Optional, Union

import numpy as np

from robench.data import Dataset, DatasetError, validate
from robench.specs import DatasetSpec
from robench.testing.core import (Case, CheckReport, Unavailable, check_spec_fields,
                                  make_checks, resolve, run_checks, shared, skip)

#: The names of the data set checks, in the order they run.
DATASET_CHECKS = ("spec", "load", "arrays", "sources", "image-shape", "image-range",
                  "deterministic")


def synthetic_dataset(n_classes: int = 3, n_per_class: int = 40, *, n_features: int = 10,
                      image_shape: Optional[tuple] = None, n_sources: int = 2, seed: int = 0,
                      name: str = "robench-testing") -> Dataset:
    """Return a small, easy data set: well-separated classes, each made of ``n_sources`` sources.

    Parameters
    ----------
    n_classes, n_per_class : int
        Classes and rows per class (rows are shuffled).
    n_features : int
        Width of a tabular data set; ignored when ``image_shape`` is given.
    image_shape : tuple of int or None
        ``(C, H, W)``: rows are images with values in [0, 1] (a random pattern per class and a
        small shift per source, plus noise).
    n_sources : int
        True sources per class (``Dataset.sources``), as robench's oracle clusterer reads them.
    seed : int
        Seeds everything.
    name : str
        The data set's name.

    Returns
    -------
    robench.data.Dataset
    """
    rng = np.random.default_rng(seed)
    groups = np.arange(n_classes * n_per_class) % (n_classes * n_sources)
    rng.shuffle(groups)
    y = groups // n_sources
    if image_shape is not None:
        image_shape = tuple(int(s) for s in image_shape)
        d = int(np.prod(image_shape))
        proto = rng.uniform(0.0, 1.0, (n_classes, d))
        shift = rng.normal(0.0, 0.05, (n_classes * n_sources, d))
        X = np.clip(proto[y] + shift[groups] + rng.normal(0.0, 0.1, (y.size, d)), 0.0, 1.0)
    else:
        means = rng.normal(0.0, 3.0, (n_classes, n_features))
        shift = rng.normal(0.0, 0.5, (n_classes * n_sources, n_features))
        X = means[y] + shift[groups] + rng.normal(0.0, 0.5, (y.size, n_features))
    return Dataset(name, X, y, sources=groups, image_shape=image_shape)


def dataset_checks(dataset: Union[str, DatasetSpec], registry=None):
    """Yield the checks of one data set, in order (``load()`` runs once, then once again)."""
    spec, _ = resolve("datasets", DatasetSpec, dataset, registry)
    case = DatasetCase("data set", spec)
    yield from make_checks(case, "dataset", ((name, RULES[name]) for name in DATASET_CHECKS))


def check_dataset(dataset: Union[str, DatasetSpec], registry=None, *,
                  expected_failures: Optional[Mapping[str, str]] = None,
                  collect_all: bool = False) -> CheckReport:
    """Check that a data set loads as robench expects, and the same every time.

    docs/plugin-hooks.md lists what each check of :func:`dataset_checks` verifies.

    Parameters
    ----------
    dataset : str or DatasetSpec
        The spec, or the name of a data set in ``registry``.
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.
    expected_failures, collect_all
        As :func:`robench.testing.run_checks` takes them.

    Returns
    -------
    CheckReport
        What the checks found; a failure raises :class:`robench.testing.ConformanceError`.
    """
    return run_checks(dataset_checks(dataset, registry), expected_failures=expected_failures,
                      collect_all=collect_all)


class DatasetCase(Case):
    """One data set under check; ``loaded`` is its first ``load()``."""

    @shared(owner="load")
    def loaded(self):
        with self.calling("load", "load()"):
            return self.spec.load()

    @property
    def data(self) -> Dataset:
        """The loaded data set, or :class:`Unavailable` if ``load()`` returned no Dataset."""
        ds = self.loaded
        if not isinstance(ds, Dataset):
            raise Unavailable("load")
        return ds


def spec_fields(case: DatasetCase) -> None:
    spec = case.spec
    check_spec_fields(case, ("load",), ("has_sources", "is_image"))
    if spec.image_shape is not None and len(tuple(spec.image_shape)) != 3:
        case.fail("spec-image-shape", f"image_shape is {spec.image_shape!r}, not (C, H, W)")


def loads(case: DatasetCase) -> None:
    ds, spec = case.loaded, case.spec
    if not isinstance(ds, Dataset):
        case.fail("load", f"load() returned {type(ds).__name__}, not a robench.data.Dataset",
                  "return robench.data.Dataset(name, X, y, sources=..., image_shape=...)")
    if ds.name != spec.name:
        case.fail("load", f"load() returned a Dataset named {ds.name!r}",
                  f"name it {spec.name!r}, as registered: messages and caches use it")


def arrays(case: DatasetCase) -> None:
    ds = case.data
    try:
        validate(ds)  # again: a plugin may have changed the arrays after construction
    except DatasetError as exc:
        case.fail("arrays", str(exc))
    if ds.X.dtype != np.float32 or ds.y.dtype != np.int64:
        case.fail("arrays", f"X is {ds.X.dtype} and y is {ds.y.dtype}; expected float32 and "
                  "int64", "let robench.data.Dataset convert them; do not replace them later")


def sources(case: DatasetCase) -> None:
    ds, spec = case.data, case.spec
    if spec.has_sources:
        if ds.sources is None:
            case.fail("sources", "has_sources=True but load() returned no sources",
                      "pass sources=<one integer id per row> to Dataset, or set "
                      "has_sources=False")
        per_class = [np.unique(ds.sources[ds.y == c]).size for c in range(ds.n_classes)]
        thin = [c for c, m in enumerate(per_class) if m < 2]
        if thin:
            case.fail("sources", f"classes {thin} have fewer than 2 true sources; a "
                      "source-exclusive partition holds one whole source of every class out",
                      "give every class at least two sources")
    elif ds.sources is not None:
        case.fail("sources", "load() returned sources but the spec says has_sources=False",
                  "set has_sources=True so the oracle clusterer can use them")
    else:
        skip("has_sources is False")


def image_shape(case: DatasetCase) -> None:
    ds, spec = case.data, case.spec
    if spec.is_image:
        if ds.image_shape is None:
            case.fail("image-shape", "is_image=True but the Dataset has no image_shape",
                      "pass image_shape=(C, H, W) to Dataset")
        if spec.image_shape is not None and tuple(spec.image_shape) != tuple(ds.image_shape):
            case.fail("image-shape", f"DatasetSpec.image_shape {tuple(spec.image_shape)} "
                      f"differs from the loaded image_shape {tuple(ds.image_shape)}",
                      "declare the shape load() returns; models are planned by it")
    elif ds.image_shape is not None or spec.image_shape is not None:
        case.fail("image-shape", "the data set has an image_shape but is_image=False",
                  "set is_image=True (image models are planned by it) or drop image_shape")
    else:
        skip("tabular data set (is_image is False)")


def image_range(case: DatasetCase) -> None:
    ds = case.data
    if not case.spec.is_image:
        skip("tabular data set (is_image is False)")
    if ds.X.min() < 0 or ds.X.max() > 1:
        case.fail("image-range", f"image values span [{ds.X.min():.3g}, "
                  f"{ds.X.max():.3g}]; images are stored in [0, 1]",
                  "scale the pixels to [0, 1] (corruptions and attacks assume it)")


def deterministic(case: DatasetCase) -> None:
    ds = case.data
    with case.calling("deterministic", "a second load()"):
        again = case.spec.load()
    if not isinstance(again, Dataset) or again.fingerprint() != ds.fingerprint():
        case.fail("deterministic", "two calls of load() returned different data",
                  "seed any randomness in load(); the fingerprint keys every cache")


RULES = {"spec": spec_fields, "load": loads, "arrays": arrays, "sources": sources,
         "image-shape": image_shape, "image-range": image_range,
         "deterministic": deterministic}
