"""The paper's CNNs and their Bayesian versions: LRT layers, KL, MC predictions, applicability."""

import functools

import numpy as np
import pytest
import torch

from robench.families.shifted_cv.cnns import BayesianPaperCNN, PaperCNN, _bayes_layers


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # Tiny batches: two intra-op threads only add synchronisation (10x slower on a busy box).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_local_reparameterization_samples_the_preactivation_distribution():
    _, LRTLinear = _bayes_layers()
    torch.manual_seed(0)
    layer = LRTLinear(3, 2)
    with torch.no_grad():
        layer.rho_weight.fill_(np.log(np.expm1(0.5)))  # sigma 0.5
        layer.rho_bias.fill_(np.log(np.expm1(0.1)))
    x = torch.tensor([[1.0, -2.0, 0.5]]).repeat(20000, 1)
    with torch.no_grad():
        out = layer(x)
    mean = (x[:1] @ layer.mu_weight.T + layer.mu_bias).squeeze()
    var = ((x[:1] ** 2) @ torch.full((3, 2), 0.25) + 0.01).squeeze()
    assert torch.allclose(out.mean(0), mean, atol=0.05)
    assert torch.allclose(out.var(0), var, rtol=0.05)
    # each example draws its own noise (local, not one weight sample per mini-batch)
    assert out[:, 0].unique().numel() > 19_000
    layer.sample = False
    with torch.no_grad():
        assert torch.allclose(layer(x[:2]), mean.expand(2, 2))


def test_penalty_is_the_closed_form_kl_summed_over_every_weight_divided_by_n():
    torch.manual_seed(0)
    net = BayesianPaperCNN("lenet", 10)
    expected = 0.0
    for m in net.bayes_layers():
        for mu, rho in ((getattr(m, "mu_kernel", None), getattr(m, "rho_kernel", None)),
                        (getattr(m, "mu_weight", None), getattr(m, "rho_weight", None)),
                        (m.mu_bias, m.rho_bias)):
            if mu is None:
                continue
            q = torch.distributions.Normal(mu, torch.nn.functional.softplus(rho))
            p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
            expected += torch.distributions.kl_divergence(q, p).sum().item()
    assert net.penalty(1000).item() == pytest.approx(expected / 1000, rel=1e-5)
    assert len(net.bayes_layers()) == 5  # 2 conv + 2 fc + the head


def test_bayesian_predictions_average_over_monte_carlo_samples():
    torch.manual_seed(0)
    x = torch.rand(4, 784)
    one = BayesianPaperCNN("lenet", 10, mc_samples=1)
    with torch.no_grad():  # a posterior wide enough for the samples to matter
        for m in one.bayes_layers():
            for name in ("rho_kernel", "rho_weight", "rho_bias"):
                if getattr(m, name, None) is not None:
                    getattr(m, name).fill_(np.log(np.expm1(0.2)))
    one.eval()
    with torch.inference_mode():
        a, b = one(x).exp(), one(x).exp()
        assert not torch.allclose(a, b), "two single-sample predictions differ"
        assert torch.allclose(a.sum(1), torch.ones(4), atol=1e-5)
        torch.manual_seed(1)
        mean5 = one.mc_probabilities(x, 5)
        torch.manual_seed(1)
        singles = torch.stack([torch.softmax(one.head(one._features(x)), 1) for _ in range(5)])
        assert torch.allclose(mean5, singles.mean(0), atol=1e-6), "the mean of the samples"
        one.mc_samples = 100
        p, q = one(x).exp(), one(x).exp()
    spread_one = (a - b).abs().max().item()
    spread_many = (p - q).abs().max().item()
    assert spread_many < spread_one / 3, "the Monte Carlo mean is stable"
    f1, f2 = one.features(x), one.features(x)
    assert torch.equal(f1, f2), "features use the posterior means"


@pytest.mark.parametrize("arch,width", [("lenet", 84), ("alexnet", 256), ("3conv3fc", 1000)])
def test_architectures_map_28x28_rows_to_logits_and_features(arch, width):
    x = torch.rand(3, 784)
    for cls in (PaperCNN, BayesianPaperCNN):
        net = cls(arch, 10).eval()
        if cls is BayesianPaperCNN:
            net.mc_samples = 2
            assert all(isinstance(m, torch.nn.Softplus) for m in net.modules()
                       if isinstance(m, (torch.nn.Softplus, torch.nn.ReLU)))
        with torch.inference_mode():
            assert net(x).shape == (3, 10) and net.features(x).shape == (3, width)


def test_bayesian_classifier_trains_with_the_kl_term_and_predicts(tiny_registry):
    from robench.specs import ModelContext

    spec = tiny_registry.get("models", "bayesian-lenet")
    rng = np.random.default_rng(0)
    X = rng.random((80, 784)).astype(np.float32)
    y = np.arange(80) % 3
    clf = spec.build(ModelContext(784, 3, (1, 28, 28), seed=0,
                                  train={"max_epochs": 1, "patience": 1, "batch_size": 40,
                                         "mc_samples": 3}))
    clf.fit(X[:60], y[:60], X[60:], y[60:])
    assert clf.module_.mc_samples == 3
    assert clf.history_[0]["train_loss"] > 5, "cross-entropy plus KL / N (KL dominates here)"
    assert clf.predict(X[60:]).shape == (20,) and clf.features(X[:4]).shape == (4, 84)


def test_paper_cnns_apply_only_to_28x28_single_channel_images(tiny_registry):
    from tests.helpers import run_config
    from robench.run.runner import ConfigError, plan_run

    reg = tiny_registry
    for name in ("lenet", "alexnet", "3conv3fc", "bayesian-lenet", "bayesian-alexnet",
                 "bayesian-3conv3fc"):
        spec = reg.get("models", name)
        assert not spec.in_default_run
        assert spec.not_applicable(reg.get("datasets", "mnist-5k")) is None
        reason = spec.not_applicable(reg.get("datasets", "digits"))
        assert "1x28x28" in reason and "1x8x8" in reason
        assert "tabular" in spec.not_applicable(reg.get("datasets", "tiny"))
    cfg = run_config(datasets=["digits", "mnist-5k"], models=["lenet"], clusterers=["kmeans"],
                    metrics=["shifted-cv"], executor="local")
    plan = plan_run(cfg, reg)
    assert [(s["dataset"], s["model"]) for s in plan.skipped] == [("digits", "lenet")]
    with pytest.raises(ConfigError, match="1x28x28"):
        plan_run(run_config(datasets=["digits"], models=["lenet"], clusterers=["kmeans"],
                           metrics=["rho"], executor="local",
                           explicit={"models": ["lenet"], "datasets": ["digits"]}), reg)


def test_frequentist_cnn_trains_through_torch_classifier():
    from robench.learn.train import TorchClassifier

    rng = np.random.default_rng(0)
    X = rng.random((60, 784)).astype(np.float32)
    y = np.arange(60) % 2
    clf = TorchClassifier(functools.partial(PaperCNN, "lenet", 2), seed=0, max_epochs=2,
                          patience=2, batch_size=30, lr=1e-3)
    clf.fit(X[:40], y[:40], X[40:], y[40:])
    assert len(clf.history_) == 2 and clf.predict(X).shape == (60,)
    assert not hasattr(clf.module_, "penalty")


@pytest.mark.parametrize("arch", ["lenet", "alexnet", "3conv3fc"])
def test_registered_parameter_counts_are_the_built_modules(arch):
    from robench.plugins import get_registry

    def trainable(module):
        return sum(p.numel() for p in module.parameters() if p.requires_grad)

    registry = get_registry()
    for cls, name in ((PaperCNN, arch), (BayesianPaperCNN, f"bayesian-{arch}")):
        base, per_class = trainable(cls(arch, 3)), trainable(cls(arch, 4)) - trainable(cls(arch, 3))
        base -= 3 * per_class
        assert registry.get("models", name).params.startswith(
            f"{base + 10 * per_class:,} with 10 classes ({base:,} + {per_class:,} per class)")
