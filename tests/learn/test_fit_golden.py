"""Pins what ``TorchClassifier.fit`` and ``fit_many`` produce, bit for bit, on one environment.

A refactor of the training loops must not change a single number a fit produces: the same
seed must give the same weights, histories and accuracies. ``fit_golden.json`` holds them
(floats as ``float.hex``, weights and predictions as SHA-256 of their bytes), written by
``python -m tests.learn.test_fit_golden`` on the environment it records (torch version and
CPU kernel level, one thread). Floating-point kernels sum in another order on another
torch or another vector width, so on a different environment the test is skipped and says
so; regenerate the file only for a change that is meant to change the numbers, and say why
in its commit.
"""

import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from robench.learn.batched import FitJob, fit_many  # noqa: E402
from robench.learn.train import MLP, ConvNet, TorchClassifier  # noqa: E402

GOLDEN = Path(__file__).with_name("fit_golden.json")
MLP_DIGITS = functools.partial(MLP, 64, 10, hidden=(64, 32))
CNN_DIGITS = functools.partial(ConvNet, (1, 8, 8), 10, channels=(8, 16), fc_width=32)


def _environment() -> dict:
    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability()}


def _digits(pixels=False):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X * 15).astype(np.uint8) if pixels else (X / 16).astype(np.float32)
    return X, y.astype(np.int64)


def _rows(n_samples, i, n_fit):
    p = np.random.default_rng(i).permutation(n_samples)
    return p[:n_fit], p[n_fit:n_fit + 200]


def _clf(build, seed, **kw):
    budget = dict(max_epochs=6, patience=2, batch_size=64, lr=2e-3)
    budget.update(kw)
    return TorchClassifier(build, seed=seed, **budget)


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _summary(clf, X) -> dict:
    """Everything a fit leaves behind, exactly: floats as hex, arrays as digests."""
    def exact(v):
        return float(v).hex() if isinstance(v, float) else v

    return {
        "history": [{k: exact(v) for k, v in entry.items()} for entry in clf.history_],
        "best_epoch": clf.best_epoch_, "n_epochs": clf.n_epochs_,
        "val_accuracy": exact(clf.val_accuracy_), "train_accuracy": exact(clf.train_accuracy_),
        "weights": _digest(*[p.detach().numpy() for p in clf.module_.state_dict().values()]),
        "predictions": _digest(clf.predict(X)),
    }


def _alone(build, seed, n_fit, pixels=False, **budget) -> dict:
    X, y = _digits(pixels)
    fit, val = _rows(len(y), seed, n_fit)
    clf = _clf(build, seed, **budget).fit(X[fit], y[fit], X[val], y[val])
    # torch's global random state as fit leaves it (batched replay restores it to this)
    return dict(_summary(clf, X), rng=_digest(torch.get_rng_state().numpy()))


def _watched() -> dict:
    """A fit whose epoch callback draws random numbers and adds a key to each epoch."""
    X, y = _digits()
    fit, val = _rows(len(y), 9, 800)

    def callback(clf, epoch):
        return {"noise": float(torch.rand(1)), "epoch": -1}  # existing keys are kept

    clf = _clf(MLP_DIGITS, 9, epoch_callback=callback).fit(X[fit], y[fit], X[val], y[val])
    return _summary(clf, X)


def _together(build, seeds, sizes, budgets) -> list:
    X, y = _digits()
    jobs = []
    for seed, n_fit, budget in zip(seeds, sizes, budgets):
        fit, val = _rows(len(y), seed, n_fit)
        jobs.append(FitJob(_clf(build, seed, **budget), X[fit], y[fit], X[val], y[val]))
    fit_many(jobs, device="cpu")
    return [dict(_summary(j.clf, X), rng=_digest(j.rng_after.numpy())) for j in jobs]


CASES = {
    "mlp-early-stop": lambda: _alone(MLP_DIGITS, 3, 700, lr=2e-2, max_epochs=10),
    "mlp-uint8-pixels": lambda: _alone(MLP_DIGITS, 4, 901, max_epochs=4),
    "cnn": lambda: _alone(CNN_DIGITS, 7, 600, max_epochs=3),
    "mlp-epoch-callback": _watched,
    "batched-mlp": lambda: _together(MLP_DIGITS, [3, 4, 5], [700, 901, 1130],
                                     [{"lr": 2e-2, "max_epochs": 10},
                                      {"lr": 2e-2, "max_epochs": 3},
                                      {"lr": 2e-2, "max_epochs": 10, "patience": 1}]),
    "batched-cnn": lambda: _together(CNN_DIGITS, [7, 8], [600, 710], [{"max_epochs": 2}] * 2),
}


def _computed(name) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every executor trains; thread count changes the sums
    try:
        return CASES[name]()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def golden():
    stored = json.loads(GOLDEN.read_text())
    if stored["environment"] != _environment():
        pytest.skip(f"values pinned on {stored['environment']}, this is {_environment()}: "
                    "kernels round differently elsewhere")
    return stored["cases"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_fit_gives_the_pinned_numbers_bit_for_bit(golden, name):
    got, want = _computed(name), golden[name]
    assert json.loads(json.dumps(got)) == want


def test_the_pins_restore_an_earlier_epoch_than_the_last():
    """The cases exercise early stopping: some restore an epoch before their last."""
    cases = json.loads(GOLDEN.read_text())["cases"]
    for name in ("mlp-early-stop", "batched-mlp"):
        runs = cases[name] if isinstance(cases[name], list) else [cases[name]]
        assert any(r["best_epoch"] < r["n_epochs"] for r in runs), name


def test_the_pins_would_see_a_changed_number(golden):
    """Control: one step of another learning rate is a different pin."""
    X, y = _digits()
    fit, val = _rows(len(y), 3, 700)
    clf = _clf(MLP_DIGITS, 3, max_epochs=1, lr=2.001e-2)
    got = _summary(clf.fit(X[fit], y[fit], X[val], y[val]), X)
    want = golden["mlp-early-stop"]
    assert got["weights"] != want["weights"]
    assert got["history"][0]["train_loss"] != want["history"][0]["train_loss"]


if __name__ == "__main__":  # write the pins (see the module docstring for when)
    GOLDEN.write_text(json.dumps({"environment": _environment(),
                                  "cases": {name: _computed(name) for name in sorted(CASES)}},
                                 indent=1) + "\n")
    print(f"wrote {GOLDEN}")
