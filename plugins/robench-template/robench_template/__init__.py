"""Template robench plugin: register one extra model, ``logreg`` (multinomial logistic regression).

Copy the folder ``plugins/robench-template`` to ``plugins/robench-my-model`` and change these
lines (each one is also marked ``CHANGE`` in the code below):

1. The package folder ``robench_template/`` -> ``robench_my_model/``, and the same name in
   ``pyproject.toml`` (``[project.entry-points.robench]`` and ``packages.find``).
2. ``__version__``: the plugin's version. It is part of every trial key of every model this
   plugin registers, so a bump re-runs those trials; keep it equal to ``version`` in
   ``pyproject.toml`` (that one is what robench reads once the plugin is pip-installed).
3. ``LogRegClassifier``: your classifier. Keep the contract robench relies on:

   * ``fit(X, y, X_val, y_val)`` trains on ``(X, y)``. ``(X_val, y_val)`` is a validation
     split carved from the *training* partition: early stopping, epoch or hyper-parameter
     selection may read it and nothing else. ``fit`` never sees the test partition.
   * ``predict(X)`` returns one int64 class per row.
   * after ``fit``: ``history_`` (list of per-epoch dicts, ``[]`` without epochs),
     ``n_epochs_``, ``best_epoch_`` (0 without epochs), ``train_accuracy_``, ``val_accuracy_``
     (floats; ``val_accuracy_`` may be None when the split is empty). robench stores them with
     every trial.
   * ``has_features``: True if ``features(X)`` returns the penultimate (pre-logit)
     representation, one row per row of ``X``; feature-space metrics read it. Set it to False
     and drop ``features`` if the model has no feature space (like the built-in ``svm``).

   ``X`` is always a flat float32 array ``(n, d)``; an image data set stores each image as a
   row of ``C*H*W`` values and reports ``(C, H, W)`` in ``ModelContext.image_shape``.
   A torch model does not need its own class: return
   ``robench.train.TorchClassifier(build_module, seed=ctx.seed, max_epochs=..., ...)`` from
   ``build`` (see ``build_mlp`` in ``robench/builtin/models.py``); it implements all of the
   above, with early stopping on the validation split.
4. ``build_logreg``: the factory. robench calls it once per trial with a
   :class:`robench.specs.ModelContext` (``n_features``, ``n_classes``, ``image_shape``,
   ``seed``, ``train`` = the profile's training budget) and expects a fresh, untrained
   classifier. Seed everything random from ``ctx.seed`` so a trial is reproducible.
5. ``register_models``: one ``register(ModelSpec(...))`` per model. ``name`` is a lowercase
   slug (letters, digits, ``-``) that must not clash with any other plugin's model;
   ``description`` is the line ``robench list models`` prints; ``version`` is the model's own
   version (bump it when the model's results change, e.g. a new default hyper-parameter);
   ``requires_image=True`` if the model only works on images (a CNN).

Keep imports of heavy libraries (scikit-learn, torch) inside ``build``/``fit``: ``robench
list`` and ``robench plugins`` import this module and should answer in about a second.
"""

from __future__ import annotations

from robench import hookimpl
from robench.specs import ModelContext, ModelSpec

__version__ = "0.1.0"  # CHANGE (2): keep equal to `version` in pyproject.toml


class LogRegClassifier:  # CHANGE (3): your classifier
    """Multinomial logistic regression (scikit-learn ``LogisticRegression``, lbfgs, L2).

    A linear model has no epochs to stop early or select, so ``fit`` reads the validation
    split only to report ``val_accuracy_``. Its pre-logit representation is the input itself,
    which ``features`` returns.

    Parameters
    ----------
    seed : int
        Passed to scikit-learn as ``random_state``.
    C : float
        Inverse L2 regularisation strength.
    max_iter : int
        Upper bound on lbfgs iterations.
    """

    has_features = True

    def __init__(self, *, seed: int = 0, C: float = 1.0, max_iter: int = 1000):
        self.seed = seed
        self.C = C
        self.max_iter = max_iter

    def __repr__(self) -> str:
        return f"LogRegClassifier(seed={self.seed}, C={self.C}, max_iter={self.max_iter})"

    def fit(self, X, y, X_val, y_val) -> "LogRegClassifier":
        """Fit on (X, y); (X_val, y_val) only sets ``val_accuracy_``, it selects nothing."""
        from sklearn.linear_model import LogisticRegression

        self.model_ = LogisticRegression(C=self.C, max_iter=self.max_iter,
                                         random_state=self.seed)
        self.model_.fit(X, y)
        self.history_ = []
        self.n_epochs_ = 0
        self.best_epoch_ = 0
        self.train_accuracy_ = float(self.model_.score(X, y))
        self.val_accuracy_ = (float(self.model_.score(X_val, y_val))
                              if X_val is not None and len(X_val) else None)
        return self

    def predict(self, X):
        """Return the predicted class of each row of ``X`` as int64."""
        import numpy as np

        return self.model_.predict(X).astype(np.int64)

    def features(self, X):
        """Return the pre-logit representation of ``X``: for a linear model, ``X`` itself."""
        import numpy as np

        return np.asarray(X, dtype=np.float32)


def build_logreg(ctx: ModelContext) -> LogRegClassifier:  # CHANGE (4): your factory
    """Return an untrained logistic regression seeded from the trial."""
    return LogRegClassifier(seed=ctx.seed)


@hookimpl
def register_models(register):  # CHANGE (5): one register(...) call per model
    """Register logreg."""
    register(ModelSpec(
        name="logreg",
        build=build_logreg,
        description="Multinomial logistic regression (scikit-learn, lbfgs, L2, C=1); ignores "
                    "the validation split (no epochs); features: the input itself",
        version="1",
        requires_image=False,
    ))
