"""Coverage testing (Mani et al.): EP/CP/BC/PBC by hand, covariate shift, generation, the
trained-model trend of Table 2, determinism, CLI and leaderboard."""

import math
import re

import numpy as np
import pytest

from robench.families.coverage import science as cov

# --- the measures on hand-made feature sets -----------------------------------------------------


def test_equivalence_partitioning_eq_3():
    ep = cov.equivalence_partitioning(np.array([0, 0, 0, 1]), 2)
    assert ep.tolist() == [1.5, 0.5]  # ns_i * nc / ns = 3*2/4, 1*2/4
    assert cov.equivalence_partitioning(np.array([0, 1, 2, 0, 1, 2]), 3).tolist() == [1, 1, 1]
    assert cov.equivalence_partitioning(np.array([0, 0]), 2).tolist() == [2.0, 0.0]


def _square():
    """Training features of class 0 at (+-1, 0), (0, +-1): centroid 0, RMS radius 1; class 1
    at (10 +- 2, 0): centroid (10, 0), RMS radius 2."""
    Z = np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [12, 0], [8, 0]], dtype=float)
    y = np.array([0, 0, 0, 0, 1, 1])
    return Z, y


def test_centroids_radius_and_centroid_positioning_eq_4():
    Z, y = _square()
    cent, radius = cov.class_centroids(Z, y, 2)
    assert np.allclose(cent, [[0, 0], [10, 0]]) and np.allclose(radius, [1, 2])
    Zt = np.array([[0.5, 0], [0, 1.0], [2, 0], [11, 0], [10, 3]])
    yt = np.array([0, 0, 0, 1, 1])
    d = cov.normalized_distance(Zt, yt, cent, radius)
    assert np.allclose(d, [0.5, 1.0, 2.0, 0.5, 1.5])
    assert np.allclose(cov.centroid_positioning(d, yt, 2, 1.0), [2 / 3, 1 / 2])
    assert np.allclose(cov.centroid_positioning(d, yt, 2, 0.4), [0, 0])
    # an empty class has no CP (NaN), not 0
    assert np.isnan(cov.centroid_positioning(d, yt, 3, 1.0)[2])


def test_boundary_and_pairwise_boundary_eq_5():
    P = np.array([
        [0.50, 0.45, 0.05],  # class 0, conf .50 in band, runner-up 1
        [0.40, 0.05, 0.55],  # class 0, conf .55 in band, most probable other than 0 is 2
        [0.90, 0.05, 0.05],  # class 0, confident
        [0.30, 0.35, 0.35],  # class 0, conf .35 below the band (3-way confusion)
        [0.10, 0.60, 0.30],  # class 1, conf .60 on the band's edge: in, runner-up 2
        [0.05, 0.90, 0.05],  # class 1, confident
    ])
    y = np.array([0, 0, 0, 0, 1, 1])
    bc = cov.boundary_conditioning(P, y, 3, 0.4, 0.6)
    assert np.allclose(bc[:2], [2 / 4, 1 / 2]) and np.isnan(bc[2])
    pbc = cov.pairwise_boundary(P, y, 3, 0.4, 0.6)
    assert np.allclose(pbc[0], [0, 1 / 4, 1 / 4])
    assert np.allclose(pbc[1], [0, 0, 1 / 2])
    assert np.allclose(np.nansum(pbc[:2], axis=1), bc[:2])  # rows sum to BC_i
    s = cov.summarize_pbc(pbc)
    # pairs {0,1}, {0,2}, {1,2} all have a boundary point
    assert s["pairs_covered"] == 1.0
    assert s["mean"] == pytest.approx((1 / 4 + 1 / 4 + 1 / 2) / 4)  # ordered pairs, rows 0-1


# --- covariate shift --------------------------------------------------------------------------


def _js_normal(mu: float) -> float:
    """JS(N(0,1) || N(mu,1)) / ln 2 by quadrature."""
    x = np.linspace(-12, 12 + mu, 200001)
    p = np.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)
    q = np.exp(-(x - mu) ** 2 / 2) / math.sqrt(2 * math.pi)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = lambda a: np.nansum(np.where(a > 0, a * np.log(a / m), 0)) * (x[1] - x[0])  # noqa
    return 0.5 * (kl(p) + kl(q)) / math.log(2)


def test_monte_carlo_js_matches_quadrature():
    rng = np.random.default_rng(0)
    A = rng.normal(0, 1, (20000, 1))
    B = rng.normal(1.5, 1, (20000, 1))
    r = cov.gmm_js(A, B, n_components=1, n_mc=20000, seed=0)
    truth = _js_normal(1.5)
    assert abs(r["js"] - truth) < max(4 * r["se"], 0.01), (r, truth)
    same = cov.gmm_js(A, rng.normal(0, 1, (20000, 1)), n_components=1, n_mc=20000, seed=1)
    assert same["js"] < 0.01
    far = cov.gmm_js(A, rng.normal(50, 1, (2000, 1)), n_components=1, n_mc=2000, seed=2)
    assert far["js"] > 0.99


def test_covariate_shift_sees_a_shifted_class_and_reports_a_null():
    rng = np.random.default_rng(1)
    Zt = rng.normal(0, 1, (600, 5))
    yt = np.repeat([0, 1], 300)
    Zs = rng.normal(0, 1, (200, 5))
    ys = np.repeat([0, 1], 100)
    Zs[ys == 1, 0] += 4.0  # class 1 of the test set moved along the main axis
    Zt[:, 0] *= 3  # make that axis the first principal component
    Zs[:, 0] *= 3
    out = cov.covariate_shift(Zt, yt, Zs, ys, 2, dims=2, n_components=3, n_mc=3000, seed=0)
    assert out["js"][1] > out["js"][0] + 0.2
    assert out["null"][0] is not None and abs(out["null"][0] - out["js"][0]) < 0.15


# --- generation -------------------------------------------------------------------------------


def _linear_space(seed=0):
    """Two Gaussian classes in 2-D and a logistic head; boundary = the line x0 = x1."""
    rng = np.random.default_rng(seed)
    Z = np.concatenate([rng.normal([0, 3], 1, (300, 2)), rng.normal([3, 0], 1, (300, 2))])
    y = np.repeat([0, 1], 300)
    W = np.array([[-1.0, 1.0], [1.0, -1.0]])  # logit_1 - logit_0 = 2 (x0 - x1)

    def proba(Zq):
        return cov.softmax(np.asarray(Zq) @ W)

    cent, radius = cov.class_centroids(Z, y, 2)
    regions = cov.Regions(cent, radius, 1.0, 0.4, 0.6, proba)
    return Z, y, regions, proba


@pytest.mark.parametrize("mix", cov.MIXES)
def test_generated_points_stay_in_their_region_and_carry_their_seed_label(mix):
    Z, y, regions, proba = _linear_space()
    g = cov.generate(Z, y, regions, mix, 300, seed=7, step=0.3)
    n_c = round(300 * mix[0] / 100)
    assert len(g["y"]) == 300 and (g["origin"] == "c").sum() == n_c
    c, b = g["origin"] == "c", g["origin"] == "b"
    assert regions.in_centroid(g["Z"][c], g["y"][c]).all()
    assert regions.in_boundary(g["Z"][b]).all()
    assert (g["y"] == y[g["seed_index"]]).all()  # the label is the seed's ground truth
    moved = np.linalg.norm(g["Z"] - Z[g["seed_index"]], axis=1)
    assert (moved > 0).mean() > 0.9  # perturbed, not copied
    # every class with seeds gets an even share
    for part in (c, b):
        counts = np.bincount(g["y"][part], minlength=2)
        assert counts.max() - counts.min() <= 1


def test_noise_follows_the_class_spread_and_keeps_dead_units_off():
    rng = np.random.default_rng(0)
    Z = np.abs(rng.normal(0, 1, (400, 3))) * np.array([1.0, 5.0, 0.0])  # unit 2 never fires
    y = np.zeros(400, dtype=int)
    cent, radius = cov.class_centroids(Z, y, 1)
    spread = cov.class_spread(Z, y, 1)
    assert np.allclose((spread ** 2).sum(1), radius ** 2)  # trace of the covariance = R^2
    regions = cov.Regions(cent, radius, 10.0, 0.0, 1.0, lambda q: np.ones((len(q), 1)),
                          clip_min=0.0, spread=spread)
    seeds = np.repeat(cent, 2000, axis=0)
    out, tries = cov.perturb_within(seeds, np.zeros(2000, dtype=int), "centroid", regions, rng,
                                    step=0.5, max_tries=3)
    assert (tries == 1).all() and (out[:, 2] == 0).all()  # the dead unit stays off
    moved = out - seeds
    assert moved[:, 1].std() == pytest.approx(5 * moved[:, 0].std(), rel=0.15)


def test_generation_is_deterministic_per_seed():
    Z, y, regions, _ = _linear_space()
    a = cov.generate(Z, y, regions, (50, 50), 200, seed=3)
    b = cov.generate(Z, y, regions, (50, 50), 200, seed=3)
    c = cov.generate(Z, y, regions, (50, 50), 200, seed=4)
    assert np.array_equal(a["Z"], b["Z"]) and np.array_equal(a["y"], b["y"])
    assert not np.array_equal(a["Z"], c["Z"])


def test_a_mix_without_seeds_is_an_error_and_the_headline_is_then_undefined():
    Z, y, regions, _ = _linear_space()
    narrow = cov.Regions(regions.centroids, regions.radius, 1.0, 0.49999, 0.5, regions.proba)
    with pytest.raises(cov.NoSeeds, match="no boundary point"):
        cov.generate(Z, y, narrow, (30, 70), 100, seed=0)
    assert cov.generate(Z, y, narrow, (100, 0), 100, seed=0)["y"].size == 100
    assert cov.coverage_guided_accuracy({"0-100": None, "100-0": 1.0}) is None
    assert cov.coverage_guided_accuracy({"0-100": 0.5, "100-0": 1.0}) == 0.75


def test_centroid_points_are_classified_better_than_boundary_points_by_a_linear_head():
    Z, y, regions, proba = _linear_space()
    acc = {}
    for mix in ((0, 100), (100, 0)):
        g = cov.generate(Z, y, regions, mix, 1000, seed=1)
        acc[mix] = float((proba(g["Z"]).argmax(1) == g["y"]).mean())
    assert acc[(100, 0)] > 0.95 and acc[(0, 100)] < 0.8


def test_all_boundary_accuracy_of_a_calibrated_head_is_its_confidence_not_chance():
    """docs/coverage.md: 0-100 accuracy near 50%, not the paper's 0-10%, for a calibrated model.

    Two unit Gaussians at (0, 3) and (3, 0): the true posterior's log-odds is 3 (x0 - x1), so a
    head with exactly those logits is calibrated and, among boundary points (top probability in
    [0.4, 0.6]), is right with probability equal to its mean confidence there (~0.55).
    """
    rng = np.random.default_rng(0)
    n = 20000
    Z = np.concatenate([rng.normal([0, 3], 1, (n, 2)), rng.normal([3, 0], 1, (n, 2))])
    y = np.repeat([0, 1], n)
    W = 1.5 * np.array([[-1.0, 1.0], [1.0, -1.0]])

    def proba(Zq):
        return cov.softmax(np.asarray(Zq) @ W)

    cent, radius = cov.class_centroids(Z, y, 2)
    regions = cov.Regions(cent, radius, 1.0, 0.4, 0.6, proba)
    band = regions.in_boundary(Z)
    confidence = proba(Z[band]).max(1).mean()
    assert band.sum() > 250 and 0.5 < confidence < 0.6
    g = cov.generate(Z, y, regions, (0, 100), 4000, seed=0)
    acc = float((proba(g["Z"]).argmax(1) == g["y"]).mean())
    se = math.sqrt(0.25 / band.sum())  # the seeds, not the 4000 draws, carry the uncertainty
    assert abs(acc - confidence) < 4 * se and acc > 0.4


# --- the feature space of the built-in models ---------------------------------------------------


@pytest.mark.parametrize("name,layer", [("mlp", "penultimate"), ("cnn-2", "last-conv"),
                                        ("lenet", "last-conv"), ("bayesian-lenet", "last-conv")])
def test_coverage_layer_and_head_reproduce_the_model(name, layer):
    from robench.plugins import make_registry
    from robench.specs import ModelContext

    reg = make_registry(load_entrypoints=False)
    ds = reg.load_dataset("mnist-5k")
    idx = np.arange(0, 5000, 50)
    ctx = ModelContext(ds.n_features, ds.n_classes, ds.image_shape, 0,
                       {"max_epochs": 1, "patience": 1, "batch_size": 64, "lr": 1e-3})
    clf = reg.get("models", name).build(ctx).fit(ds.X[idx], ds.y[idx], ds.X[idx], ds.y[idx])
    space, reason = cov.feature_space(clf)
    assert reason is None and space.layer == layer
    Z = space.encode(ds.X[idx])
    assert Z.ndim == 2 and len(Z) == len(idx)
    if name != "bayesian-lenet":  # its predictions average MC samples; the head uses the mean
        assert np.array_equal(space.proba(Z).argmax(1), clf.predict(ds.X[idx]))


def test_models_without_a_head_are_not_applicable():
    space, reason = cov.feature_space(object())
    assert space is None and "does not apply" in reason


# --- the protocol on a trained model ------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_trials(tmp_path_factory):
    from tests.helpers import run_config
    from robench.plugins import make_registry
    from robench.families.coverage import protocol as P
    from robench.run.trials import Combo, TrialEnv

    reg = make_registry(load_entrypoints=False)
    cfg = run_config(datasets=["digits"], models=["mlp"], clusterers=[], metrics=["coverage"],
                    train={"max_epochs": 6, "patience": 2},
                    coverage={"decoder_epochs": 2, "sizes": [100, 1000], "shift_mc": 500})
    combo = Combo(reg.get("datasets", "digits"), reg.get("models", "mlp"), None)
    spec = P.plan(combo, cfg, reg)[0]
    env = TrialEnv(reg)
    return spec, P.run(spec, env), P.run(spec, env)


def test_trained_model_follows_table_2_trend(digits_trials):
    _, res, _ = digits_trials
    gen = res["extra"]["generated"]
    assert res["extra"]["layer"] == "penultimate"
    # the paper's Table 2 trend: all-centroid sets are classified better than all-boundary
    assert gen["100-0@1000"]["accuracy"] >= gen["0-100@1000"]["accuracy"]
    assert gen["100-0@1000"]["accuracy"] > 0.9
    for g in gen.values():  # every generated point stayed in its region
        assert g["in_region"] == 1.0 and g["n"] in (100, 1000)
    q = res["extra"]["quality"]
    assert len(q["ep"]) == 10 and abs(np.mean(q["ep"]) - 1) < 1e-9
    assert np.allclose(np.nansum(q["pbc"], axis=1), q["bc"])


def test_boundary_seeds_follow_the_papers_rule_by_default(digits_trials):
    """Algorithm 1: boundary seeds are weakly misclassified (true-class probability <= wc_l).

    Every generated boundary point stays where the true class has probability <= 0.5, so the
    model can call it right only where no other class beats that: the all-boundary set's
    accuracy is far below the band rule's (top probability in [0.4, 0.6]: right about half
    the time for a calibrated model) -- Table 2's low all-boundary level.
    """
    spec, res, _ = digits_trials
    extra = res["extra"]
    assert spec["params"]["analysis"]["boundary_rule"] == "paper"  # in the trial's key
    assert extra["knobs"]["boundary_rule"] == "paper" and extra["knobs"]["wc_l"] == 0.5
    seeds = extra["seeds"]
    assert seeds["rule"] == "paper" and seeds["boundary"] == seeds["boundary_paper"]
    assert 0 < seeds["boundary_paper"] < seeds["n_test"] and seeds["boundary_band"] > 0
    gen = extra["generated"]
    assert gen["0-100@1000"]["in_region"] == 1.0
    assert gen["0-100@1000"]["accuracy"] < 0.5
    assert len(extra["quality"]["bc_paper"]) == 10


def test_protocol_is_reproducible_and_decoder_is_checked(digits_trials):
    _, first, second = digits_trials
    assert first["extra"]["generated"] == second["extra"]["generated"]
    assert first["extra"]["quality"] == second["extra"]["quality"]
    assert second["extra"]["model_cache_hit"]  # the reference model was loaded, not retrained
    dec = first["extra"]["decoder"]
    assert 0 <= dec["recognised"] <= 1 and isinstance(dec["legible"], bool)
    assert [r["label"] for r in dec["rows"]][:2] == ["test images", "decoded from their features"]
    assert len(dec["rows"]) == 2 + 5 and all(r["png"] for r in dec["rows"][:2])


def test_png_strip_draws_images_and_greys_out_missing_cells():
    import base64
    import io

    from PIL import Image

    white, black = np.ones((1, 4, 4)), np.zeros((1, 4, 4))
    png = cov.png_strip([white, None, black], scale=2, gap=1)
    px = np.asarray(Image.open(io.BytesIO(base64.b64decode(png))))
    assert px.shape == (8, 3 * 8 + 2, 3)
    assert (px[:, :8] == 255).all() and (px[:, 18:] == 0).all()
    assert (px[:, 9:17] == cov.MISSING_GREY).all()       # nothing generated for that class
    assert cov.png_strip([None, None]) == ""               # nothing to draw at all


def test_aggregate_defines_the_headline_as_the_mean_over_mixes(digits_trials):
    import json

    from robench.families.coverage.metric import aggregate

    spec, res, _ = digits_trials
    row = {**res, "protocol": "coverage", "status": "ok", "extra": json.dumps(res["extra"])}
    scores = {s.score: s for s in aggregate({"dataset": "digits", "model": "mlp"},
                                                     [row])}
    per_mix = [scores[f"acc@{m}@1000"].value for m in ("0-100", "30-70", "50-50", "70-30",
                                                        "100-0")]
    assert scores["coverage"].value == pytest.approx(np.mean(per_mix))
    assert scores["coverage"].details["knobs"]["radius"] == 1.0  # stored with the scores
    assert scores["coverage"].details["layer"] == "penultimate"
    for name in ("ep_min", "cp", "bc", "pbc", "pbc_pairs_covered", "covariate_shift",
                 "bc_paper", "boundary_share_paper", "boundary_share_band"):
        assert name in scores
    seeds = res["extra"]["seeds"]
    assert scores["boundary_share_paper"].value == pytest.approx(
        seeds["boundary_paper"] / seeds["n_test"])


def _extra_with(headline_parts: dict, bc: float, seed: int) -> dict:
    gen = {f"{mix}@100": {"accuracy": acc, "n": 100, "in_region": 1.0}
           for mix, acc in headline_parts.items()}
    return {"generated": gen, "quality": {"ep": [1.0, 1.0], "cp": [0.5, 0.5], "bc": [bc, bc]},
            "layer": "penultimate", "model_acc": 0.9, "n_test": 50, "reference_seed": seed,
            "decoder": {"recognised": 0.8} if seed == 0 else {"not_applicable": "repeat 0"}}


def test_aggregate_averages_reference_models_with_a_student_t_interval():
    import json

    from robench.families.coverage.metric import aggregate

    mixes = ("0-100", "30-70", "50-50", "70-30", "100-0")
    # per-repeat headlines 0.6, 0.7, 0.8 (each mix at the same accuracy)
    rows = [{"protocol": "coverage", "status": "ok", "repeat": r,
             "extra": json.dumps(_extra_with({m: acc for m in mixes}, bc=0.1 * (r + 1), seed=r))}
            for r, acc in enumerate((0.6, 0.7, 0.8))]
    rows.append({"protocol": "coverage", "status": "failed", "repeat": 3, "error": "boom\n..."})
    sc = {s.score: s for s in aggregate({"dataset": "d", "model": "m"}, rows)}
    head = sc["coverage"]
    # mean 0.7, sample sd 0.1, t(0.975, 2 df) = 4.302653: half-width 4.302653 * 0.1 / sqrt(3)
    assert head.value == pytest.approx(0.7) and head.n == 3
    assert head.ci_low == pytest.approx(0.7 - 0.248414, abs=1e-6)
    assert head.ci_high == pytest.approx(0.7 + 0.248414, abs=1e-6)
    assert head.details["per_repeat"] == pytest.approx([0.6, 0.7, 0.8])
    assert head.details["failed_repeats"] == {3: "boom"}
    assert sc["acc@50-50@100"].value == pytest.approx(0.7)
    assert sc["bc"].value == pytest.approx(0.2)            # summaries are means over repeats
    assert sc["decoder_recognised"].value == 0.8            # the decoder is repeat 0's
    from robench.families.coverage.metric import t_interval

    assert t_interval([0.5, 0.99, 0.98])[2] == 1.0 and t_interval([0.5, 0.01, 0.02])[1] == 0.0
    # one reference model: its value, no interval
    one = {s.score: s for s in aggregate({"dataset": "d", "model": "m"}, rows[:1])}
    assert one["coverage"].value == pytest.approx(0.6) and one["coverage"].ci_low is None


def test_repeats_plan_one_trial_per_reference_model_and_keep_repeat_0_key():
    from tests.helpers import run_config
    from robench.plugins import make_registry
    from robench.families.coverage import protocol as P
    from robench.run.trials import Combo

    reg = make_registry(load_entrypoints=False)
    combo = Combo(reg.get("datasets", "digits"), reg.get("models", "mlp"), None)
    def cfg(**knobs):
        return run_config(datasets=["digits"], models=["mlp"], clusterers=[],
                         metrics=["coverage"], coverage=knobs)

    three = P.plan(combo, cfg(repeats=3), reg)
    one = P.plan(combo, cfg(repeats=1), reg)
    assert [s["repeat"] for s in three] == [0, 1, 2] and len({s["key"] for s in three}) == 3
    assert three[0]["key"] == one[0]["key"]  # the repeat count is not a trial parameter
    assert P.repeat_seed(0, 0) == 0 and len({P.repeat_seed(0, r) for r in range(3)}) == 3
    with pytest.raises(ValueError, match="coverage.repeats: value 0 is below the minimum 1"):
        cfg(repeats=0)  # refused when the configuration is resolved, before any planning


# --- runner, CLI, leaderboard -------------------------------------------------------------------


def test_run_cli_results_and_leaderboard(tiny_registry, store, tmp_path):
    from click.testing import CliRunner

    from robench.cli import cli
    from tests.helpers import run_config
    from robench.present.site import build_site
    from robench.run.runner import execute

    cfg = run_config(datasets=["digits"], models=["mlp", "centroid"], clusterers=[],
                    metrics=["coverage"], executor="local",
                    train={"max_epochs": 3, "patience": 1},
                    coverage={"decoder_epochs": 1, "sizes": [50, 100], "shift_mc": 200,
                              "repeats": 2})
    report = execute(cfg, tiny_registry, store)
    assert not report.failed, [f["error"] for f in report.failed]
    sc = {(s.model, s.score): s for s in report.scores}
    assert sc[("mlp", "coverage")].value is not None and sc[("mlp", "coverage")].n == 2
    assert sc[("mlp", "coverage")].ci_low <= sc[("mlp", "coverage")].value
    assert "not apply" in sc[("centroid", "coverage")].details["not_applicable"]
    out = CliRunner().invoke(cli, ["results", "--metric", "coverage", "--db",
                                   str(tmp_path / "results.db")])
    assert out.exit_code == 0, out.output
    assert "cov-acc" in out.output and "100-0" in out.output and "not applicable" in out.output
    build_site(store, tmp_path / "site")
    html = (tmp_path / "site" / "datasets" / "digits.html").read_text()
    assert "Coverage-guided accuracy" in html and "<polyline" in html
    assert "mean, over the five" in html and "coverage acc." in html
    assert "confidence = calibrated" in html and "boundary_rule = paper" in html
    model = (tmp_path / "site" / "models" / "mlp.html").read_text()
    images = re.findall(r'<img alt="[^"]+" src="\.\./(images/[0-9a-f]{16}\.png)"', model)
    assert images and all((tmp_path / "site" / i).is_file() for i in images)
    assert "data:image" not in model and "coverage accuracy per mix" in model


def test_set_option_parses_and_rejects_unknown_knobs(tmp_path):
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.run.config import parse_settings
    from robench.plugins import make_registry

    reg = make_registry(load_entrypoints=False)
    assert parse_settings(["coverage.radius=0.8", "coverage.mixes=[[0,100],[100,0]]",
                           "train.max_epochs=3"], reg) == {
        "coverage": {"radius": 0.8, "mixes": [[0, 100], [100, 0]]}, "train": {"max_epochs": 3}}
    with pytest.raises(ValueError, match="unknown coverage knob 'radus'.*radius"):
        parse_settings(["coverage.radus=1"], reg)
    with pytest.raises(ValueError, match="Known:.*train"):
        parse_settings(["nope.x=1"], reg)
    out = CliRunner().invoke(cli, ["run", "-d", "digits", "--metric", "coverage", "--set",
                                   "coverage.theta1=0.9", "--db", str(tmp_path / "r.db")])
    assert out.exit_code != 0 and "theta1 <= theta2" in out.output
    assert "Traceback" not in out.output


def test_models_declaring_no_feature_space_are_skipped_when_planning_and_an_error_by_name():
    from tests.helpers import run_config
    from robench.learn.features import feature_support
    from robench.plugins import make_registry
    from robench.run.runner import ConfigError, plan_run
    from robench.specs import ModelContext

    reg = make_registry(load_entrypoints=False)
    base = dict(datasets=["digits"], clusterers=["kmeans"], repeats=1, executor="local")
    plan = plan_run(run_config(models=["svm", "mlp"], metrics=["rho", "purity-ratio", "coverage"],
                              **base), reg)
    assert {(s["model"], s["metric"]) for s in plan.skipped} == {("svm", "purity-ratio"),
                                                                 ("svm", "coverage")}
    assert all("has_features=False" in s["reason"] for s in plan.skipped)
    assert {g.metric.name for g in plan.groups if g.combo.model.name == "svm"} == {"rho"}
    with pytest.raises(ConfigError, match="svm.*needs a learned feature space"):
        plan_run(run_config(models=["svm"], metrics=["coverage"], explicit={"models": ["svm"]},
                           **base), reg)
    # the declaration agrees with what the built classifier says
    ds = reg.load_dataset("digits")
    for spec in reg.all("models"):
        if spec.has_features is False:
            clf = spec.build(ModelContext(ds.n_features, ds.n_classes, ds.image_shape, 0, {}))
            assert feature_support(clf) is not None, spec.name


def test_coverage_runs_after_and_reuses_the_purity_ratio_reference_model(store):
    from tests.helpers import run_config
    from robench.plugins import make_registry
    from robench.families.purity_ratio import protocol as cl
    from robench.families.coverage import protocol as P
    from robench.run.trials import Combo, TrialEnv
    from robench.run.runner import longest_first

    reg = make_registry(load_entrypoints=False)
    cfg = run_config(datasets=["digits"], models=["mlp"], clusterers=[], metrics=["coverage"],
                    train={"max_epochs": 2, "patience": 1},
                    clusterability={"zoo": [], "attacks": [], "corruptions": []},
                    coverage={"decoder_epochs": 0, "sizes": [50], "shift_mc": 100})
    ds = reg.get("datasets", "digits")
    cov_spec = P.plan(Combo(ds, reg.get("models", "mlp"), None), cfg, reg)[0]
    cl_spec = cl.trial_spec(ds, "mlp", cfg, reg)
    # the coverage trial is far cheaper by size estimate only once it is known; order is by tier
    assert [s["protocol"] for s in longest_first([cov_spec, cl_spec], reg, store)] == [
        "clusterability", "coverage"]
    env = TrialEnv(reg)
    first = cl.run(cl_spec, env)
    second = P.run(cov_spec, env)
    assert not first["extra"]["model_cache_hit"] and second["extra"]["model_cache_hit"]
    assert second["accuracy"] == first["accuracy"]  # the same model, trained once
    # repeat 1 is another reference model (own seed, split and cache entry), reproducibly
    rep1 = P.plan(Combo(ds, reg.get("models", "mlp"), None), cfg, reg)[1]
    third, fourth = P.run(rep1, env), P.run(rep1, env)
    assert not third["extra"]["model_cache_hit"] and fourth["extra"]["model_cache_hit"]
    assert third["extra"]["reference_seed"] == P.repeat_seed(cfg.seed, 1) != cfg.seed
    assert third["extra"]["generated"] == fourth["extra"]["generated"]
    assert third["extra"]["quality"] != second["extra"]["quality"]
    assert "repeat 0 only" in third["extra"]["decoder"]["not_applicable"]
