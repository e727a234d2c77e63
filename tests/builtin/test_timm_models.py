"""Models by reference: -m timm:ARCH (any timm architecture), the model reference mechanism,
pretrained weights only from the local cache, small inputs resized, timm's own features."""


import pytest
from click.testing import CliRunner

from robench.data.model_references import ModelReferenceError

SLOW = pytest.mark.slow(reason="timm:resnet18 end to end takes minutes on a CPU (the fast test "
                               "uses timm:test_resnet)")
FAST = ["--set", "train.max_epochs=1", "--set", "train.patience=1", "--executor", "local"]


def invoke(*args):
    from robench.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def registry():
    from robench.plugins import make_registry

    return make_registry(load_entrypoints=False)


# --- the reference mechanism -------------------------------------------------------------------


def test_timm_reference_resolves_to_a_model_named_by_its_canonical_reference(registry):
    import timm

    spec = registry.get("models", "timm:test_resnet")
    assert spec.name == "timm:test_resnet" and spec.plugin == "robench.builtin.timm_models"
    assert spec.requires_image and spec.has_features is True
    assert f"timm-{timm.__version__}" in registry.component_version("models", spec.name)
    # options are sorted: the same model named two ways is one model
    a = registry.get("models", "timm:test_resnet?pretrained=0&min_size=16")
    b = registry.get("models", "timm:test_resnet?min_size=16&pretrained=0")
    assert a is b and a.name == "timm:test_resnet?min_size=16&pretrained=0"


@pytest.mark.parametrize("ref, message", [
    ("timm:resnet1800", "timm has no architecture 'resnet1800'. Did you mean"),
    ("timm:test_resnet?colour=1", "unknown option(s) colour"),
    ("timm:test_resnet?pretrained=yes", "pretrained must be 0 or 1"),
    ("timm:test_resnet?min_size=032", "min_size must be an integer"),
    ("timm:test_resnet?size=64&min_size=8", "give size or min_size, not both"),
    ("timm:", "names nothing after 'timm:'"),
    ("keras:resnet", "no model or reference scheme 'keras:'"),
])
def test_bad_model_references_are_one_line_errors(registry, ref, message):
    with pytest.raises(ModelReferenceError, match=None) as info:
        registry.get("models", ref)
    assert message in str(info.value)


def test_cli_refuses_an_unknown_timm_architecture_with_exit_2(tmp_path):
    db = tmp_path / "r.db"
    res = invoke("run", "-d", "digits", "-m", "timm:resnet1800", "--db", db)
    assert res.exit_code == 2 and "timm has no architecture 'resnet1800'" in res.output
    assert "Traceback" not in res.output and not db.exists()


def test_register_model_resolvers_adds_a_scheme():
    """A plugin adds a scheme: -m const:K resolves through it, named canonically."""
    from robench import hookimpl
    from robench.plugins import Registry, make_plugin_manager
    from robench.specs import ModelResolverSpec, ModelSpec

    def resolve(target, options):
        return ModelSpec("const", lambda ctx: None, f"always predicts class {target}",
                         version="3")

    class Scheme:
        @hookimpl
        def register_model_resolvers(self, register):
            register(ModelResolverSpec("const", resolve, "constant predictor",
                                       syntax="const:CLASS[?tag=T]", options=("tag",),
                                       examples=("const:0",)))

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(Scheme(), name="scheme")
    reg = Registry(pm, infos)
    spec = reg.get("models", "const:2?tag=x")
    assert (spec.name, spec.plugin, spec.version) == ("const:2?tag=x", "scheme", "1/3")
    assert "const" in reg.names("model-resolvers")
    res = CliRunner().invoke(__import__("robench.cli", fromlist=["cli"]).cli, ["list", "models"])
    assert res.exit_code == 0


def test_a_registered_model_name_cannot_look_like_a_reference():
    from robench import hookimpl
    from robench.plugins import Registry, make_plugin_manager
    from robench.specs import ModelSpec

    class Bad:
        @hookimpl
        def register_models(self, register):
            register(ModelSpec("timm:x", lambda ctx: None, "no"))

    pm, infos = make_plugin_manager(load_entrypoints=False, builtins=False)
    pm.register(Bad(), name="bad")
    reg = Registry(pm, infos)  # only this plugin is disabled (issue 30)
    assert reg.infos["bad"].status == "failed"
    assert "references come from model resolvers" in reg.infos["bad"].error


def test_list_models_shows_examples_and_says_any_timm_name_works():
    res = invoke("list", "models")
    assert res.exit_code == 0
    assert "timm:ARCH[?pretrained=0|1][&min_size=N][&size=N]" in res.output
    assert "timm:resnet18" in res.output and "any timm architecture name works" in res.output


# --- the network --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, kw, expected", [
    ((1, 8, 8), {"min_size": 32}, (32, 32)),
    ((1, 28, 28), {"min_size": 32}, (32, 32)),
    ((3, 32, 32), {"min_size": 32}, (32, 32)),
    ((3, 64, 48), {"min_size": 32}, (64, 48)),
    ((1, 8, 16), {"min_size": 32}, (32, 64)),
    ((1, 8, 8), {"min_size": 32, "size": 20}, (20, 20)),
])
def test_small_inputs_are_upsampled_to_the_minimum_size(shape, kw, expected):
    from robench.builtin.timm_models import input_size

    assert input_size(shape, **kw) == expected


@pytest.mark.parametrize("arch", ["test_resnet", "test_vit", "test_efficientnet"])
def test_timm_net_features_are_timms_pre_logits_and_feed_the_head(arch):
    """8x8 grey digits work for a CNN and for a fixed-size ViT (created at the resized size)."""
    import torch

    from robench.builtin.timm_models import make_timm_net

    torch.manual_seed(0)
    net = make_timm_net(arch, (1, 8, 8), 10, pretrained=False, min_size=32).eval()
    x = torch.rand(5, 64)
    with torch.no_grad():
        z = net.features(x)
        body = net.body
        img = torch.nn.functional.interpolate(x.view(5, 1, 8, 8), size=(32, 32),
                                              mode="bilinear", align_corners=False)
        expected = body.forward_head(body.forward_features(img), pre_logits=True)
        logits = net(x)
    assert z.shape == (5, net.feature_width) and net.head.in_features == net.feature_width
    assert torch.allclose(z, expected)
    assert logits.shape == (5, 10) and torch.allclose(logits, net.head(z))
    assert body.num_classes == 0  # timm's own classifier is left out; robench's head is used


def _fake_hub(tmp_path, monkeypatch, arch="test_resnet"):
    """Put weights for ``arch`` where huggingface_hub's cache would hold them; return them."""
    import timm
    import torch
    from safetensors.torch import save_file

    cfg = timm.models.get_pretrained_cfg(arch)
    torch.manual_seed(123)
    state = timm.create_model(arch, pretrained=False).state_dict()
    repo = tmp_path / "hub" / ("models--" + cfg.hf_hub_id.replace("/", "--"))
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    save_file({k: v.contiguous() for k, v in state.items()}, str(snap / "model.safetensors"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return state


def test_pretrained_weights_come_from_the_local_cache_only(tmp_path, monkeypatch, registry):
    import torch

    state = _fake_hub(tmp_path, monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = registry.get("models", "timm:test_resnet?pretrained=1")
    assert "timm/test_resnet" in spec.version  # the weights' identity is in the key
    from robench.specs import ModelContext

    clf = spec.build(ModelContext(3 * 16 * 16, 4, (3, 16, 16), 0, {}))
    net = clf.build_module()
    loaded = net.body.state_dict()
    name = next(k for k in loaded if k.endswith("weight") and loaded[k].ndim == 4)
    assert torch.equal(loaded[name], state[name])  # the cached file's weights, not random ones
    assert net.normalise  # pretrained inputs are normalised with the weights' mean and std
    # grey images: timm builds the one-channel stem by summing the RGB filters
    grey = spec.build(ModelContext(16 * 16, 4, (1, 16, 16), 0, {})).build_module()
    assert torch.allclose(grey.body.state_dict()[name], state[name].sum(1, keepdim=True))


def test_pretrained_weights_missing_from_the_cache_are_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    db = tmp_path / "r.db"
    res = invoke("run", "-d", "digits", "-m", "timm:test_resnet?pretrained=1", "--db", db)
    assert res.exit_code == 2, res.output
    assert "not in the local cache" in res.output and "never downloads" in res.output
    assert "timm.create_model('test_resnet', pretrained=True)" in res.output
    assert not db.exists()


# --- end to end ---------------------------------------------------------------------------------


def _end_to_end(tmp_path, model):
    """Run rho and purity-ratio for ``model`` on digits; return the stored scores."""
    from robench.storage.store import Store

    db = tmp_path / "r.db"
    res = invoke("run", "-d", "digits", "-m", model, "-c", "kmeans", "-r", 1,
                 "--metric", "rho", "--metric", "purity-ratio", *FAST,
                 "--set", 'clusterability.zoo=["cnn-1"]', "--set", "clusterability.attack_cap=20",
                 "--set", "clusterability.corruption_cap=20",
                 "--set", 'clusterability.corruptions=["gaussian-noise"]',
                 "--set", "clusterability.severities=[1]",
                 "--set", 'clusterability.attacks=["fgsm"]', "--set", "clusterability.epsilons=[0.1]",
                 "--db", db)
    assert res.exit_code == 0, res.output
    again = invoke("run", "-d", "digits", "-m", model, "-c", "kmeans", "-r", 1,
                   "--metric", "rho", *FAST, "--db", db)
    assert again.exit_code == 0 and ", 0 run," in again.output  # stored under the same keys
    store = Store(db)
    scores = {(s["model"], s["metric"], s["score"]): s["value"] for s in store.scores()}
    trials = [t for t in store.trials() if t["model"] == model]
    return scores, trials


def test_timm_model_on_digits_runs_rho_and_purity_ratio(tmp_path):
    """The fast end-to-end test: a tiny timm architecture on 8x8 digits, upsampled to 32x32."""
    model = "timm:test_resnet"
    scores, trials = _end_to_end(tmp_path, model)
    assert trials and all(t["status"] == "ok" and t["device"] == "cpu" for t in trials)
    assert scores[(model, "rho", "rho")] is not None
    p = scores[(model, "purity-ratio", "purity-ratio")]
    assert p is not None and p > 0


@SLOW
def test_timm_resnet18_on_digits_runs_rho_and_purity_ratio(tmp_path):
    scores, trials = _end_to_end(tmp_path, "timm:resnet18")
    assert scores[("timm:resnet18", "rho", "rho")] is not None
    assert scores[("timm:resnet18", "purity-ratio", "purity-ratio")] is not None


def test_a_timm_model_passes_the_model_conformance_checks(registry):
    from robench.testing import check_model

    report = check_model("timm:test_resnet", registry)
    assert "checks passed" in str(report)
