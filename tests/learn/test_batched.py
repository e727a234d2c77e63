"""Tests for robench.learn.batched: many models trained as one stacked computation.

Each batched model must train as it would alone (its seed's initial weights and data order,
its own early stopping and training-set size), so the tests compare with
``TorchClassifier.fit`` one at a time: per model where rounding allows, and as distributions
over seeds with a two-sample test whose power is stated and shown on a control.
"""

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # as every executor runs trials; two threads crawl on a busy machine

from robench.learn import batched  # noqa: E402
from robench.learn.batched import FitJob, fit_many  # noqa: E402
from robench.learn.train import MLP, ConvNet, TorchClassifier  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return (X / 16).astype(np.float32), y.astype(np.int64)


def _split(n_samples, i, n_fit):
    p = np.random.default_rng(i).permutation(n_samples)
    return p[:n_fit], p[n_fit:n_fit + 200], p[1400:]


def _clf(build, seed, **kw):
    budget = dict(max_epochs=6, patience=2, batch_size=64, lr=2e-3)
    budget.update(kw)
    return TorchClassifier(build, seed=seed, **budget)


MLP_DIGITS = functools.partial(MLP, 64, 10, hidden=(64, 32))
CNN_DIGITS = functools.partial(ConvNet, (1, 8, 8), 10, channels=(8, 16), fc_width=32)


def _alone_and_batched(digits, build, seeds, sizes, budgets=None):
    X, y = digits
    budgets = budgets or [{}] * len(seeds)
    alone, jobs = [], []
    for i, (seed, n_fit, budget) in enumerate(zip(seeds, sizes, budgets)):
        fit, val, _ = _split(len(y), i, n_fit)
        clf = _clf(build, seed, **budget)
        clf.fit(X[fit], y[fit], X[val], y[val])
        alone.append(clf)
        jobs.append(FitJob(_clf(build, seed, **budget), X[fit], y[fit], X[val], y[val]))
    fit_many(jobs, device="cpu")
    return alone, [j.clf for j in jobs]


def test_each_model_trains_as_it_would_alone(digits):
    """Own init, own data order, own training-set size (short last batches), own stopping."""
    X, y = digits
    # sizes not multiples of the batch, and budgets that stop the models at different epochs
    sizes = [700, 901, 1000, 1130]
    budgets = [{"patience": 1}, {"max_epochs": 3}, {}, {"patience": 3, "max_epochs": 7}]
    alone, together = _alone_and_batched(digits, MLP_DIGITS, [3, 4, 5, 6], sizes, budgets)
    for a, b in zip(alone, together):
        assert (a.n_epochs_, a.best_epoch_) == (b.n_epochs_, b.best_epoch_)
        for ha, hb in zip(a.history_, b.history_):
            assert ha["epoch"] == hb["epoch"]
            for name in ("train_loss", "train_accuracy", "val_loss", "val_accuracy"):
                assert hb[name] == pytest.approx(ha[name], abs=1e-4), name
        assert b.val_accuracy_ == pytest.approx(a.val_accuracy_, abs=1e-9)
        for (name, pa), pb in zip(a.module_.named_parameters(), b.module_.parameters()):
            torch.testing.assert_close(pb, pa, atol=1e-4, rtol=1e-4, msg=name)
        assert np.mean(a.predict(X) == b.predict(X)) > 0.995
    epochs = {b.n_epochs_ for b in together}
    assert len(epochs) > 1, "the budgets were meant to stop the models at different epochs"


def test_a_model_that_stops_is_left_as_it_was_at_its_best_epoch(digits):
    """A model that stopped no longer moves while the others train on."""
    X, y = digits
    fit, val, _ = _split(len(y), 0, 900)
    stops, runs = _clf(MLP_DIGITS, 1, max_epochs=1), _clf(MLP_DIGITS, 2, max_epochs=5)
    fit_many([FitJob(stops, X[fit], y[fit], X[val], y[val]),
              FitJob(runs, X[fit], y[fit], X[val], y[val])], device="cpu")
    assert stops.n_epochs_ == 1 and runs.n_epochs_ > 1
    alone = _clf(MLP_DIGITS, 1, max_epochs=1).fit(X[fit], y[fit], X[val], y[val])
    for pa, pb in zip(alone.module_.parameters(), stops.module_.parameters()):
        torch.testing.assert_close(pb, pa, atol=1e-5, rtol=1e-5)


def test_grouped_convnet_forward_is_each_models_forward():
    """The grouped-convolution stack computes every ConvNet's own logits."""
    torch.manual_seed(0)
    modules = [ConvNet((1, 12, 10), 5, channels=(4, 6), fc_width=16) for _ in range(3)]
    params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in modules])
              for n, _ in modules[0].named_parameters()}
    x = torch.rand(3, 7, 120)
    with torch.no_grad():
        got = batched.stacked_forward(modules[0])(params, x)
        want = torch.stack([m(x[i]) for i, m in enumerate(modules)])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_convnets_train_as_they_would_alone(digits):
    alone, together = _alone_and_batched(digits, CNN_DIGITS, [7, 8], [600, 710],
                                         [{"max_epochs": 3}] * 2)
    X, _ = digits
    for a, b in zip(alone, together):
        assert a.n_epochs_ == b.n_epochs_
        assert b.history_[0]["train_loss"] == pytest.approx(a.history_[0]["train_loss"], abs=1e-4)
        assert np.mean(a.predict(X) == b.predict(X)) > 0.98


def test_uint8_pixels_stay_uint8_on_the_device_and_train_as_float32():
    """CUDA plumbing checked on the CPU: rows go to the device once, as held; batches are
    float32 (pixels / 255) on the model's device, and the trained modules live there."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(300, 64), dtype=np.uint8)
    y = (X[:, 0] > 127).astype(np.int64)
    pool = batched._Pool([X[:100], X[100:250]], [y[:100], y[100:250]], torch.device("cpu"))
    assert pool.X.dtype == torch.uint8 and pool.X.shape == (250, 64)
    xb, yb = pool.take(torch.tensor([[0, 1], [100, 149]]))
    assert xb.dtype == torch.float32 and yb.dtype == torch.int64
    np.testing.assert_array_equal(xb[1, 1].numpy(), X[149].astype(np.float32) / 255)
    jobs = [FitJob(_clf(MLP_DIGITS, s, max_epochs=2), X[:200], y[:200], X[200:], y[200:])
            for s in (0, 1)]
    fit_many(jobs, device="cpu")
    for job in jobs:
        assert job.clf.device_ == "cpu"
        assert all(p.device.type == "cpu" and p.dtype == torch.float32
                   for p in job.clf.module_.parameters())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this "
                    "machine); the CPU tests above cover the same code with device='cpu'")
def test_on_cuda_models_train_there_and_agree_with_the_cpu(digits):  # pragma: no cover
    X, y = digits
    fit, val, _ = _split(len(y), 0, 900)
    for build in (MLP_DIGITS, CNN_DIGITS):
        on_gpu = [FitJob(_clf(build, s), X[fit], y[fit], X[val], y[val]) for s in (0, 1)]
        on_cpu = [FitJob(_clf(build, s), X[fit], y[fit], X[val], y[val]) for s in (0, 1)]
        fit_many(on_gpu, device="cuda")
        fit_many(on_cpu, device="cpu")
        for g, c in zip(on_gpu, on_cpu):
            assert next(g.clf.module_.parameters()).is_cuda and g.clf.device_.startswith("cuda")
            assert abs(g.clf.val_accuracy_ - c.clf.val_accuracy_) < 0.05


def test_models_of_different_budgets_or_architectures_are_refused(digits):
    X, y = digits
    fit, val, _ = _split(len(y), 0, 500)
    job = functools.partial(FitJob, X=X[fit], y=y[fit], X_val=X[val], y_val=y[val])
    with pytest.raises(ValueError, match="batch size"):
        fit_many([job(_clf(MLP_DIGITS, 0)), job(_clf(MLP_DIGITS, 1, lr=1e-3))], device="cpu")
    other = functools.partial(MLP, 64, 10, hidden=(32,))
    with pytest.raises(ValueError, match="architecture"):
        fit_many([job(_clf(MLP_DIGITS, 0)), job(_clf(other, 1))], device="cpu")
    watched = _clf(MLP_DIGITS, 0)
    watched.epoch_callback = lambda clf, epoch: None
    assert not batched.batchable(watched)


def test_deferring_then_replaying_answers_the_fit_with_the_batched_model(digits):
    X, y = digits
    fit, val, _ = _split(len(y), 0, 600)
    jobs = []
    with batched.deferring(jobs):
        with pytest.raises(batched.FitDeferred):
            _clf(MLP_DIGITS, 5).fit(X[fit], y[fit], X[val], y[val])
    assert len(jobs) == 1
    fit_many(jobs + [FitJob(_clf(MLP_DIGITS, 6), X[fit], y[fit], X[val], y[val])], device="cpu")
    fresh = _clf(MLP_DIGITS, 5)
    with batched.replaying(jobs[0]):
        fresh.fit(X[fit], y[fit], X[val], y[val])
        second = _clf(MLP_DIGITS, 5).fit(X[fit], y[fit], X[val], y[val])  # trains alone
    assert fresh.module_ is jobs[0].clf.module_
    assert fresh.history_ == jobs[0].clf.history_ and fresh.train_accuracy_ is not None
    assert second.module_ is not fresh.module_
    np.testing.assert_array_equal(second.predict(X) == y, fresh.predict(X) == y)


def _welch_p(a, b) -> float:
    from scipy import stats

    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_accuracy_distribution_matches_one_at_a_time_training(digits):
    """Two-sample test over 20 seeds per arm (independent seeds: 0-19 alone, 20-39 batched).

    Level 0.01 (Welch t). Power: with the spread measured here (sd ~1.7 points of accuracy
    over seeds) a 20 + 20 design detects a shift of the mean of ~2.2 points with power 0.9
    (normal approximation; asserted below from the observed spread); the control, a one-epoch
    budget, is rejected. The test is deterministic (fixed seeds): it cannot flake.
    """
    X, y = digits
    fit, val, test = _split(len(y), 0, 1000)

    def accuracies(seeds, together, **budget):
        clfs = [_clf(MLP_DIGITS, s, **budget) for s in seeds]
        if together:
            fit_many([FitJob(c, X[fit], y[fit], X[val], y[val]) for c in clfs], device="cpu")
        else:
            for c in clfs:
                c.fit(X[fit], y[fit], X[val], y[val])
        return np.array([np.mean(c.predict(X[test]) == y[test]) for c in clfs])

    alone = accuracies(range(20), together=False)
    together = accuracies(range(20, 40), together=True)
    assert _welch_p(alone, together) > 0.01
    # power, stated above: detectable shift at this spread
    sd = np.sqrt((alone.var(ddof=1) + together.var(ddof=1)) / 2)
    from scipy import stats

    shift = (stats.norm.ppf(1 - 0.005) + stats.norm.ppf(0.9)) * sd * np.sqrt(2 / 20)
    assert shift < 0.03, f"the test could only see shifts of {shift:.3f} or more"
    # control: a training that really differs (one epoch) is told apart at the same level
    short = accuracies(range(20, 40), together=True, max_epochs=1)
    assert _welch_p(alone, short) < 0.01


def test_the_fit_hook_reaches_only_its_own_block_and_context(digits):
    """A hook is a context variable: nested blocks restore the outer hook, and a fit in
    another thread (another context) trains alone, unseen by the hook."""
    import threading

    from robench.learn.train import FIT_HOOK

    X, y = digits
    fit, val, _ = _split(len(y), 0, 300)
    jobs, outer = [], []
    with batched.deferring(outer):
        with batched.deferring(jobs):
            with pytest.raises(batched.FitDeferred):
                _clf(MLP_DIGITS, 1, max_epochs=1).fit(X[fit], y[fit], X[val], y[val])
        elsewhere = []
        worker = threading.Thread(target=lambda: elsewhere.append(
            _clf(MLP_DIGITS, 2, max_epochs=1).fit(X[fit], y[fit], X[val], y[val])))
        worker.start()
        worker.join()
        with pytest.raises(batched.FitDeferred):  # the outer hook is back
            _clf(MLP_DIGITS, 3, max_epochs=1).fit(X[fit], y[fit], X[val], y[val])
    assert FIT_HOOK.get() is None
    assert [j.clf.seed for j in jobs] == [1] and [j.clf.seed for j in outer] == [3]
    assert elsewhere and elsewhere[0].n_epochs_ == 1  # trained in its thread, not recorded


def test_what_was_exact_stays_exact_initial_weights_random_state_and_epochs(digits):
    """Batched training starts each model from fit's very weights, leaves torch's random state
    as fit leaves it, and (here, where rounding does not move a decision) runs and restores
    the same epochs with the same validation accuracy."""
    X, y = digits
    fit, val, _ = _split(len(y), 2, 800)
    alone = _clf(MLP_DIGITS, 11, max_epochs=4).fit(X[fit], y[fit], X[val], y[val])
    after_alone = torch.get_rng_state()
    torch.manual_seed(11)
    initial = MLP_DIGITS()
    jobs = [FitJob(_clf(MLP_DIGITS, s, max_epochs=4), X[fit], y[fit], X[val], y[val])
            for s in (11, 12)]
    modules = batched._build(jobs, torch.device("cpu"))
    for (name, p), q in zip(initial.named_parameters(), modules[0].parameters()):
        assert torch.equal(p, q), name
    assert torch.equal(jobs[0].rng_after, after_alone)
    fit_many(jobs, device="cpu")
    together = jobs[0].clf
    assert (together.n_epochs_, together.best_epoch_) == (alone.n_epochs_, alone.best_epoch_)
    assert together.val_accuracy_ == alone.val_accuracy_
    assert [h["epoch"] for h in together.history_] == [h["epoch"] for h in alone.history_]
