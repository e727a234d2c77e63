"""Fuzz the inputs a user types (issue 30, point 9): generated data references and ``--set``
values give exit 0 or 2, at most one error line, never a traceback, and a refusal changes no
file: not the database, not the folder the data lives in."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from robench.cli import cli

RUN = ["run", "-m", "centroid", "-c", "kmeans", "--metric", "rho", "-k", "2", "-r", "1",
       "--executor", "local"]


def snapshot(folder):
    """Return {relative path: sha256} of every file under ``folder`` but the cache."""
    out = {}
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "cache"]
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    from robench.plugins import make_registry, set_registry
    from tests.plugins.tiny import make_tiny

    root = tmp_path_factory.mktemp("fuzz")
    here = os.getcwd()
    os.chdir(root)  # a relative reference names something under the test's own folder
    ds = make_tiny()
    np.savez(root / "t.npz", X=ds.X, y=ds.y)
    header = ",".join(f"f{i}" for i in range(ds.X.shape[1]))
    rows = "\n".join(",".join(map(str, x)) + f",{c},{c}" for x, c in zip(ds.X, ds.y))
    (root / "t.csv").write_text(f"{header},a+b,a&b\n{rows}\n")
    set_registry(make_registry(modules=["tests.plugins.tiny"], load_entrypoints=False))
    yield root
    set_registry(None)
    os.chdir(here)


def check(place, argv):
    db = place / "fuzz.db"
    before = snapshot(place)
    result = CliRunner().invoke(cli, [*argv, "--db", str(db)])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        argv, repr(result.exception))
    assert result.exit_code in (0, 2), (argv, result.exit_code, result.stderr[-400:])
    assert "Traceback" not in result.stdout + result.stderr, argv
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) <= 1, (argv, result.stderr)
    if result.exit_code == 2:
        assert len(errors) == 1, (argv, result.stderr)
        assert snapshot(place) == before, f"a refusal changed a file: {argv}"


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
OPTION = st.sampled_from(["target", "groups", "shape", "size", "mode", "x", "", "target "])
REFERENCE = st.builds(
    lambda scheme, target, options: f"{scheme}:{target}" + (
        "?" + "&".join(f"{k}={v}" for k, v in options) if options else ""),
    st.sampled_from(["npz", "csv", "npy", "imagefolder", "nosuch", ""]),
    st.one_of(st.sampled_from(["{root}/t.npz", "{root}/t.csv", "t.csv", "{root}", "none"]),
              TEXT),
    st.lists(st.tuples(OPTION, st.one_of(
        TEXT, st.sampled_from(["a%2Bb", "a%26b", "a+b", "f0", "1,2,3", "100000", "0", "gray"]))),
        max_size=3),
)


VALID = st.sampled_from(["npz:{root}/t.npz", "csv:t.csv?target=a%2Bb", "csv:t.csv?target=a%26b",
                         "csv:{root}/t.csv?target=a+b", "npz:t.npz?shape=1,2,3"])


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(reference=st.one_of(REFERENCE, VALID))
def test_fuzz_data_references(place, reference):
    check(place, ["run", "-d", reference.replace("{root}", str(place)), *RUN[1:]])


KNOBS = ["train.max_epochs", "train.batch_size", "train.lr", "train.patience",
         "train.weight_decay", "train.mc_samples", "adequacy.sizes", "adequacy.repeats",
         "coverage.sizes", "coverage.mixes", "shifted_cv.folds", "rho.nope", "nosuch.x", "train"]
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=2)),
    max_leaves=6)
VALUE = st.one_of(
    st.integers(-3, 60).map(str), st.floats(-1, 20).map(str),
    st.lists(st.integers(-3, 400), max_size=4).map(json.dumps),
    JSON.map(json.dumps), TEXT,
    st.integers(1, 4000).map(lambda n: "[" * n + "]" * n),
    st.sampled_from(["1e30", str(10**30), "NaN", "Infinity", "-1", "[]", "[1e308]", "9" * 400]),
)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(knob=st.sampled_from(KNOBS), value=VALUE)
def test_fuzz_set_values(place, knob, value):
    check(place, ["run", "-d", "tiny", *RUN[1:], "--set", f"{knob}={value}"])
