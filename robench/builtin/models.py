"""Register the built-in classifiers: an RBF SVM, an MLP and the CNN-1/2/3 family.

The five learners of the source-aware partitioning paper; ``robench list`` imports this
module, so torch and scikit-learn are imported only inside ``build`` and ``fit``.
"""

from __future__ import annotations

import functools

import numpy as np

from robench import hookimpl
from robench.specs import ModelContext, ModelSpec

#: Output channels of the conv blocks of CNN-1, CNN-2 and CNN-3.
CNN_CHANNELS = (16, 32, 64)


#: Decision values within this fraction of their scale ((1 + the sum of every |dual
#: coefficient|) x max(1, gamma (|x|^2 + |sv|^2))) are left to libsvm: a kernel value's
#: rounding is a few 1e-16 of that scale in either computation, so 1e-9 leaves six orders.
EXACT_MARGIN = 1e-9


class SVMClassifier:
    """RBF support vector machine (scikit-learn ``SVC``, ``gamma="scale"``), no feature space.

    ``fit`` uses the validation split only for ``val_accuracy_`` (no epochs to select);
    ``seed`` is kept for the record (``SVC`` is deterministic); ``C`` goes to ``SVC``.
    """

    has_features = False

    def __init__(self, *, seed: int = 0, C: float = 1.0):
        self.seed, self.C = seed, C

    def __repr__(self) -> str:
        return f"SVMClassifier(seed={self.seed}, C={self.C})"

    def fit(self, X, y, X_val, y_val) -> "SVMClassifier":
        """Fit on (X, y); (X_val, y_val) only sets ``val_accuracy_``, it selects nothing."""
        from sklearn.svm import SVC

        self.model_ = SVC(kernel="rbf", gamma="scale", C=self.C, random_state=self.seed)
        self.model_.fit(X, y)
        self.history_, self.n_epochs_, self.best_epoch_ = [], 0, 0
        self.train_accuracy_ = self._train_accuracy(X, y)
        self.val_accuracy_ = (self.score(X_val, y_val)
                              if X_val is not None and len(X_val) else None)
        return self

    def _train_accuracy(self, X, y) -> float:
        """Return the training accuracy, predicting only the support vectors.

        A point that is no machine's support vector lies outside every margin: classified right.
        """
        sv = self.model_.support_
        wrong = int(np.sum(self.predict(X[sv]) != np.asarray(y)[sv]))
        return 1.0 - wrong / len(y)

    def score(self, X, y) -> float:
        """Return the accuracy on (X, y)."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def predict(self, X):
        """Return the predicted class of each row of ``X`` as int64: libsvm's votes, exactly.

        The RBF kernel of a block of rows against the support vectors is one matrix product, then
        libsvm's one-vs-one votes; a row within :data:`EXACT_MARGIN` of a tie goes to libsvm itself
        (docs/performance.md, "The SVM predicts in blocks").
        """
        m = self.model_
        try:  # scikit-learn's own names for what libsvm predicts with (>= 1.3 has them all)
            sv, coef, bias, gamma = m.support_vectors_, m._dual_coef_, m._intercept_, m._gamma
        except AttributeError:  # a scikit-learn without them: its own predict
            return m.predict(X).astype(np.int64)
        X = np.asarray(X, dtype=np.float64)
        if len(X) == 0:
            return np.empty(0, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(m.n_support_)])
        k = len(m.classes_)
        center = sv.mean(0)
        svc = sv - center
        sv_sq = np.einsum("ij,ij->i", svc, svc)
        # |a decision value's error| <= sum |coef| * max |kernel error|, and a kernel value's
        # rounding (here or in libsvm, which may expand |x - sv|^2 uncentred) is at most a few
        # eps * gamma * (|x|^2 + |sv|^2): the scale of the tolerance below
        coef_sum, sv_norm = np.abs(coef).sum(), np.einsum("ij,ij->i", sv, sv).max()
        out = np.empty(len(X), dtype=np.int64)
        unsure = np.zeros(len(X), dtype=bool)
        block = max(1, min(1024, 2 ** 24 // max(1, len(sv))))  # <= 128 MB of kernel a block
        for lo in range(0, len(X), block):
            rows = X[lo:lo + block]
            xc = rows - center
            size = gamma * (np.einsum("ij,ij->i", rows, rows).max() + sv_norm)
            tol = EXACT_MARGIN * (1.0 + coef_sum) * max(1.0, size)
            d2 = np.einsum("ij,ij->i", xc, xc)[:, None] + sv_sq[None, :] - 2.0 * (xc @ svc.T)
            kern = np.exp(-gamma * np.maximum(d2, 0.0))
            votes = np.zeros((len(xc), k), dtype=np.int64)
            p = 0
            for i in range(k):
                a = slice(starts[i], starts[i + 1])
                for j in range(i + 1, k):
                    b = slice(starts[j], starts[j + 1])
                    dec = kern[:, a] @ coef[j - 1, a] + kern[:, b] @ coef[i, b] + bias[p]
                    unsure[lo:lo + block] |= np.abs(dec) <= tol
                    votes[:, i] += dec > 0
                    votes[:, j] += dec <= 0
                    p += 1
            out[lo:lo + block] = m.classes_[np.argmax(votes, axis=1)]
        if unsure.any():
            out[unsure] = m.predict(X[unsure])
        return out


def build_svm(ctx: ModelContext) -> SVMClassifier:
    """Return an untrained RBF SVM."""
    return SVMClassifier(seed=ctx.seed)


def build_mlp(ctx: ModelContext):
    """Return an untrained 256-128 ReLU MLP classifier."""
    from robench.learn.train import MLP, TorchClassifier, training_budget

    module = functools.partial(MLP, ctx.n_features, ctx.n_classes, hidden=(256, 128))
    return TorchClassifier(module, seed=ctx.seed, **training_budget(ctx.train))


def build_cnn(ctx: ModelContext, depth: int):
    """Return an untrained CNN with ``depth`` conv blocks (CNN-1, CNN-2 or CNN-3)."""
    from robench.learn.train import ConvNet, TorchClassifier, training_budget

    if ctx.image_shape is None:
        raise ValueError(f"cnn-{depth} needs image data (ModelContext.image_shape is None)")
    module = functools.partial(ConvNet, ctx.image_shape, ctx.n_classes,
                               channels=CNN_CHANNELS[:depth], fc_width=128)
    return TorchClassifier(module, seed=ctx.seed, **training_budget(ctx.train))


def mlp_params(n_features: int, n_classes: int, hidden: tuple = (256, 128)) -> int:
    """Return the trainable parameters (weights, biases) of :class:`robench.learn.train.MLP`."""
    widths = (int(n_features), *hidden, int(n_classes))
    return sum((a + 1) * b for a, b in zip(widths, widths[1:]))


def cnn_params(image_shape: tuple, n_classes: int, channels: tuple, fc_width: int = 128) -> int:
    """Return the trainable parameters of :class:`robench.learn.train.ConvNet` for a data shape."""
    c_in, h, w = (int(s) for s in image_shape)
    total = 0
    for c_out in channels:
        total += (9 * c_in + 1) * c_out
        if min(h, w) // 2 >= 2:
            h, w = h // 2, w // 2
        c_in = c_out
    return total + (c_in * h * w + 1) * fc_width + (fc_width + 1) * int(n_classes)


#: The paper's two image sizes, on which the built-in models' parameter counts are stated.
_SIZES = (("8x8 digits", (1, 8, 8)), ("28x28 MNIST", (1, 28, 28)))
#: The MLP's hidden widths and the CNNs' fc width, as build_mlp and build_cnn give them.
_MLP_HIDDEN = (256, 128)
_FC_WIDTH = 128


def _mlp_params_text() -> str:
    h1, h2 = _MLP_HIDDEN
    on = ", ".join(f"{mlp_params(c * hh * ww, 10, _MLP_HIDDEN):,} on {label}"
                   for label, (c, hh, ww) in _SIZES)
    return (f"{h1}·d + {h2 + 1}·C + {h1 + (h1 + 1) * h2:,} for d input features and C "
            f"classes: {on} (10 classes)")


def _cnn_params_text(depth: int) -> str:
    on = ", ".join(f"{cnn_params(shape, 10, CNN_CHANNELS[:depth], _FC_WIDTH):,} on {label}"
                   for label, shape in _SIZES)
    return (f"depends on the image size: {on} (10 classes); each further class adds "
            f"{_FC_WIDTH + 1}")


@hookimpl
def register_models(register):
    """Register svm, mlp, cnn-1, cnn-2 and cnn-3."""
    register(ModelSpec(
        "svm", build_svm, "RBF SVM (scikit-learn SVC, gamma='scale', C=1); ignores the "
        "validation split (no early stopping) and has no feature space",
        version="1", requires_image=False, has_features=False,
        params="none fixed: it keeps support vectors (training rows, d values each) and "
               "their dual coefficients, as many as the data needs",
    ))
    register(ModelSpec(
        "mlp", build_mlp, "MLP, two ReLU hidden layers 256-128, Adam, early stopping on "
        "validation accuracy; features: 128-d last hidden layer",
        version="2", requires_image=False, params=_mlp_params_text(),  # 2: fused Adam step
    ))
    for depth in (1, 2, 3):
        channels = "-".join(str(c) for c in CNN_CHANNELS[:depth])
        register(ModelSpec(
            name=f"cnn-{depth}",
            build=functools.partial(build_cnn, depth=depth),
            description=f"CNN-{depth}: {depth} conv3x3-ReLU-maxpool block(s) ({channels} "
                        "channels), fc 128, Adam, early stopping on validation accuracy; "
                        "features: 128-d fc layer",
            # 2: fused Adam step; 3: channels-last end to end (robench.learn.train.ConvNet), which
            # rounds differently: every cnn trial retrains once (docs/profile.md)
            version="3", requires_image=True, params=_cnn_params_text(depth),
        ))
