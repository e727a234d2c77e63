"""Tests for robench.learn.train and the built-in models: early stopping, determinism, shapes."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from robench.builtin import models as builtin_models  # noqa: E402
from robench.specs import ModelContext  # noqa: E402
from robench.learn.train import (  # noqa: E402
    DEFAULT_TRAIN, MLP, ConvNet, MaxPool2x2, TorchClassifier, set_torch_threads, training_budget)

REPO = Path(__file__).resolve().parents[2]


def _specs():
    specs = []
    builtin_models.register_models(specs.append)
    return {spec.name: spec for spec in specs}


def _blobs(n, n_features=2, seed=0):
    """Return two linearly separable classes split on the sign of the first feature."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    return X, y


def _mlp(seed=0, **budget):
    params = {"max_epochs": 30, "patience": 3, "batch_size": 20, "lr": 0.01}
    params.update(budget)
    return TorchClassifier(lambda: MLP(2, 2, hidden=(16, 8)), seed=seed, **params)


def _adversarial_validation():
    """Return training data and a validation split labelled by the opposite rule.

    The better the model learns the training rule, the worse it does on this validation set,
    so validation accuracy peaks early and early stopping must restore an early epoch.
    """
    X, y = _blobs(200, seed=0)
    X_val, y_val = _blobs(100, seed=1)
    return X, y, X_val, 1 - y_val


def _expected_best_epoch(history):
    """Return the epoch with the highest val accuracy, ties to lower val loss, then earlier."""
    best = max(history, key=lambda h: (h["val_accuracy"], -h["val_loss"], -h["epoch"]))
    return best["epoch"]


def test_early_stopping_restores_best_validation_epoch():
    X, y, X_val, y_val = _adversarial_validation()
    clf = _mlp().fit(X, y, X_val, y_val)
    history = clf.history_

    assert clf.best_epoch_ == _expected_best_epoch(history)
    assert clf.best_epoch_ < clf.n_epochs_, "validation accuracy should peak before the end"
    best_val = history[clf.best_epoch_ - 1]["val_accuracy"]
    assert history[-1]["val_accuracy"] < best_val
    # The restored weights, not the last epoch's, make the predictions.
    assert clf.val_accuracy_ == pytest.approx(best_val)
    assert np.mean(clf.predict(X_val) == y_val) == pytest.approx(best_val)

    # A run cut at the best epoch ends with exactly the weights the full run restored.
    cut = _mlp(max_epochs=clf.best_epoch_, patience=100).fit(X, y, X_val, y_val)
    np.testing.assert_array_equal(cut.predict_proba(X_val), clf.predict_proba(X_val))
    assert clf.train_accuracy_ == pytest.approx(np.mean(clf.predict(X) == y))


def test_equal_validation_accuracy_is_broken_by_lower_validation_loss():
    X, y = _blobs(200, seed=0)
    # Points far from the boundary are classified right from the start, so every epoch ties
    # on accuracy while the loss keeps falling as the model grows confident.
    X_val = np.array([[4.0, 0.0], [-4.0, 0.0], [5.0, 1.0], [-5.0, -1.0]], dtype=np.float32)
    y_val = np.array([1, 0, 1, 0])
    clf = _mlp(max_epochs=6, patience=6).fit(X, y, X_val, y_val)
    history = clf.history_

    assert {h["val_accuracy"] for h in history} == {1.0}
    losses = [h["val_loss"] for h in history]
    assert clf.best_epoch_ == int(np.argmin(losses)) + 1 > 1


def test_stops_after_patience_epochs_without_improvement():
    X, y, X_val, y_val = _adversarial_validation()
    for patience in (1, 2, 4):
        clf = _mlp(patience=patience).fit(X, y, X_val, y_val)
        assert clf.n_epochs_ == clf.best_epoch_ + patience
        assert len(clf.history_) == clf.n_epochs_
        assert [h["epoch"] for h in clf.history_] == list(range(1, clf.n_epochs_ + 1))


def test_runs_max_epochs_when_patience_never_runs_out():
    X, y = _blobs(100, seed=0)
    X_val, y_val = _blobs(50, seed=1)
    clf = _mlp(max_epochs=4, patience=10).fit(X, y, X_val, y_val)
    assert clf.n_epochs_ == 4
    assert set(clf.history_[0]) == {
        "epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy"}


def test_fit_refuses_missing_validation_split():
    X, y = _blobs(40)
    with pytest.raises(ValueError, match="validation"):
        _mlp().fit(X, y, X[:0], y[:0])


def test_same_seed_same_predictions_different_seed_different_weights():
    X, y = _blobs(120, n_features=5, seed=3)
    X_val, y_val = _blobs(40, n_features=5, seed=4)

    def fit(seed):
        clf = TorchClassifier(lambda: MLP(5, 2, hidden=(16, 8)), seed=seed, max_epochs=3,
                              patience=3, batch_size=16, lr=0.01)
        return clf.fit(X, y, X_val, y_val)

    a, b, c = fit(7), fit(7), fit(8)
    np.testing.assert_array_equal(a.predict_proba(X_val), b.predict_proba(X_val))
    np.testing.assert_array_equal(a.predict(X_val), b.predict(X_val))
    assert a.history_ == b.history_
    wa = a.module_.state_dict()["head.weight"]
    wc = c.module_.state_dict()["head.weight"]
    assert not torch.equal(wa, wc)


def test_cnn_same_seed_same_predictions():
    rng = np.random.default_rng(0)
    X = rng.random((60, 64), dtype=np.float32)
    y = np.arange(60) % 3
    ctx = ModelContext(n_features=64, n_classes=3, image_shape=(1, 8, 8), seed=3,
                       train={"max_epochs": 2, "patience": 2, "batch_size": 16})
    a, b = (_specs()["cnn-3"].build(ctx).fit(X[:45], y[:45], X[45:], y[45:]) for _ in range(2))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.features(X), b.features(X))


@pytest.mark.parametrize("name", ["cnn-1", "cnn-2", "cnn-3"])
@pytest.mark.parametrize("image_shape", [(1, 8, 8), (1, 16, 16), (1, 28, 28), (3, 16, 16)])
def test_cnn_shapes(name, image_shape):
    n, n_classes = 24, 3
    rng = np.random.default_rng(0)
    X = rng.random((n, int(np.prod(image_shape))), dtype=np.float32)
    y = np.arange(n) % n_classes
    ctx = ModelContext(n_features=X.shape[1], n_classes=n_classes, image_shape=image_shape,
                       seed=0, train={"max_epochs": 1, "patience": 1, "batch_size": 8})
    clf = _specs()[name].build(ctx).fit(X[:16], y[:16], X[16:], y[16:])

    assert clf.has_features is True
    pred = clf.predict(X)
    assert pred.shape == (n,) and pred.dtype == np.int64
    proba = clf.predict_proba(X)
    assert proba.shape == (n, n_classes)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    assert clf.features(X).shape == (n, clf.module_.head.in_features) == (n, 128)
    assert clf.features(X[:0]).shape == (0, 128)


def test_mlp_features_are_penultimate_layer():
    X, y = _blobs(60, n_features=10)
    ctx = ModelContext(n_features=10, n_classes=2, image_shape=None, seed=0,
                       train={"max_epochs": 2, "patience": 1})
    clf = _specs()["mlp"].build(ctx).fit(X[:40], y[:40], X[40:], y[40:])
    Z = clf.features(X)
    assert Z.shape == (60, 128)
    # The head applied to the features reproduces the logits, so they really are penultimate.
    with torch.inference_mode():
        logits = clf.module_.head(torch.from_numpy(Z))
    np.testing.assert_array_equal(logits.argmax(1).numpy(), clf.predict(X))


def test_svm_has_no_features_and_ignores_validation():
    X, y = _blobs(80, n_features=4)
    ctx = ModelContext(n_features=4, n_classes=2, image_shape=None, seed=0)
    clf = _specs()["svm"].build(ctx)
    assert clf.has_features is False
    fitted = clf.fit(X[:60], y[:60], X[60:], y[60:])
    # Different validation data must not change an SVM: it has nothing to select.
    other = _specs()["svm"].build(ctx).fit(X[:60], y[:60], X[:5], 1 - y[:5])
    np.testing.assert_array_equal(fitted.predict(X), other.predict(X))
    assert fitted.predict(X).dtype == np.int64
    assert fitted.history_ == [] and fitted.n_epochs_ == 0 and fitted.best_epoch_ == 0
    assert 0.9 <= fitted.train_accuracy_ <= 1.0


@pytest.mark.parametrize("classes, noise", [(2, 0.0), (3, 0.3), (10, 0.1)])
def test_svm_predicts_libsvms_labels_from_one_matrix_product(classes, noise):
    """The block-kernel predict gives SVC.predict's labels, row for row: binary (where
    scikit-learn flips the public coefficients' sign) and one-vs-one votes with ties."""
    from sklearn.datasets import load_digits, make_classification

    if classes == 10:
        X, y = load_digits(return_X_y=True)
    else:
        X, y = make_classification(500, 12, n_informative=6, n_classes=classes,
                                   n_clusters_per_class=1, random_state=classes)
    rng = np.random.default_rng(1)
    y = np.where(rng.random(len(y)) < noise, rng.integers(0, classes, len(y)), y)
    ctx = ModelContext(n_features=X.shape[1], n_classes=classes, image_shape=None, seed=0)
    clf = _specs()["svm"].build(ctx).fit(X[:350], y[:350], X[350:], y[350:])
    np.testing.assert_array_equal(clf.predict(X), clf.model_.predict(X))
    assert clf.val_accuracy_ == clf.model_.score(X[350:], y[350:])
    assert clf.predict(X[:0]).shape == (0,) and clf.predict(X[:0]).dtype == np.int64


def test_svm_leaves_rows_near_a_decision_boundary_to_libsvm(monkeypatch):
    from robench.builtin import models

    X, y = _blobs(200, n_features=4, seed=3)
    ctx = ModelContext(n_features=4, n_classes=2, image_shape=None, seed=0)
    clf = _specs()["svm"].build(ctx).fit(X[:150], y[:150], None, None)
    asked = []
    original = clf.model_.predict
    monkeypatch.setattr(clf.model_, "predict", lambda rows: asked.append(len(rows))
                        or original(rows))
    clf.predict(X)
    assert asked == []  # no row of blobs lies within 1e-9 of a boundary
    monkeypatch.setattr(models, "EXACT_MARGIN", 1e9)  # every row is "near"
    np.testing.assert_array_equal(clf.predict(X), original(X))
    assert asked == [200]


def test_svm_on_data_far_from_the_origin_leaves_the_rounding_to_libsvm():
    # an offset of 1e4 makes |x|^2 (and libsvm's possible uncentred expansion's rounding) huge
    # against the distances: the tolerance grows with it and every row is libsvm's
    X, y = _blobs(120, n_features=4, seed=4)
    X = X + 1e4
    ctx = ModelContext(n_features=4, n_classes=2, image_shape=None, seed=0)
    clf = _specs()["svm"].build(ctx).fit(X[:90], y[:90], None, None)
    asked = []
    original = clf.model_.predict
    clf.model_.predict = lambda rows: asked.append(len(rows)) or original(rows)
    np.testing.assert_array_equal(clf.predict(X), original(X))
    assert asked == [120]


def test_register_models_names_and_image_requirement():
    specs = _specs()
    assert sorted(specs) == ["cnn-1", "cnn-2", "cnn-3", "mlp", "svm"]
    assert {n for n, s in specs.items() if s.requires_image} == {"cnn-1", "cnn-2", "cnn-3"}


def test_build_reads_budget_and_fills_defaults():
    ctx = ModelContext(n_features=64, n_classes=10, image_shape=(1, 8, 8), seed=5,
                       train={"max_epochs": 2, "batch_size": 32})
    clf = _specs()["cnn-2"].build(ctx)
    assert (clf.max_epochs, clf.batch_size, clf.seed) == (2, 32, 5)
    assert clf.patience == DEFAULT_TRAIN["patience"]
    assert clf.lr == DEFAULT_TRAIN["lr"]


def test_training_budget_fills_defaults_and_drops_unknown_keys():
    assert training_budget({}) == DEFAULT_TRAIN
    assert training_budget(None) == DEFAULT_TRAIN
    got = training_budget({"max_epochs": 9, "mc_samples": 4, "future_knob": "x"})
    assert got == {**DEFAULT_TRAIN, "max_epochs": 9}
    # the values the built-in models trained with before the budget moved here (trial keys
    # and stored results depend on them)
    assert DEFAULT_TRAIN == {"max_epochs": 4, "patience": 2, "batch_size": 64, "lr": 2e-3,
                             "weight_decay": 0.0}


def test_builtin_budget_is_training_budget():
    # shifted-cv sends mc_samples to every model; the budget handed to TorchClassifier is the
    # same as before: defaults filled, unknown keys dropped
    train = {"max_epochs": 2, "patience": 2, "mc_samples": 4}
    ctx = ModelContext(64, 10, (1, 8, 8), seed=1, train=train)
    clf = _specs()["mlp"].build(ctx)
    assert (clf.max_epochs, clf.patience, clf.batch_size, clf.lr, clf.weight_decay) == (
        2, 2, DEFAULT_TRAIN["batch_size"], DEFAULT_TRAIN["lr"], DEFAULT_TRAIN["weight_decay"])


def test_from_context_reads_the_budget_and_seed_ignores_unknown_knobs():
    seen = []

    def build_module(ctx):
        seen.append(ctx)
        return MLP(ctx.n_features, ctx.n_classes, hidden=(8,))

    ctx = ModelContext(2, 2, None, seed=7, train={"max_epochs": 3, "lr": 0.05, "mc_samples": 4})
    clf = TorchClassifier.from_context(ctx, build_module)
    assert (clf.seed, clf.max_epochs, clf.lr) == (7, 3, 0.05)
    assert (clf.patience, clf.batch_size, clf.weight_decay) == (
        DEFAULT_TRAIN["patience"], DEFAULT_TRAIN["batch_size"], DEFAULT_TRAIN["weight_decay"])
    X, y = _blobs(120)
    clf.fit(X[:80], y[:80], X[80:100], y[80:100])
    assert seen == [ctx] and clf.predict(X[100:]).dtype == np.int64
    # the same as the explicit constructor with the same budget and seed
    same = TorchClassifier(lambda: MLP(2, 2, hidden=(8,)), seed=7,
                           **training_budget(ctx.train)).fit(X[:80], y[:80], X[80:100], y[80:100])
    np.testing.assert_array_equal(clf.predict(X), same.predict(X))


def test_from_context_overrides_win():
    ctx = ModelContext(2, 2, None, seed=7, train={"max_epochs": 3, "lr": 0.05})
    clf = TorchClassifier.from_context(ctx, lambda c: MLP(2, 2), lr=1e-3, seed=11, patience=5)
    assert (clf.seed, clf.lr, clf.patience, clf.max_epochs) == (11, 1e-3, 5, 3)
    with pytest.raises(TypeError):
        TorchClassifier.from_context(ctx, lambda c: MLP(2, 2), mc_samples=3)


def test_cnn_refuses_tabular_context():
    ctx = ModelContext(n_features=64, n_classes=10, image_shape=None, seed=0)
    with pytest.raises(ValueError, match="image"):
        _specs()["cnn-1"].build(ctx)


def test_importing_builtin_models_does_not_import_torch_or_sklearn():
    code = ("import sys, robench.builtin.models; "
            "heavy = {'torch', 'sklearn'} & set(sys.modules); "
            "assert not heavy, heavy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_set_torch_threads():
    before = torch.get_num_threads()
    try:
        set_torch_threads(1)
        assert torch.get_num_threads() == 1
        set_torch_threads(2)  # a second call must not fail on the inter-op pool
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("size", [(8, 8), (7, 7), (14, 9)])
def test_maxpool2x2_equals_max_pool2d_values_and_gradients(size):
    torch.manual_seed(0)
    x = torch.randn(3, 4, *size)
    x[:, :, :4, :4] = 0.5  # tied windows, as a constant image background produces
    grad_out = torch.randn(3, 4, size[0] // 2, size[1] // 2)
    ours, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = MaxPool2x2()(ours)
    expected = torch.nn.functional.max_pool2d(ref, 2)
    assert torch.equal(out, expected)
    out.backward(grad_out)
    expected.backward(grad_out)
    assert torch.equal(ours.grad, ref.grad)
    with torch.inference_mode():
        assert torch.equal(MaxPool2x2()(x), torch.nn.functional.max_pool2d(x, 2))


def test_convnet_matches_conv_relu_maxpool_reference():
    torch.manual_seed(0)
    net = ConvNet((1, 16, 16), 5, channels=(4, 8))
    conv1, conv2 = (m for m in net.conv if isinstance(m, torch.nn.Conv2d))
    fc = net.fc[1]
    reference = torch.nn.Sequential(
        conv1, torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        conv2, torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), fc, torch.nn.ReLU(), net.head)
    x = torch.rand(6, 256)
    # Same gradients as the textbook block order (ReLU before pooling, NCHW memory).
    net(x).square().sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    reference(x.view(6, 1, 16, 16)).square().sum().backward()
    for g, p in zip(grads, net.parameters()):
        torch.testing.assert_close(g, p.grad)
    with torch.inference_mode():
        torch.testing.assert_close(net(x), reference(x.view(6, 1, 16, 16)))


def test_svm_train_accuracy_equals_full_training_score():
    # Noisy labels leave many training points misclassified, so the support-vector shortcut
    # has something to get wrong.
    rng = np.random.default_rng(0)
    X, y = _blobs(300, n_features=4, seed=2)
    y = np.where(rng.random(len(y)) < 0.3, 1 - y, y)
    ctx = ModelContext(n_features=4, n_classes=2, image_shape=None, seed=0)
    clf = _specs()["svm"].build(ctx).fit(X[:240], y[:240], X[240:], y[240:])
    assert clf.train_accuracy_ < 0.95
    assert clf.train_accuracy_ == pytest.approx(clf.model_.score(X[:240], y[:240]))
    assert clf.val_accuracy_ == pytest.approx(clf.model_.score(X[240:], y[240:]))


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_fused_adam_is_torch_fused_adam_bit_for_bit(weight_decay):
    from robench.learn.train import FusedAdam

    def build():
        torch.manual_seed(0)
        return ConvNet((1, 12, 12), 4, channels=(4, 8), fc_width=16)

    ours, ref = build(), build()
    unused = [ours.head.bias, ref.head.bias]  # a parameter without a gradient on some steps
    opt = FusedAdam(ours.parameters(), lr=3e-3, weight_decay=weight_decay)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=3e-3, weight_decay=weight_decay, fused=True)
    x, y = torch.rand(10, 144), torch.randint(0, 4, (10,))
    for step in range(6):
        for net, o, bias in ((ours, opt, unused[0]), (ref, ref_opt, unused[1])):
            o.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(net(x), y).backward()
            if step < 2:
                bias.grad = None
            o.step()
    for p, q in zip(ours.parameters(), ref.parameters()):
        assert torch.equal(p, q)


def test_a_trial_never_imports_torch_dynamo():
    """torch.optim.Adam imports torch._dynamo (2-4 s per worker); TorchClassifier must not."""
    code = ("import sys, numpy as np; from robench.learn.train import TorchClassifier, ConvNet; "
            "X = np.random.default_rng(0).random((40, 64), dtype=np.float32); "
            "y = np.arange(40) % 4; "
            "c = TorchClassifier(lambda: ConvNet((1, 8, 8), 4, channels=(4,)), seed=0, "
            "max_epochs=2, patience=1, batch_size=8, lr=1e-3).fit(X, y, X[:8], y[:8]); "
            "c.predict(X); c.features(X); "
            "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_convnet_is_channels_last_end_to_end():
    net = ConvNet((1, 16, 16), 5, channels=(4, 8))
    seen = []
    for m in net.conv:
        m.register_forward_hook(lambda mod, inp, out: seen.append(
            (type(mod).__name__, out.is_contiguous(memory_format=torch.channels_last))))
    net(torch.rand(3, 256))
    assert all(cl for _, cl in seen), seen
    for m in net.conv:
        if isinstance(m, torch.nn.Conv2d):
            assert m.weight.is_contiguous(memory_format=torch.channels_last)


def test_maxpool2x2_without_autograd_computes_no_indices(monkeypatch):
    # Evaluation passes take the two element-wise maxima, not max_pool2d (which computes an
    # int64 index per output even under inference_mode); training still uses max_pool2d.
    torch.manual_seed(0)
    x = torch.randn(5, 16, 14, 11).contiguous(memory_format=torch.channels_last)
    x[:, :, :6, :6] = 0.25  # tied windows
    expected = torch.nn.functional.max_pool2d(x, 2)
    calls = []
    real = torch.nn.functional.max_pool2d
    monkeypatch.setattr(torch.nn.functional, "max_pool2d",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    for ctx in (torch.inference_mode, torch.no_grad):
        with ctx():
            out = MaxPool2x2()(x)
        assert torch.equal(out, expected)
        assert out.is_contiguous(memory_format=torch.channels_last)
    assert calls == []
    MaxPool2x2()(x.clone().requires_grad_())
    assert calls == [1]


def _digits_like(n=150, seed=0):
    from robench.data import Dataset

    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = (rng.random((n, 64)) * 0.3 + (y[:, None] == np.arange(64) % 3) * 0.7).astype(np.float32)
    return Dataset("tiny-images", X, y, image_shape=(1, 8, 8))


@pytest.mark.parametrize("model", ["mlp", "cnn-2"])
def test_fit_and_score_takes_train_accuracy_from_its_prediction_once(model, monkeypatch):
    # The fit rows are part of the all-rows prediction, so fit_and_score derives their accuracy
    # from it instead of a separate pass in fit: one evaluation pass per epoch (validation)
    # plus the prediction, and the same number the pass in fit gives.
    from robench.run.trials import fit_and_score

    spec = _specs()[model]
    ds = _digits_like()
    parts = np.arange(90), np.arange(90, 120), np.arange(120, 150)
    budget = {"max_epochs": 3, "patience": 3, "batch_size": 16}
    passes = []
    batched = TorchClassifier._batched
    monkeypatch.setattr(TorchClassifier, "_batched",
                        lambda self, fn, X: passes.append(X.shape[0]) or batched(self, fn, X))
    row = fit_and_score(spec, ds, *parts, seed=4, train_budget=budget)
    assert passes == [30] * row["epochs"] + [150]  # validation per epoch, then every row

    clf = spec.build(ModelContext(64, 3, (1, 8, 8), 4, budget))
    assert clf.defer_train_accuracy is False  # used on its own, fit measures it itself
    clf.fit(ds.X[parts[0]], ds.y[parts[0]], ds.X[parts[1]], ds.y[parts[1]])
    assert row["train_accuracy"] == clf.train_accuracy_
    assert row["train_accuracy"] == np.mean(clf.predict(ds.X[parts[0]]) == ds.y[parts[0]])


def test_a_subclass_with_its_own_predict_keeps_the_train_accuracy_pass():
    from robench.run.trials import fit_and_score

    class Shifted(TorchClassifier):
        def predict(self, X):  # a different rule than the module's argmax
            return (super().predict(X) + 1) % 3

    spec = _specs()["mlp"]
    ds = _digits_like()
    custom = dataclasses.replace(spec, build=lambda ctx: Shifted.from_context(
        ctx, lambda c: MLP(c.n_features, c.n_classes)))
    parts = np.arange(90), np.arange(90, 120), np.arange(120, 150)
    row = fit_and_score(custom, ds, *parts, seed=4, train_budget={"max_epochs": 2})
    clf = Shifted.from_context(ModelContext(64, 3, (1, 8, 8), 4, {"max_epochs": 2}),
                               lambda c: MLP(c.n_features, c.n_classes))
    clf.fit(ds.X[parts[0]], ds.y[parts[0]], ds.X[parts[1]], ds.y[parts[1]])
    assert row["train_accuracy"] == clf.train_accuracy_


def _trainable(module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


@pytest.mark.parametrize("image_shape, n_classes", [
    ((1, 8, 8), 10), ((1, 28, 28), 10), ((3, 16, 16), 3), ((1, 5, 7), 2), ((2, 4, 4), 7)])
def test_builtin_parameter_counts_are_the_built_modules(image_shape, n_classes):
    d = int(np.prod(image_shape))
    ctx = ModelContext(n_features=d, n_classes=n_classes, image_shape=image_shape, seed=0)
    specs = _specs()
    assert _trainable(specs["mlp"].build(ctx).build_module()) == \
        builtin_models.mlp_params(d, n_classes) == 256 * d + 129 * n_classes + 33_152
    for depth in (1, 2, 3):
        module = specs[f"cnn-{depth}"].build(ctx).build_module()
        assert _trainable(module) == builtin_models.cnn_params(
            image_shape, n_classes, builtin_models.CNN_CHANNELS[:depth]), (depth, image_shape)


def test_builtin_models_state_their_parameters_on_the_papers_image_sizes():
    import re

    specs = _specs()
    for name, counts in {"mlp": (50_826, 235_146), "cnn-1": (34_346, 402_986),
                         "cnn-2": (22_602, 206_922), "cnn-3": (57_482, 98_442)}.items():
        text = specs[name].params
        assert f"{counts[0]:,} on 8x8 digits, {counts[1]:,} on 28x28 MNIST" in text, text
    a, c, b = (int(x.replace(",", "")) for x in re.match(
        r"(\d+)·d \+ (\d+)·C \+ ([\d,]+) for d input features", specs["mlp"].params).groups())
    assert (a * 64 + c * 10 + b, a * 784 + c * 10 + b) == (50_826, 235_146)  # the formula
    assert specs["svm"].params.startswith("none fixed: it keeps support vectors")
