"""CONTRIBUTING.md's model-plugin walk-through works as written: its code runs against the API.

The walk-through's code blocks are marked ``<!-- test: model-plugin file=PATH -->``; this test
follows the steps (copy the template, rename, write the documented files), loads the plugin by
module path and checks its model with robench.testing, then runs the documented test file.
"""

import importlib.util
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from robench.plugins import make_registry
from robench.specs import ModelContext
from robench.testing import check_model

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "plugins" / "robench-template"
SNIPPET = re.compile(
    r"^[ \t]*<!-- test: model-plugin file=(?P<path>\S+) -->[ \t]*\n"
    r"[ \t]*```python\n(?P<code>.*?)^[ \t]*```", re.M | re.S)


def snippets() -> dict:
    """Return {file path: code} of every marked block, de-indented out of its list item."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return {m["path"]: textwrap.dedent(m["code"]) for m in SNIPPET.finditer(text)}


@pytest.fixture
def fresh_modules():
    """Forget the walk-through's package after the test (it is imported from tmp_path)."""
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "robench_my_model"]:
        del sys.modules[name]


def test_walkthrough_marks_its_files():
    assert set(snippets()) == {"robench_my_model/__init__.py", "robench_my_model/net.py",
                               "tests/test_my_model.py"}


def test_model_plugin_walkthrough_works_as_written(tmp_path, monkeypatch, fresh_modules):
    # 1. copy and rename (the commands of step 1)
    plugin = tmp_path / "robench-my-model"
    shutil.copytree(TEMPLATE, plugin, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (plugin / "robench_template").rename(plugin / "robench_my_model")
    (plugin / "tests" / "test_template.py").rename(plugin / "tests" / "test_my_model.py")
    # 2. the network and build: cnn.py is replaced by net.py; 3. the shortest test file
    (plugin / "robench_my_model" / "cnn.py").unlink()
    for path, code in snippets().items():
        (plugin / path).write_text(code, encoding="utf-8")

    monkeypatch.syspath_prepend(str(plugin))
    registry = make_registry(modules=["robench_my_model"], load_entrypoints=False)
    assert registry.infos["robench_my_model"].status == "ok"
    assert registry.infos["robench_my_model"].components == {"models": ["my-model"]}
    report = check_model("my-model", registry, train={"max_epochs": 2})
    assert {"features", "features-head", "unused-train-knobs"} <= set(report.passed)

    # what the walk-through says from_context does
    from robench.learn.train import DEFAULT_TRAIN, TorchClassifier

    ctx = ModelContext(10, 3, None, seed=5, train={"max_epochs": 2, "mc_samples": 4})
    clf = registry.get("models", "my-model").build(ctx)
    assert isinstance(clf, TorchClassifier)
    assert (clf.seed, clf.max_epochs, clf.patience) == (5, 2, DEFAULT_TRAIN["patience"])

    # the documented test file, as pytest would run it
    spec = importlib.util.spec_from_file_location("test_my_model",
                                                  plugin / "tests" / "test_my_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [fn for name, fn in vars(module).items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()


def test_walkthrough_does_not_recommend_spreading_ctx_train():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    walkthrough = text[text.index("## Contribute a model plugin"):
                       text.index("## Packaging and publishing a plugin")]
    assert "TorchClassifier.from_context(ctx, build_module)" in walkthrough
    assert not re.search(r"(?<!training)_budget", walkthrough), "the private helper"
    assert "TorchClassifier(build_module, seed=ctx.seed" not in walkthrough
