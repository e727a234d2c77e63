"""Conformance checks for plugin components, in the style of scikit-learn's ``check_estimator``.

``check_model``, ``check_dataset``, ``check_clusterer`` and ``check_metric`` raise
:class:`ConformanceError` (component, rule, fix) or return a :class:`CheckReport`;
``check_all`` checks a registry, ``parametrize_with_checks`` makes each check a pytest test
(docs/plugin-hooks.md). One module per kind over ``core``; importing it is cheap (numpy only).
"""

from robench.testing.clusterers import CLUSTERER_CHECKS, check_clusterer, clusterer_checks
from robench.testing.core import (Check, CheckReport, CheckSkipped, ConformanceError,
                                  Unavailable, run_checks)
from robench.testing.datasets import (DATASET_CHECKS, check_dataset, dataset_checks,
                                      synthetic_dataset)
from robench.testing.metrics import METRIC_CHECKS, check_metric, metric_checks
from robench.testing.models import MODEL_CHECKS, UNUSED_TRAIN_KNOBS, check_model, model_checks
from robench.testing.suite import check_all, checks_of, parametrize_with_checks

__all__ = [
    "CLUSTERER_CHECKS", "Check", "CheckReport", "CheckSkipped", "ConformanceError",
    "DATASET_CHECKS", "METRIC_CHECKS", "MODEL_CHECKS", "UNUSED_TRAIN_KNOBS", "Unavailable",
    "check_all", "check_clusterer", "check_dataset", "check_metric", "check_model",
    "checks_of", "clusterer_checks", "dataset_checks", "metric_checks", "model_checks",
    "parametrize_with_checks", "run_checks", "synthetic_dataset",
]
