"""Boundary seeds by Algorithm 1 of the coverage paper (true-class probability <= wc_l) next to
robench's confidence band, on hand-made probability matrices and a linear head."""

import numpy as np
import pytest

from robench.families.coverage import science as cov

# Rows: (probabilities, true class). Band = top probability in [0.4, 0.6]; paper = probability
# of the true class <= wc_l = 0.5.
ROWS = [
    ([0.50, 0.45, 0.05], 0),  # tie-ish, right:           band yes (.50), paper yes (.50)
    ([0.40, 0.05, 0.55], 0),  # weakly misclassified:     band yes (.55), paper yes (.40)
    ([0.90, 0.05, 0.05], 0),  # confident and right:      band no  (.90), paper no  (.90)
    ([0.30, 0.35, 0.35], 0),  # three-way confusion:      band no  (.35), paper yes (.30)
    ([0.10, 0.60, 0.30], 1),  # right at .60:             band yes (.60), paper no  (.60)
    ([0.05, 0.05, 0.90], 1),  # confidently wrong:        band no  (.90), paper yes (.05)
]
P = np.array([r[0] for r in ROWS])
Y = np.array([r[1] for r in ROWS])
BAND = [True, True, False, False, True, False]
PAPER = [True, True, False, True, False, True]


def test_paper_rule_is_the_true_class_probability_at_most_wc_l():
    assert cov.PAPER_WC_L == 0.5 and cov.PAPER_WC_L < 0.6  # Algorithm 1: wc_l < theta2
    np.testing.assert_allclose(cov.true_class_confidence(P, Y), [.5, .4, .9, .3, .6, .05])
    assert cov.paper_boundary(P, Y).tolist() == PAPER
    assert cov.in_band(P, 0.4, 0.6).tolist() == BAND  # today's rule, unchanged
    # wc_l moves the bound on the true class only
    assert cov.paper_boundary(P, Y, wc_l=0.35).tolist() == [False, False, False, True, False,
                                                             True]


def test_paper_boundary_conditioning_per_class():
    # class 0: rows 0, 1, 3 of 4 -> 3/4; class 1: row 5 of 2 -> 1/2; class 2 empty -> NaN
    bc = cov.paper_boundary_conditioning(P, Y, 3)
    assert bc[:2].tolist() == [3 / 4, 1 / 2] and np.isnan(bc[2])
    # the band's BC of the same rows (eq. 5) for comparison: 2/4 and 1/2
    assert cov.boundary_conditioning(P, Y, 3, 0.4, 0.6)[:2].tolist() == [2 / 4, 1 / 2]


def _regions(rule, **kw):
    """Two Gaussian classes in 2-D, a logistic head; the decision boundary is x0 = x1."""
    rng = np.random.default_rng(0)
    Z = np.concatenate([rng.normal([0, 3], 1, (300, 2)), rng.normal([3, 0], 1, (300, 2))])
    y = np.repeat([0, 1], 300)
    W = np.array([[-1.0, 1.0], [1.0, -1.0]])  # logit_1 - logit_0 = 2 (x0 - x1)

    def proba(Zq):
        return cov.softmax(np.asarray(Zq) @ W)

    cent, radius = cov.class_centroids(Z, y, 2)
    return Z, y, proba, cov.Regions(cent, radius, 1.0, 0.4, 0.6, proba, boundary_rule=rule,
                                    **kw)


def test_regions_default_to_the_band_and_take_the_paper_rule_as_an_option():
    Z, y, proba, band = _regions("band")
    default = cov.Regions(band.centroids, band.radius, 1.0, 0.4, 0.6, proba)
    assert default.boundary_rule == "band" and default.wc_l == cov.PAPER_WC_L
    np.testing.assert_array_equal(default.in_boundary(Z), cov.in_band(proba(Z), 0.4, 0.6))
    _, _, _, paper = _regions("paper")
    np.testing.assert_array_equal(paper.in_boundary(Z, y), cov.paper_boundary(proba(Z), y))
    with pytest.raises(ValueError, match="needs the labels"):
        paper.in_boundary(Z)
    with pytest.raises(ValueError, match="unknown boundary rule"):
        cov.Regions(band.centroids, band.radius, 1.0, 0.4, 0.6, proba, boundary_rule="margin")


def test_generated_boundary_points_follow_the_rule_and_the_paper_rule_is_near_zero_in_2_classes():
    Z, y, proba, paper = _regions("paper")
    g = cov.generate(Z, y, paper, (0, 100), 300, seed=3, step=0.3)
    assert (g["origin"] == "b").all()
    # every generated point stays a boundary point of its seed's class: P(true class) <= .5
    assert (cov.true_class_confidence(proba(g["Z"]), g["y"]) <= 0.5).all()
    assert (g["y"] == y[g["seed_index"]]).all()
    # with two classes, true-class probability <= 1/2 means misclassified (or an exact tie):
    # the all-boundary accuracy is ~0 (the paper's Table 2 reports 0-10% at 0-100)
    acc_paper = float((proba(g["Z"]).argmax(1) == g["y"]).mean())
    assert acc_paper <= 0.02
    # today's band keeps points on both sides of the boundary: about half right
    _, _, _, band = _regions("band")
    gb = cov.generate(Z, y, band, (0, 100), 300, seed=3, step=0.3)
    acc_band = float((proba(gb["Z"]).argmax(1) == gb["y"]).mean())
    assert 0.3 < acc_band < 0.7
