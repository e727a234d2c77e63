"""Conformance checks for plugin components, in the style of scikit-learn's ``check_estimator``.

:func:`check_model`, :func:`check_dataset`, :func:`check_clusterer` and :func:`check_metric`
run one component on small data the way robench runs it and raise :class:`ConformanceError`
(an ``AssertionError``) naming the component, the broken rule and the fix, or return a
:class:`CheckReport`; :func:`check_all` checks a registry or one plugin. Each rule is a named
:class:`Check` that ``model_checks`` and its siblings yield, over work shared by a component's
checks; :func:`parametrize_with_checks` makes each its own pytest test. docs/plugin-hooks.md
shows a plugin's tests and the ``expected_failures`` and ``collect_all`` options.

One module per kind over ``core`` (the error, the report, the check, the runner); ``suite``
spans the kinds. Importing this package is cheap (numpy only).
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
