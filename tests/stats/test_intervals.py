"""Intervals over a few repeats: hand-derived values, coverage by simulation, tied ranks."""

import math

import numpy as np
import pytest

from tests.helpers import load_benchmark

from robench.stats import intervals as iv
T2 = 4.302652729749464  # t_{0.975, 2} (tables: 4.303)
T4 = 2.776445105197793  # t_{0.975, 4} (tables: 2.776)


def test_t_quantiles_are_the_table_values():
    assert iv.t_quantile(0.95, 2) == pytest.approx(T2, abs=1e-12)
    assert iv.t_quantile(0.95, 4) == pytest.approx(T4, abs=1e-12)


# --- a single mean ----------------------------------------------------------------------------


def test_mean_interval_by_hand():
    # [1, 2, 3]: mean 2, s = 1, n = 3: 2 -+ 4.3027 / sqrt(3) = 2 -+ 2.4841
    r = iv.mean_interval([1.0, 2.0, 3.0])
    assert (r.estimate, r.method, r.df, r.n) == (2.0, "t", 2.0, (3,))
    assert r.low == pytest.approx(2 - T2 / math.sqrt(3), abs=1e-12)
    assert r.high == pytest.approx(2 + T2 / math.sqrt(3), abs=1e-12)
    assert r.reason is None and r.defined
    # an accuracy's interval is clipped to [0, 1]; None entries (missing repeats) are skipped
    c = iv.mean_interval([0.9, None, 1.0, 0.95], bounds=(0.0, 1.0))
    assert c.n == (3,) and c.high == 1.0 and c.low == pytest.approx(0.95 - T2 * 0.05 / 3 ** .5)
    assert c.as_dict()["n"] == [3]


@pytest.mark.parametrize("values, reason", [
    ([], "no values"),
    ([0.9], "at least 2 repeats"),
    ([0.8, 0.8, 0.8], "all 3 values are equal"),
])
def test_mean_interval_without_an_interval_says_why(values, reason):
    r = iv.mean_interval(values)
    assert r.low is None and r.high is None and not r.defined
    assert reason in r.reason
    assert r.estimate == (None if not values else pytest.approx(values[0]))


# --- a ratio of two independent means ---------------------------------------------------------


def test_fieller_with_a_constant_denominator_is_the_t_interval_of_x_over_it():
    # x = [.7, .8, .9]: mean .8, s = .1; i = [.9, .9, .9]: v_i = 0, so Welch df = n_x - 1 = 2
    # and (Xbar - rho Ibar)^2 <= t^2 v_x gives rho = Xbar/Ibar -+ t sqrt(v_x)/Ibar
    # = .888889 -+ 4.302653 * .057735 / .9 = .888889 -+ .276015 -> [.612874, 1.164904].
    for method in ("fieller", "delta"):
        r = iv.ratio_interval([0.7, 0.8, 0.9], [0.9, 0.9, 0.9], method=method)
        assert r.df == pytest.approx(2.0)
        half = T2 * (0.1 / math.sqrt(3)) / 0.9
        assert r.estimate == pytest.approx(0.8 / 0.9)
        assert (r.low, r.high) == pytest.approx((0.8 / 0.9 - half, 0.8 / 0.9 + half), abs=1e-12)
        assert (r.low, r.high) == pytest.approx((0.612874, 1.164904), abs=1e-6)


def test_fieller_with_a_constant_numerator_inverts_the_denominators_interval():
    # x = [.8, .8, .8] (v_x = 0); i = [.90, .95, 1.00]: mean .95, s = .05, se = .05/sqrt(3)
    # = .0288675, t se = .124207. |Xbar - rho Ibar| <= t rho se  <=>
    # Xbar/(Ibar + t se) <= rho <= Xbar/(Ibar - t se) = [.8/1.074207, .8/.825793]
    # = [.744735, .968766]: the image of the t interval of mu_i, not symmetric around .842105.
    r = iv.ratio_interval([0.8, 0.8, 0.8], [0.90, 0.95, 1.00])
    assert (r.low, r.high) == pytest.approx((0.744735, 0.968766), abs=1e-6)
    assert r.high - r.estimate > r.estimate - r.low  # skewed towards large ratios
    d = iv.ratio_interval([0.8, 0.8, 0.8], [0.90, 0.95, 1.00], method="delta")
    # delta: .842105 -+ t * rho * se / Ibar = .842105 -+ 4.3027 * .842105 * .0288675 / .95
    assert (d.low + d.high) / 2 == pytest.approx(d.estimate)  # symmetric
    assert d.high - d.estimate == pytest.approx(T2 * (0.8 / 0.95) * 0.05 / 3 ** .5 / 0.95)


def test_fieller_on_a_three_value_example_by_hand():
    # x = [.7, .8, .9]: Xbar = .8, s_x^2 = .01, v_x = .01/3 = .0033333
    # i = [.90, .95, 1.00]: Ibar = .95, s_i^2 = .0025, v_i = .0025/3 = .00083333
    # rho_hat = .8/.95 = .842105; rho^2 v_i = .709141 * .00083333 = .00059095
    # Welch df = (.0033333 + .00059095)^2 / (.0033333^2/2 + .00059095^2/2)
    #          = 1.54000e-5 / 5.73017e-6 = 2.6875
    # a = Ibar^2 - t^2 v_i, b = Xbar Ibar = .76, c = Xbar^2 - t^2 v_x,
    # roots (b -+ sqrt(b^2 - a c)) / a.
    r = iv.ratio_interval([0.7, 0.8, 0.9], [0.90, 0.95, 1.00])
    assert r.df == pytest.approx(2.6875, abs=1e-4)
    t = float(iv.t_quantile(0.95, r.df))
    a, b, c = 0.95 ** 2 - t * t * 0.0025 / 3, 0.76, 0.64 - t * t * 0.01 / 3
    root = math.sqrt(b * b - a * c)
    assert (r.low, r.high) == pytest.approx(((b - root) / a, (b + root) / a), abs=1e-12)
    # b^2 - ac = t^2 (a v_x + v_i Xbar^2) (the identity behind "a > 0 => bounded")
    assert b * b - a * c == pytest.approx(t * t * (a * 0.01 / 3 + 0.0025 / 3 * 0.64))


def test_fieller_is_invariant_under_inversion():
    # (Xbar - rho Ibar)^2 <= t^2 (v_x + rho^2 v_i) times 1/rho^2 is the inequality for 1/rho,
    # and the Welch df of both forms is the same: the interval of i/x is (1/high, 1/low).
    x, i = [0.62, 0.71, 0.80, 0.77], [0.93, 0.95, 0.96]
    r, s = iv.ratio_interval(x, i), iv.ratio_interval(i, x)
    assert (s.low, s.high) == pytest.approx((1 / r.high, 1 / r.low), abs=1e-12)
    # identical samples: estimate 1 and low * high = c/a = 1
    same = iv.ratio_interval([0.8, 0.9, 0.85], [0.8, 0.9, 0.85])
    assert same.estimate == 1.0 and same.low * same.high == pytest.approx(1.0)
    # two equal-variance samples of 3 at rho = 1: Welch df = (2v)^2 / (2 v^2 / 2) = 4
    assert same.df == pytest.approx(4.0)


@pytest.mark.parametrize("x, i, estimate, reason", [
    ([0.8, 0.9], [], None, "no values in the denominator"),
    ([0.8], [0.9, 0.95], 0.8 / 0.925, "at least 2"),
    ([0.8, 0.8], [0.9, 0.9], 0.8 / 0.9, "zero spread"),
    ([0.5, 0.6], [0.0, 0.0], None, "mean is 0"),
    # Ibar = .1, se = .2/sqrt(3) = .1155: Ibar^2/se^2 = .75 <= t^2 = 18.5: unbounded
    ([0.5, 0.6, 0.7], [-0.1, 0.1, 0.3], 0.6 / 0.1, "not significantly different from 0"),
])
def test_ratio_without_a_finite_interval_says_why(x, i, estimate, reason):
    r = iv.ratio_interval(x, i)
    assert r.low is None and r.high is None and reason in r.reason
    assert r.estimate == (None if estimate is None else pytest.approx(estimate))


def test_the_vectorised_bounds_agree_with_the_sample_function():
    rng = np.random.default_rng(5)
    x, i = rng.normal(0.8, 0.05, (50, 4)), rng.normal(0.95, 0.01, (50, 6))
    lo, hi, df = iv.fieller_bounds(x.mean(1), x.var(1, ddof=1), 4, i.mean(1),
                                   i.var(1, ddof=1), 6)
    for k in range(50):
        r = iv.ratio_interval(x[k], i[k])
        assert (r.low, r.high, r.df) == pytest.approx((lo[k], hi[k], df[k]), rel=1e-12)
    with pytest.raises(ValueError, match="unknown ratio interval method"):
        iv.ratio_interval([1, 2], [1, 2], method="bootstrap")


# --- coverage by simulation (the table of docs/intervals.md) ------------------------------------


@pytest.fixture(scope="module")
def coverage():
    mod = load_benchmark("interval_coverage")
    # 20,000 experiments per row: Monte Carlo SE of a 95% coverage 0.15 points
    return mod, {(r["case"], r["R_x"]): r for r in mod.coverage_table(n_sims=20000, seed=0)}


@pytest.mark.parametrize("case", ["normal", "beta", "skewed", "noisy-denominator",
                                  "unequal-R"])
@pytest.mark.parametrize("R", [3, 5, 10, 30])
def test_rho_interval_covers_within_two_points_of_95(coverage, case, R):
    _, rows = coverage
    row = rows[(case, R)]
    assert abs(row["fieller"] - 0.95) <= 0.02, row
    assert abs(row["delta"] - 0.95) <= 0.02, row
    assert abs(row["mean_x"] - 0.95) <= 0.02 and abs(row["mean_i"] - 0.95) <= 0.02, row
    assert row["fieller_undefined"] == 0.0  # accuracies near 1: Fieller is always bounded


def test_heavy_skew_falls_short_as_documented_and_only_because_of_the_skew(coverage):
    # AccX ~ Beta(mean .90, sd .08), skewness -1.33: docs/intervals.md reports Fieller at
    # 89.5 / 90.6 / 92.2 / 93.9 % for R = 3 / 5 / 10 / 30 (40,000 experiments).
    _, rows = coverage
    documented = {3: 0.895, 5: 0.906, 10: 0.922, 30: 0.939}
    for R, value in documented.items():
        row = rows[("heavy-skew", R)]
        assert abs(row["fieller"] - value) <= 0.01, row
        # the ratio loses nothing beyond what Student's t loses on the skewed numerator alone
        assert abs(row["fieller"] - row["mean_x"]) <= 0.015, row
    assert rows[("heavy-skew", 3)]["fieller"] < rows[("heavy-skew", 30)]["fieller"]


def test_the_replaced_percentile_bootstrap_undercovers_at_r_3(coverage):
    mod, _ = coverage
    row = mod.coverage_table(n_sims=1500, seed=1, bootstrap_sims=1500, cases=["normal"],
                             rs=[3])[0]
    # it cannot reach beyond the observed range of 3 values (~75%; SE here ~1.1 points)
    assert row["bootstrap"] < 0.82 and row["fieller"] > 0.92, row


# --- a mean of skewed or mixture values (purity-ratio's interval) ------------------------------


def _beta_params(mean, sd):
    k = mean * (1 - mean) / sd ** 2 - 1
    return mean * k, (1 - mean) * k


#: Per-repeat purity-ratio shapes (true mean): normal; Beta with skewness -1.3; a k-means run
#: that merges two classes, 0.1 lower in 20 / 10 / 5% of repeats on normal noise of sd 0.02.
SKEWED_SHAPES = {
    "normal": (lambda rng, s: 0.8 + 0.04 * rng.standard_normal(s), 0.8),
    "skewed": (lambda rng, s: rng.beta(*_beta_params(0.9, 0.08), s), 0.9),
    "merge20": (lambda rng, s: 0.85 - 0.1 * (rng.random(s) < 0.2)
                + 0.02 * rng.standard_normal(s), 0.83),
    "merge10": (lambda rng, s: 0.85 - 0.1 * (rng.random(s) < 0.1)
                + 0.02 * rng.standard_normal(s), 0.84),
    "merge5": (lambda rng, s: 0.85 - 0.1 * (rng.random(s) < 0.05)
               + 0.02 * rng.standard_normal(s), 0.845),
}


def _vector_coverage(draw, true, n, k, runs=6000, seed=0):
    """Coverage of skewed_mean_interval's formula, vectorised over runs (the function itself
    is checked against it on a few rows)."""
    skew_corrected_bounds, skewness_se, t_quantile = (iv.skew_corrected_bounds, iv.skewness_se,
                                                       iv.t_quantile)

    rng = np.random.default_rng(seed)
    x = draw(rng, (runs, n))
    m = x.mean(1)
    c = x - m[:, None]
    g = (c ** 3).mean(1) / np.maximum((c ** 2).mean(1), 1e-300) ** 1.5
    se = x.std(1, ddof=1) / np.sqrt(n)
    lo, hi = skew_corrected_bounds(m, se, t_quantile(0.95, n - 1), g / np.sqrt(n),
                                   skewness_se(n) / np.sqrt(n), k)
    for j in range(3):
        got = iv.skewed_mean_interval(list(x[j]), k=k)
        assert (got.low, got.high) == pytest.approx((lo[j], hi[j]))
    return float(((lo <= true) & (true <= hi)).mean())


@pytest.mark.parametrize("shape", sorted(SKEWED_SHAPES))
def test_skewed_mean_interval_covers_95_percent_on_purity_shapes(shape):
    """At least 95% (-2 MC SE, 6,000 runs) at 3, 5, 10, 15, 30 repeats on every shape, where
    Student's 95% interval covers 86-92% on the skewed and merge shapes (seen with k = 2:
    at least 94.8%, merge5 at 30 repeats; at most 99.4%, normal at 5)."""
    draw, true = SKEWED_SHAPES[shape]
    floor = 0.95 - 2 * math.sqrt(0.95 * 0.05 / 6000)
    for n in (3, 5, 10, 15, 30):
        assert _vector_coverage(draw, true, n, 2.0, seed=n) >= floor, n


def test_students_interval_falls_short_where_the_skew_corrected_one_holds():
    """The control: the same shapes with no skew allowance and Student's bound (k = 0, skew
    0 is Student's) miss 95% on the merge shape at 5 repeats (seen 86%)."""
    t_quantile = iv.t_quantile
    draw, true = SKEWED_SHAPES["merge20"]
    rng = np.random.default_rng(5)
    x = draw(rng, (6000, 5))
    half = t_quantile(0.95, 4) * x.std(1, ddof=1) / math.sqrt(5)
    covered = float((np.abs(x.mean(1) - true) <= half).mean())
    assert covered < 0.93
    assert iv.skewed_mean_interval([0.8]).reason.startswith("one value")
    got = iv.skewed_mean_interval([0.8, 0.85, 0.7], bounds=(0.0, 1.0))
    assert got.method == "hall" and 0.0 <= got.low < got.estimate < got.high <= 1.0
