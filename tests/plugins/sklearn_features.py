"""A scikit-learn model with a feature space, as a plugin would register it (tests only).

scikit-learn refuses NaN input ("Input X contains NaN"), so this model is what made
`robench run -d digits --metric purity-ratio` fail trials while a corruption set held NaN
images (issue 18, defect 1); torch models predicted a class for them silently.
"""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.specs import ModelSpec


class LogRegFeatures:
    """Logistic regression whose feature space is its standardised input."""

    has_features = True

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, X, y, X_val=None, y_val=None):
        from sklearn.linear_model import LogisticRegression

        self.mean_, self.scale_ = X.mean(axis=0), X.std(axis=0) + 1e-6
        self.clf_ = LogisticRegression(max_iter=200, random_state=self.seed)
        self.clf_.fit(self.features(X), y)
        self.history_, self.n_epochs_, self.best_epoch_ = [], 0, 0
        self.train_accuracy_ = float(np.mean(self.clf_.predict(self.features(X)) == y))
        self.val_accuracy_ = (None if X_val is None or not len(X_val) else
                              float(np.mean(self.predict(X_val) == y_val)))
        return self

    def features(self, X):
        return ((np.asarray(X, dtype=np.float64) - self.mean_) / self.scale_).astype(np.float32)

    def predict(self, X):
        return self.clf_.predict(self.features(X)).astype(np.int64)


@hookimpl
def register_models(register):
    register(ModelSpec("logreg-features", lambda ctx: LogRegFeatures(ctx.seed),
                       "logistic regression on standardised inputs (tests)", version="1"))
