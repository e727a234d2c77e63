"""Coverage does not depend on the softmax temperature (issue 28, point 1).

The regions of coverage testing are defined by the model's confidence, and the same softmax
classifies the generated points; with the raw softmax, a model whose logits are multiplied by 4
(same predictions) scored 51.6% instead of 88.7%. robench calibrates each model's confidence by
temperature scaling on the validation split first: multiplying a fixed head's logits by T must
leave CP, BC, PBC, the generated sets and the coverage-guided accuracy unchanged.
"""

import json
import math

import numpy as np
import pytest

from robench.families.coverage import science as cov
from tests.plugins.scaled_logits import FACTORS, model_name

# --- temperature scaling ------------------------------------------------------------------------


def _simulated(n=6000, classes=5, seed=0):
    """Logits of a calibrated model and labels drawn from its softmax."""
    rng = np.random.default_rng(seed)
    L = rng.normal(0, 2.0, (n, classes))
    P = cov.softmax(L)
    y = (P.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return L, y


@pytest.mark.parametrize("factor", [0.3, 1.0, 5.0])
def test_fit_temperature_recovers_the_factor_of_an_overconfident_model(factor):
    """Labels drawn from softmax(L); the model reports factor * L: the fitted temperature is
    the factor (its NLL-optimal undoing), within the sampling error of 6,000 labels."""
    L, y = _simulated()
    cal = cov.fit_temperature(factor * L, y)
    assert cal.method == "temperature" and not cal.at_bound and cal.n_val == len(y)
    assert cal.temperature == pytest.approx(factor, rel=0.05)
    assert cal.nll_calibrated <= cal.nll_raw + 1e-12
    assert np.array_equal(cal.logits(factor * L).argmax(1), L.argmax(1))  # same predictions


def test_fit_temperature_is_exactly_equivariant_to_the_scale_of_the_logits():
    L, y = _simulated(n=500, classes=4, seed=1)
    base = cov.fit_temperature(L, y)
    for T in FACTORS:
        cal = cov.fit_temperature(T * L, y)
        assert cal.temperature == T * base.temperature
        assert np.array_equal(cal.logits(T * L), base.logits(L))


def test_temperature_scaling_needs_a_validation_split_and_raw_is_the_identity():
    with pytest.raises(ValueError, match="non-empty validation split"):
        cov.fit_temperature(np.zeros((0, 3)), np.zeros(0, dtype=int))
    L = np.array([[1.0, 2.0], [0.5, -3.0]])
    assert np.array_equal(cov.Calibration().logits(L), L)
    assert cov.logit_scale(np.ones((4, 3))) == 1.0  # constant logits: no scale to remove


# --- a fixed head, its logits multiplied by T -------------------------------------------------


def _three_classes(seed=0):
    """Three overlapping Gaussian classes in 4-D (train, validation, test) and a linear head."""
    rng = np.random.default_rng(seed)
    means = np.array([[0, 0, 0, 0], [2.0, 0.5, 0, 0], [0.5, 2.0, 0, 1]])

    def draw(n):
        y = np.repeat(np.arange(3), n)
        return means[y] + rng.normal(0, 1, (len(y), 4)), y

    W = rng.normal(0, 1, (4, 3)) + 1.5 * means.T  # a fixed, imperfect head
    return draw(200), draw(60), draw(120), W


def _coverage_of_a_head(T, confidence="calibrated", rule="paper"):
    """Run the coverage measures and generation as the protocol does, logits times T."""
    (Zf, yf), (Zv, yv), (Zt, yt), W = _three_classes()

    def logits(Z):
        return T * (np.asarray(Z, dtype=np.float64) @ W)

    space = cov.FeatureSpace("penultimate", "test space", lambda X: X, logits)
    cal = cov.fit_temperature(logits(Zv), yv) if confidence == "calibrated" else \
        cov.Calibration()
    space = cov.calibrated_space(space, cal)
    P = space.proba(Zt)
    cent, radius = cov.class_centroids(Zf, yf, 3)
    regions = cov.Regions(cent, radius, 1.0, 0.4, 0.6, space.proba, spread=cov.class_spread(
        Zf, yf, 3), boundary_rule=rule)
    out = {"cp": cov.centroid_positioning(cov.normalized_distance(Zt, yt, cent, radius), yt, 3,
                                          1.0),
           "bc": cov.boundary_conditioning(P, yt, 3, 0.4, 0.6),
           "bc_paper": cov.paper_boundary_conditioning(P, yt, 3),
           "pbc": cov.pairwise_boundary(P, yt, 3, 0.4, 0.6), "sets": {}, "acc": {}}
    for mix in cov.MIXES:
        g = cov.generate(Zt, yt, regions, mix, 300, seed=11)
        out["sets"][mix] = (g["Z"], g["y"], g["seed_index"])
        out["acc"][cov.mix_name(mix)] = float((space.proba(g["Z"]).argmax(1) == g["y"]).mean())
    out["coverage"] = cov.coverage_guided_accuracy(out["acc"])
    return out


@pytest.mark.parametrize("rule", ["paper", "band"])
def test_a_fixed_heads_coverage_does_not_move_when_its_logits_are_multiplied(rule):
    base = _coverage_of_a_head(1.0, rule=rule)
    assert 0 < np.mean(base["bc"]) < 1 and base["acc"]["0-100"] < base["acc"]["100-0"]
    for T in FACTORS:
        other = _coverage_of_a_head(T, rule=rule)
        for key in ("cp", "bc", "bc_paper", "pbc"):
            assert np.array_equal(other[key], base[key], equal_nan=True), (T, key)
        for mix, (Z, y, idx) in base["sets"].items():
            Zo, yo, idxo = other["sets"][mix]
            assert np.array_equal(Zo, Z) and np.array_equal(yo, y) and np.array_equal(idxo, idx)
        assert other["acc"] == base["acc"] and other["coverage"] == base["coverage"]


def test_the_papers_raw_softmax_stays_a_named_option_and_moves_with_the_temperature():
    """confidence=raw is the paper's rule as the model gives it: sharper logits, fewer points
    in the band and a different all-boundary set (why calibrated is the default)."""
    raw = {T: _coverage_of_a_head(T, confidence="raw", rule="band") for T in (1.0, 4.0)}
    assert np.mean(raw[4.0]["bc"]) < np.mean(raw[1.0]["bc"])
    assert raw[4.0]["coverage"] != raw[1.0]["coverage"]


# --- the protocol and the CLI with a plugin model whose evaluation logits are scaled -----------

KNOBS = {"repeats": 2, "sizes": [100, 300], "decoder_epochs": 0, "shift_mc": 100}


@pytest.fixture(scope="module")
def scaled_registry():
    from robench.plugins import make_registry

    return make_registry(modules=["tests.plugins.scaled_logits"], load_entrypoints=False)


def test_protocol_trials_of_a_model_with_scaled_logits_are_identical(scaled_registry):
    from robench.families.coverage import protocol as P
    from robench.run.trials import Combo, TrialEnv
    from tests.helpers import run_config

    reg = scaled_registry
    names = [model_name(T) for T in FACTORS]
    cfg = run_config(datasets=["digits"], models=names, clusterers=[], metrics=["coverage"],
                     registry=reg, coverage=dict(KNOBS, repeats=1))
    env = TrialEnv(reg)
    extras = {}
    for T, name in zip(FACTORS, names):
        spec = P.plan(Combo(reg.get("datasets", "digits"), reg.get("models", name), None),
                      cfg, reg)[0]
        row = P.run(spec, env)
        assert not row.get("not_applicable"), row
        extras[T] = row["extra"]
    base = extras[1.0]
    assert base["knobs"]["confidence"] == "calibrated"
    assert base["seeds"]["boundary"] > 0 and base["generated"]["0-100@300"]["accuracy"] is not None
    for T, extra in extras.items():
        for key in ("quality", "seeds", "generated"):
            assert extra[key] == base[key], (T, key)
        assert extra["model_acc"] == base["model_acc"]
        assert extra["calibration"]["temperature"] == T * base["calibration"]["temperature"]


def test_cli_scores_a_plugin_model_with_scaled_logits_alike(scaled_registry, tmp_path):
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.plugins import set_registry

    db = str(tmp_path / "r.db")
    argv = ["run", "-d", "digits", "--metric", "coverage", "--executor", "local", "--db", db]
    for T in FACTORS:
        argv += ["-m", model_name(T)]
    for key, value in KNOBS.items():
        argv += ["--set", f"coverage.{key}={json.dumps(value)}"]
    set_registry(scaled_registry)
    try:
        out = CliRunner().invoke(cli, argv)
        assert out.exit_code == 0, out.output
        res = CliRunner().invoke(cli, ["results", "--metric", "coverage", "--format", "json",
                                       "--db", db])
        assert res.exit_code == 0, res.output
        table = CliRunner().invoke(cli, ["results", "--metric", "coverage", "--db", db])
        assert table.exit_code == 0 and "confidence calibrated: temperature" in table.output
    finally:
        set_registry(None)
    rows = json.loads(res.output)
    by_model = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["score"]] = r
    base = by_model[model_name(1.0)]
    assert base["coverage"]["value"] is not None and base["coverage"]["n"] == 2
    compared = ["coverage", "cp", "bc", "bc_paper", "pbc", "pbc_pairs_covered",
                "boundary_share_paper", "boundary_share_band", "model_acc"] + [
        s for s in base if s.startswith("acc@")]
    assert len(compared) > 15
    for T in FACTORS:
        scores = by_model[model_name(T)]
        for s in compared:
            for col in ("value", "ci_low", "ci_high"):
                assert scores[s][col] == base[s][col], (T, s, col)
        temps = scores["coverage"]["details"]["temperatures"]
        assert all(math.isclose(t, T * b) for t, b in zip(
            temps, base["coverage"]["details"]["temperatures"]))
