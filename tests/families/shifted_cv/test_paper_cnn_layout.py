"""The paper CNNs lenet, alexnet and 3conv3fc run channels-last end to end; the Bayesian ones not.

Version 3 of lenet, alexnet and 3conv3fc keeps conv weights and activations in channels-last
memory (as robench.learn.train.ConvNet), where version 2 ran NCHW convolutions with a conversion on
each side of every pool. The same network in version 2's layout (``_nchw`` below) must compute
the same function up to float rounding, and train to statistically the same accuracy (slow:
ROBENCH_SLOW_TESTS=1). The Bayesian versions keep version 2's layout (channels-last was slower
for them). The classifier contract of every paper CNN is checked by tests/contract/test_testing.py
(robench.testing.check_model).
"""

from __future__ import annotations


import numpy as np
import pytest
import torch

from robench.families.shifted_cv import cnns
from robench.families.shifted_cv.cnns import BayesianPaperCNN, PaperCNN

SLOW = pytest.mark.slow(reason="trains lenet and 3conv3fc 8 times each (~2 min on 2 cores)")
NAMES = list(cnns.ARCHITECTURES)


def _nchw(cls):
    """Return ``cls`` with version 2's layout: NCHW weights and inputs (the pool converts)."""
    return type("NCHW", (cls,), {"channels_last": False})


def _channels_last(t: torch.Tensor) -> bool:
    return t.dim() != 4 or t.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("arch", NAMES)
def test_weights_and_activations_stay_channels_last(arch):
    cls = PaperCNN
    torch.manual_seed(0)
    net = cls(arch, 10)
    assert all(_channels_last(p) for p in net.parameters())
    h = net._images(torch.rand(3, 784))
    assert _channels_last(h)
    for layer in net.conv:
        h = layer(h)
        # a 1x1 map (alexnet's last pool) is both layouts at once
        assert _channels_last(h), (arch, layer)
    # the NCHW variant does convert: its conv weights are not channels-last
    old = _nchw(cls)(arch, 10)
    assert not all(_channels_last(p) for p in old.conv.parameters())
    # the Bayesian version keeps version 2's layout
    assert not all(_channels_last(p) for p in BayesianPaperCNN(arch, 10).conv.parameters())


@pytest.mark.parametrize("arch", NAMES)
def test_same_function_as_the_nchw_layout(arch):
    """Same weights, same inputs: logits, features and gradients agree up to float rounding."""
    cls = PaperCNN
    torch.manual_seed(1)
    new = cls(arch, 10)
    torch.manual_seed(1)
    old = _nchw(cls)(arch, 10)
    for a, b in zip(new.state_dict().values(), old.state_dict().values()):
        assert torch.equal(a, b)  # the same values, whatever the memory layout
    x = torch.rand(5, 784)
    y = torch.tensor([0, 1, 2, 3, 4])
    for net in (new, old):
        net.train()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
    torch.testing.assert_close(new(x), old(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(new.features(x), old.features(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(new.conv_features(x), old.conv_features(x), rtol=1e-4, atol=1e-5)
    for (name, a), b in zip(new.named_parameters(), old.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-3, atol=1e-5, msg=name)


@SLOW
@pytest.mark.parametrize("arch", ["lenet", "3conv3fc"])
def test_trained_accuracy_statistically_the_same(arch):
    """4 seeds x (channels-last, NCHW): paired test-accuracy differences centre on 0."""
    import sys

    sys._robench_called_from_test = True
    from robench.plugins import make_registry
    from robench.learn.train import TorchClassifier

    torch.set_num_threads(1)
    data = make_registry(load_entrypoints=False).load_dataset("mnist-5k")
    rng = np.random.default_rng(0)
    order = rng.permutation(len(data.y))
    fit, val, test = order[:2000], order[2000:2400], order[2400:3400]
    X, y = data.X.astype(np.float32), data.y
    cls = PaperCNN
    acc = {"new": [], "old": []}
    for seed in range(4):
        for side, module in (("new", cls), ("old", _nchw(cls))):
            clf = TorchClassifier(lambda m=module: m(arch, 10), seed=seed, max_epochs=3,
                                  patience=3, batch_size=64, lr=1e-3)
            clf.fit(X[fit], y[fit], X[val], y[val])
            acc[side].append(float((clf.predict(X[test]) == y[test]).mean()))
    diff = np.array(acc["new"]) - np.array(acc["old"])
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    # paired: |mean difference| within 3 standard errors, or within half a point
    assert abs(diff.mean()) <= max(3 * se, 0.005), (acc, diff.mean(), se)
    assert min(acc["new"]) > 0.85, acc
