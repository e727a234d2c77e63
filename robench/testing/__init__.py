"""Conformance checks for plugin components, in the style of scikit-learn's ``check_estimator``.

A plugin's tests can be a few lines::

    from robench.plugins import make_registry
    from robench.testing import check_model

    def test_my_model_follows_the_contract():
        registry = make_registry(modules=["robench_my_model"], load_entrypoints=False)
        check_model("my-model", registry)

:func:`check_model`, :func:`check_dataset`, :func:`check_clusterer` and :func:`check_metric`
run one component on small data the way robench runs it and raise :class:`ConformanceError`
(an ``AssertionError``, so pytest reports a failed assertion) at the first broken rule; the
message names the component and the rule, says what was wrong and how to fix it. On success
they return a :class:`CheckReport` listing the checks that ran and the ones that did not
apply, each with the reason. :func:`check_all` checks every component of a registry, or of one
plugin.

The rules are small named checks that :func:`model_checks`, :func:`dataset_checks`,
:func:`clusterer_checks` and :func:`metric_checks` yield (:class:`Check`), over work shared by
the checks of a component and done on first need (the model's two trainings, the metric's
tiny run). Every ``check_*`` takes ``expected_failures={name: reason}`` (known gaps: recorded,
not raised; one that passes is a failure) and ``collect_all=True`` (run every check, then raise
one error listing every failure). :func:`parametrize_with_checks` makes each check its own
pytest test (``model[my-model]-predict-dtype``), expected failures marked ``xfail(strict=True)``.

One module per kind (``models``, ``datasets``, ``clusterers``, ``metrics``) over ``core`` (the
error, the report, the check, the runner); ``suite`` holds what spans the kinds. Importing
this package is cheap (numpy only): torch, scikit-learn and the runner are imported by the
checks that need them, pytest by :func:`parametrize_with_checks`.
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
