"""One model registered four times, its evaluation logits multiplied by T (tests only).

``logreg-x<T>`` (``logreg-x0-25``, ``logreg-x1``, ...) for T in :data:`FACTORS` is the same
logistic regression (same seed, same data, so the same fit) whose coverage head returns T
times its logits: the same predictions and test accuracy, a softmax T times sharper. Coverage
must score the four alike (issue 28, point 1: with the raw softmax, coverage-guided accuracy
moved with T).
"""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.specs import ModelSpec
from tests.plugins.sklearn_features import LogRegFeatures

#: The factors the logits are multiplied by (powers of 2: the products are exact).
FACTORS = (0.25, 1.0, 4.0, 16.0)


def model_name(factor: float) -> str:
    """Return the registered name of the model whose logits are multiplied by ``factor``."""
    return f"logreg-x{factor:g}".replace(".", "-")  # x0-25: names are slugs


class ScaledLogits(LogRegFeatures):
    """Logistic regression on standardised inputs whose head's logits are multiplied by T."""

    def __init__(self, seed: int = 0, factor: float = 1.0):
        super().__init__(seed)
        self.factor = float(factor)

    def coverage_space(self):
        """Return the input layer (standardised) and the head's logits times T."""
        from robench.learn.features import FeatureSpace

        def logits(Z):
            return self.factor * self.clf_.decision_function(np.asarray(Z, dtype=np.float32))

        return FeatureSpace("penultimate", "standardised input (the logistic regression's)",
                            self.features, logits)


@hookimpl
def register_models(register):
    for factor in FACTORS:
        register(ModelSpec(model_name(factor),
                           lambda ctx, f=factor: ScaledLogits(ctx.seed, f),
                           f"logistic regression, evaluation logits x {factor:g} (tests)",
                           version="1"))
