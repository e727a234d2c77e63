"""The vae-vgmm clusterer: empty-component rule, VAE caching, use by every protocol."""

import subprocess
import sys

import numpy as np
import pytest

from robench.families.shifted_cv import clusterer as vv
from tests.helpers import run_config
from robench.run.runner import execute


def _blobs(seed=0, n=40, centers=((0, 0), (6, 0), (0, 6)), dim=4):
    rng = np.random.default_rng(seed)
    pts = [rng.normal(size=(n, dim)) * 0.4 + np.array(list(c) + [0] * (dim - 2)) for c in centers]
    return np.concatenate(pts)


def test_empty_components_are_refilled_by_splitting_the_largest():
    Z = _blobs()
    raw = np.repeat([4, 1], [80, 40])  # a mixture that used 2 of 5 components (ids 1 and 4)
    labels, record = vv.fill_empty_components(Z, raw, 5, seed=0)
    assert sorted(np.unique(labels)) == [0, 1, 2, 3, 4]
    assert np.bincount(labels).min() > 0
    assert record["n_empty"] == 3 and len(record["splits"]) == 3
    first = record["splits"][0]
    assert first["size"] == 80 and sum(first["sizes_after"]) == 80  # the largest went first
    # nothing to repair: labels are only renumbered and the record says so
    labels, record = vv.fill_empty_components(Z, np.repeat([7, 2, 9], 40), 3, seed=0)
    assert sorted(np.unique(labels)) == [0, 1, 2] and record == {"n_empty": 0, "splits": []}


def test_identical_points_are_still_split_and_too_few_samples_is_an_error():
    Z = np.zeros((6, 3))
    labels, record = vv.fill_empty_components(Z, np.zeros(6, int), 3, seed=0)
    assert np.bincount(labels).min() > 0 and record["n_empty"] == 2
    with pytest.raises(ValueError, match="non-empty"):
        vv.fill_empty_components(Z[:2], np.zeros(2, int), 3, seed=0)


def test_vgmm_always_returns_k_non_empty_subdomains_and_records_the_mixture():
    Z = _blobs(n=30, centers=((0, 0), (40, 0)))  # two tight blobs, six components asked for
    labels, record = vv.vgmm_labels(Z, 6, seed=0)
    assert np.unique(labels).size == 6 and np.bincount(labels).min() > 0
    assert set(record) >= {"n_empty", "splits", "converged", "n_iter", "weights"}
    assert len(record["weights"]) == 6
    assert record["n_empty"] == len(record["splits"])


def test_clusterer_caches_its_vae_and_returns_labels_with_info():
    Z = _blobs(seed=1)
    first = vv.vae_vgmm_fit_predict(Z, 3, seed=0, epochs=2)
    again = vv.vae_vgmm_fit_predict(Z, 3, seed=0, epochs=2)
    assert np.array_equal(first, again) and np.unique(first).size == 3
    assert first.info["vae"]["architecture"] == "mlp" and not first.info["vae"]["cache_hit"]
    assert again.info["vae"]["cache_hit"], "the VAE is trained once per content and settings"
    assert np.asarray(first).dtype.kind == "i"


def test_conv_vae_is_the_papers_for_28x28_and_encodes_every_row():
    from robench.families.shifted_cv.vae import ConvVAE28, architecture, train_vae

    assert architecture(784, (1, 28, 28)) == "conv28" and architecture(64, (1, 8, 8)) == "mlp"
    rng = np.random.default_rng(0)
    X = rng.random((24, 784)).astype(np.float32)
    out = train_vae(X, image_shape=(1, 28, 28), epochs=1, seed=0, batch_size=8, max_train=16)
    assert out["means"].shape == (24, 62) and int(out["n_train"]) == 16
    vae = ConvVAE28()
    convs = [m for m in vae.encoder if m.__class__.__name__ == "Conv2d"]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (64, (4, 4), (2, 2)), (128, (4, 4), (2, 2))]
    import torch

    with torch.no_grad():
        vae.eval()
        assert vae.decode(torch.zeros(2, 62)).shape == (2, 784)


def test_find_sources_keeps_the_clusterers_info_and_source_aware_can_use_it(tiny_registry, store):
    from robench.data.sources import find_sources

    spec = tiny_registry.get("clusterers", "vae-vgmm")
    assert not spec.in_default_run
    ds = tiny_registry.load_dataset("tiny")
    version = tiny_registry.component_version("clusterers", "vae-vgmm")
    src = find_sources(ds, spec, version, 3, 0)
    assert len(src.info) == 3 and all("n_empty" in i and "vae" in i for i in src.info)
    assert src.k_per_class.tolist() == [3, 3, 3]
    cached = find_sources(ds, spec, version, 3, 0)
    assert cached.cache_hit and cached.info == src.info
    # usable wherever a clusterer is: the source-aware protocol's rho
    cfg = run_config(datasets=["tiny"], models=["centroid"], clusterers=["vae-vgmm"],
                    metrics=["rho"], repeats=2, k=3, executor="local")
    report = execute(cfg, tiny_registry, store)
    assert not report.failed
    rho = next(s for s in store.scores(metric="rho") if s["score"] == "rho")
    assert rho["clusterer"] == "vae-vgmm" and rho["value"] is not None


def test_registry_and_cli_listing_do_not_import_torch():
    code = ("import sys; from robench.plugins import make_registry; r = make_registry(); "
            "assert 'vae-vgmm' in r.names('clusterers') and 'bayesian-lenet' in r.names('models'); "
            "print('torch' in sys.modules, 'ot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
