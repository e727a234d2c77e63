"""The clusterer checks (:func:`clusterer_checks`, :func:`check_clusterer`): valid,
reproducible labels on a few well-separated blobs, and clean refusals."""

from __future__ import annotations

import json
import warnings
from typing import Mapping, Optional, Union

import numpy as np

from robench.specs import ClustererSpec
from robench.testing.core import (Case, CheckReport, check_spec_fields, make_checks, plain,
                                  resolve, run_checks, shared, skip)

#: The names of the clusterer checks, in the order they run.
CLUSTERER_CHECKS = ("spec", "fit-predict", "labels", "deterministic", "requires-true-sources",
                    "degenerate-input")


def clusterer_checks(clusterer: Union[str, ClustererSpec], registry=None, *, k: int = 3,
                     seed: int = 0):
    """Yield the checks of one clusterer (:class:`robench.testing.Check`), in order; the
    parameters are :func:`check_clusterer`'s."""
    spec, _ = resolve("clusterers", ClustererSpec, clusterer, registry)
    case = ClustererCase(spec, k=k, seed=seed)
    yield from make_checks(case, "clusterer",
                           ((name, RULES[name]) for name in CLUSTERER_CHECKS))


def check_clusterer(clusterer: Union[str, ClustererSpec], registry=None, *, k: int = 3,
                    seed: int = 0, expected_failures: Optional[Mapping[str, str]] = None,
                    collect_all: bool = False) -> CheckReport:
    """Check that a clusterer returns valid, reproducible labels and fails cleanly.

    Run on ``k`` well-separated blobs of 20 rows; docs/plugin-hooks.md lists what each check of
    :func:`clusterer_checks` verifies.

    Parameters
    ----------
    clusterer : str or ClustererSpec
        The spec, or the name of a clusterer in ``registry``.
    registry : robench.plugins.Registry, optional
        Where names are looked up; default: the process-wide registry.
    k : int
        Requested number of clusters (>= 2).
    seed : int
        The ``seed`` passed to ``fit_predict``.
    expected_failures, collect_all
        As :func:`robench.testing.run_checks` takes them.

    Returns
    -------
    CheckReport
        What the checks found; a failure raises :class:`robench.testing.ConformanceError`.
    """
    return run_checks(clusterer_checks(clusterer, registry, k=k, seed=seed),
                      expected_failures=expected_failures, collect_all=collect_all)


class ClustererCase(Case):
    """One clusterer under check: ``k`` blobs (``Z``, ``truth``) and its labels of them."""

    def __init__(self, spec: ClustererSpec, *, k: int, seed: int):
        super().__init__("clusterer", spec)
        self.k, self.seed = k, seed
        rng = np.random.default_rng(seed)
        truth = np.repeat(np.arange(k), 20)
        Z = (rng.normal(0.0, 6.0, (k, 4))[truth]
             + rng.normal(0.0, 0.5, (truth.size, 4))).astype(np.float32)
        order = rng.permutation(truth.size)
        self.Z, self.truth = Z[order], truth[order]
        self.sources = self.truth if spec.requires_true_sources else None

    def run(self, what: str):
        """Return the labels of the blobs (``what`` names the call in an error)."""
        with self.calling("fit-predict", f"fit_predict on {what}"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. k-means convergence warnings on duplicates
            return self.spec.fit_predict(self.Z, self.k, seed=self.seed,
                                         true_sources=self.sources)

    @shared(owner="fit-predict")
    def labels(self):
        return self.run(f"{len(self.Z)} rows in {self.k} blobs")


def spec_fields(case: ClustererCase) -> None:
    check_spec_fields(case, ("fit_predict",), ("requires_true_sources", "in_default_run"))


def fit_predict(case: ClustererCase) -> None:
    case.labels  # noqa: B018 - it ran


def labels(case: ClustererCase) -> None:
    check_cluster_labels(case, case.labels, len(case.Z), case.k, "labels")


def deterministic(case: ClustererCase) -> None:
    first = case.labels
    again = case.run("the same rows again")
    if not np.array_equal(np.asarray(first), np.asarray(again)):
        case.fail("deterministic", "two calls with the same seed returned different labels",
                  "seed every random step from `seed` (random_state=seed); robench caches "
                  "sources by seed")


def requires_true_sources(case: ClustererCase) -> None:
    spec = case.spec
    if not spec.requires_true_sources:
        skip("requires_true_sources is False (it ran with true_sources=None above)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.fit_predict(case.Z, case.k, seed=case.seed, true_sources=None)
    except ValueError:
        return
    except Exception as exc:  # noqa: BLE001
        case.fail("requires-true-sources", f"without true_sources it raised "
                  f"{type(exc).__name__}: {exc}",
                  "raise ValueError('... needs a data set with true source ids')")
    case.fail("requires-true-sources", "requires_true_sources=True but it ran "
              "without true_sources", "raise ValueError when true_sources is None, "
              "or set requires_true_sources=False")


def degenerate_input(case: ClustererCase) -> None:
    spec, Z, truth, k = case.spec, case.Z, case.truth, case.k
    for what, Zd, td in (("2 distinct rows repeated 6 times", np.repeat(Z[:2], 6, axis=0),
                          np.repeat(truth[:2], 6)),
                         ("2 rows", Z[:2], truth[:2])):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = spec.fit_predict(Zd, k, seed=case.seed,
                                       true_sources=td if spec.requires_true_sources else None)
        except ValueError:
            continue  # a clear refusal is fine: robench records it against the run
        except Exception as exc:  # noqa: BLE001
            case.fail("degenerate-input", f"with k={k} on {what} it raised "
                      f"{type(exc).__name__}: {exc}",
                      "return valid labels or raise ValueError saying k is too large")
        check_cluster_labels(case, got, len(Zd), k, f"labels on {what}")


def check_cluster_labels(case: Case, labels, n: int, k: int, what: str) -> None:
    """Fail rule ``labels`` unless ``labels`` are ``n`` integer labels in ``[0, k)``."""
    fix = "return one integer label in [0, k) per row, e.g. KMeans(...).fit_predict(Z)"
    arr = np.asarray(labels)
    if arr.shape != (n,):
        case.fail("labels", f"{what}: shape {arr.shape} for {n} rows", fix)
    if not np.issubdtype(arr.dtype, np.integer):
        case.fail("labels", f"{what}: dtype {arr.dtype}, not integer", fix)
    if n and (arr.min() < 0 or arr.max() >= k):
        case.fail("labels", f"{what}: values in [{arr.min()}, {arr.max()}] with k={k}", fix)
    info = getattr(labels, "info", None)
    if info is not None:
        try:
            json.dumps(plain(info))
        except (TypeError, ValueError) as exc:
            case.fail("labels", f"Labels.info is not JSON-able: {exc}",
                      "keep info to dicts, lists, strings and numbers")


RULES = {"spec": spec_fields, "fit-predict": fit_predict, "labels": labels,
         "deterministic": deterministic, "requires-true-sources": requires_true_sources,
         "degenerate-input": degenerate_input}
