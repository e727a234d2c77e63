"""Image corruptions: the register_corruptions hook, determinism, severity, caching."""

import numpy as np
import pytest

from robench import hookimpl
from robench.corruptions import all_names, corrupt_images, corrupted_sets, index_hash
from robench.plugins import Registry, make_plugin_manager
from robench.specs import CorruptionSpec, DatasetSpec


def images(n=3, c=1, size=8, seed=0):
    """Return n smooth test images (a bright blob on a dark ground) in [0, 1]."""
    rng = np.random.default_rng(seed)
    g = np.linspace(-1, 1, size)
    yy, xx = np.meshgrid(g, g, indexing="ij")
    out = np.empty((n, c, size, size), dtype=np.float32)
    for i in range(n):
        cx, cy = rng.uniform(-0.4, 0.4, 2)
        blob = np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / 0.2))
        out[i] = (0.1 + 0.8 * blob)[None] * np.ones((c, 1, 1))
    return out


def invert(images, severity, seed):
    """A toy corruption: blend towards the negative image by severity / 5."""
    a = severity / 5
    return (1 - a) * images + a * (1 - images)


class CorruptionPlugin:
    @hookimpl
    def register_corruptions(self, register):
        register(CorruptionSpec("invert", invert, "Blend towards the negative.", family="extra",
                                imagenet_c=False))


def test_register_corruptions():
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(CorruptionPlugin(), name="corr-plugin")
    reg = Registry(pm, infos)
    spec = reg.get("corruptions", "invert")
    assert spec.plugin == "corr-plugin" and spec.severities == 5
    builtin = [c for c in reg.all("corruptions") if c.plugin == "robench.builtin.corruptions"]
    assert len(builtin) == 19
    assert sum(c.imagenet_c for c in builtin) == 15
    assert {c.family for c in builtin} == {"noise", "blur", "weather", "digital", "extra"}
    tabular = DatasetSpec("tab", lambda: None, "tabular")
    assert "tabular" in spec.not_applicable(tabular)
    assert spec.not_applicable(DatasetSpec("img", lambda: None, "image", is_image=True)) is None


def test_list_corruptions_cli():
    from click.testing import CliRunner

    from robench.cli import cli

    out = CliRunner().invoke(cli, ["list", "corruptions"])
    assert out.exit_code == 0, out.output
    assert "gaussian-noise" in out.output and "saturate" in out.output


@pytest.mark.parametrize("name", ["gaussian_noise", "glass_blur", "impulse_noise", "frost"])
def test_corruptions_are_deterministic_per_seed(name):
    x = images(2)
    a = corrupt_images(x, name, 3, seed=1)
    b = corrupt_images(x, name, 3, seed=1)
    np.testing.assert_array_equal(a, b)
    assert a.shape == x.shape and a.dtype == np.float32
    assert 0 <= a.min() and a.max() <= 1
    assert not np.array_equal(a, corrupt_images(x, name, 3, seed=2))
    state = np.random.get_state()[1].copy()
    corrupt_images(x, name, 1, seed=5)
    assert (np.random.get_state()[1] == state).all()  # the global generator is restored


def test_all_corruptions_grey_and_rgb_and_monotone_in_severity():
    x = images(2, size=10)
    dist = np.zeros((len(all_names()), 5))
    for i, name in enumerate(all_names()):
        for s in range(1, 6):
            out = corrupt_images(x, name, s, seed=0)
            assert out.shape == x.shape
            dist[i, s - 1] = np.abs(out - x).mean()
    mean = dist.mean(0)
    assert (np.diff(mean) > 0).all(), mean  # stronger on average at every step
    rgb = images(1, c=3, size=28)
    out = corrupt_images(rgb, "frost", 2, seed=0)
    assert out.shape == rgb.shape and np.abs(out - rgb).mean() > 0.01


def test_corrupted_sets_are_cached_and_shared(tmp_path):
    calls = []

    def counting(images, severity, seed):
        calls.append(severity)
        return invert(images, severity, seed)

    spec = CorruptionSpec("counting", counting, "counts calls", plugin="t")
    x = images(2)
    kw = dict(fingerprint="fp", idx_key=index_hash([0, 1]))
    a = corrupted_sets(x, [spec], [1, 5], 0, **kw)
    b = corrupted_sets(x, [spec], [1, 5], 0, **kw)
    assert calls == [1, 5]  # computed once, then read from the cache
    np.testing.assert_array_equal(a[("counting", 5)], b[("counting", 5)])
    np.testing.assert_allclose(a[("counting", 5)], 1 - x)
