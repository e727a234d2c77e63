"""The plugin end to end: registration, knobs, refusals, a tiny run on digits, the kit."""

import importlib.metadata
import subprocess
import sys

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.testing import check_metric

TINY = ["--set", "corruption.cap=20", "--set", "corruption.corruptions=[\"gaussian-noise\","
        "\"contrast\"]", "--set", "corruption.severities=[1,3,5]", "--set", "train.max_epochs=2"]


def test_registers_protocol_metric_report_and_section(registry):
    proto, metric = registry.get("protocols", "corruption"), registry.get("metrics", "mce")
    assert proto.plugin == metric.plugin == "robench_corruption"
    assert metric.protocol == "corruption" and metric.higher_is_better is False
    assert metric.report is not None and metric.leaderboard.template == "mce.html"
    assert {k.name for k in proto.knobs} == {"baseline", "cap", "corruptions", "severities"}


def test_knobs_and_listing(registry):
    runner = CliRunner()
    out = runner.invoke(cli, ["knobs", "corruption"])
    assert out.exit_code == 0 and 'corruption.baseline = quick "mlp"' in out.output
    assert "corruption.cap = quick 60, standard 60, paper null" in out.output
    assert "--set corruption.*" in runner.invoke(cli, ["list", "protocols"]).output
    assert "mce" in runner.invoke(cli, ["list", "metrics"]).output


@pytest.mark.parametrize("setting, message", [
    ("corruption.baseline=\"nope\"", "unknown baseline model 'nope' (--set corruption.baseline)"),
    ("corruption.corruptions=[\"nope\"]", "unknown corruption(s) nope"),
    ("corruption.severities=[6]", "corruption.severities"),
    ("corruption.severities=[1,1]", "without repeats"),
])
def test_bad_knobs_are_refused_in_one_line(registry, tmp_path, setting, message):
    out = CliRunner().invoke(cli, ["run", "-d", "digits", "-m", "svm", "--metric", "mce",
                                   "--set", setting, "--db", str(tmp_path / "r.db")])
    assert out.exit_code == 2, out.output
    assert message in out.output and "Traceback" not in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_run_on_digits_end_to_end(registry, tmp_path):
    from robench.present.site import build_site

    db, runner = str(tmp_path / "r.db"), CliRunner()
    out = runner.invoke(cli, ["run", "-d", "digits", "-m", "svm", "-m", "mlp", "--metric", "mce",
                              "--executor", "local", "--db", db, *TINY, "-v"])
    assert out.exit_code == 0, out.output
    assert "2 trials planned" in out.output  # svm and the baseline mlp, shared by key
    assert "digits - mCE (Hendrycks & Dietterich), baseline 'mlp' = 1" in out.output
    res = runner.invoke(cli, ["results", "--metric", "mce", "--db", db])
    assert res.exit_code == 0 and "digits - mCE" in res.output
    mlp_line = next(l for l in res.output.splitlines() if l.strip().startswith("mlp "))
    assert mlp_line.split()[1] == "1.000"  # the baseline's mCE is 1 exactly
    from robench.storage.store import Store

    with Store(db) as store:
        rows = {(r["model"], r["score"]): r for r in store.scores(metric="mce")}
    assert rows[("mlp", "mce")]["value"] == 1.0
    svm = rows[("svm", "ce|contrast")]["details"]
    assert len(svm["accuracy"]) == 3 and len(svm["baseline_accuracy"]) == 3
    again = runner.invoke(cli, ["run", "-d", "digits", "-m", "svm", "-m", "mlp", "--metric", "mce",
                                "--executor", "local", "--db", db, *TINY])
    assert "2 already stored, 0 run" in " ".join(again.output.split()), again.output
    # without -v the run ends with the summary: mCE is its headline column (lower is better)
    lines = again.stdout.splitlines()
    at = next(i for i, l in enumerate(lines) if l == "digits") + 1  # the data set, its header
    assert lines[at].split() == ["model", "mCE"], lines[at]
    shown = [l.split() for l in lines[at + 1:at + 3]]
    want = sorted([m, f"{rows[(m, 'mce')]['value']:.3f}"] for m in ("mlp", "svm"))
    assert shown == sorted(want, key=lambda r: float(r[1])), again.stdout  # lower is better
    with Store(db) as store:
        build_site(store, tmp_path / "site", registry=registry)
    html = (tmp_path / "site" / "datasets" / "digits.html").read_text()
    assert "Common corruptions &mdash; mCE (baseline mlp = 1)" in html and "CE contrast" in html


def test_tabular_data_is_not_applicable(registry):
    from robench.specs import DatasetSpec

    metric = registry.get("metrics", "mce")
    tab = DatasetSpec(name="tab", load=lambda: None, description="rows", is_image=False)
    assert metric.applies_to(tab, registry.get("models", "svm")) == \
        "mce needs images and data set 'tab' is tabular"
    assert metric.applies_to(registry.get("datasets", "digits"), registry.get("models", "svm")) \
        is None


def test_passes_the_kit(registry):
    check_metric("mce", registry, dataset="digits", model="svm",
                 settings=["corruption.cap=20", 'corruption.corruptions=["gaussian-noise"]',
                           "corruption.severities=[1,5]", "train.max_epochs=2"])


def test_entry_point_is_declared_and_loads_in_a_fresh_process():
    eps = importlib.metadata.entry_points(group="robench")
    assert "corruption" in {ep.name for ep in eps}
    out = subprocess.run([sys.executable, "-m", "robench", "plugins"], capture_output=True,
                         text=True, timeout=120)
    assert "corruption 0.1.0 [entry point] ok" in out.stdout, out.stdout + out.stderr


def test_trial_spec_keeps_the_shared_layout_and_its_key(registry):
    # built by robench.run.trials.keyed_spec since it replaced a copy of the layout here: the
    # spec (so its key) must be exactly what that copy wrote
    from robench.run.config import RunConfig
    from robench.run.trials import trial_key
    from robench_corruption import protocol

    cfg = RunConfig(datasets=["digits"], models=["svm"], clusterers=[],
                    metrics=["mce"]).resolve(registry)
    knobs = cfg.knobs[protocol.SECTION]
    spec = protocol.trial_spec(registry.get("datasets", "digits"), "svm", cfg, registry)
    corruptions = spec["versions"]["corruptions"]
    assert corruptions and set(corruptions) <= set(registry.names("corruptions"))
    layout = {
        "protocol": protocol.NAME, "dataset": "digits", "model": "svm", "clusterer": "",
        "kind": protocol.KIND, "repeat": 0, "seed": cfg.seed,
        "params": {"test_size": cfg.test_size, "val_fraction": cfg.val_fraction,
                   "train": cfg.train, "cap": knobs["cap"],
                   "severities": [int(s) for s in knobs["severities"]],
                   "corruptions": sorted(corruptions)},
        "versions": {"protocol": protocol.VERSION, **registry.dataset_versions("digits"),
                     "model": registry.component_version("models", "svm"),
                     "corruptions": corruptions},
    }
    assert spec == {**layout, "key": trial_key(layout)}
