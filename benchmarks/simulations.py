"""Simulations of robench's rank rules: the tables the tests and the benchmarks draw.

Moved out of the package (issue 48: no function of robench/ is called only by tests): the
tests (tests/stats, tests/run) load this module with ``tests.helpers.load_benchmark``, and
benchmarks/sequential_error_rates.py, training_noise_rates.py and decided.py import it.

* :func:`run_sequential` runs the real stopping rule (:func:`robench.stats.sequential.
  table_look` at every look) on simulated tables, and :func:`error_rates` counts its wrong
  calls;
* :func:`correlated_accuracies` draws whole tables with a shared per-repeat partition effect;
* :func:`residual_tables` draws pairs and tables whose paired differences carry a census part
  and training noise of a given shape (:data:`NOISES`) under the balanced or random design
  (the source effects and held-out draws of :func:`robench.stats.paired.null_pairs`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's robench

from robench.stats.paired import held_out, source_effects  # noqa: E402
from robench.stats.sequential import (ALPHA, FIRST_LOOK, PRECISION, cycle_looks,  # noqa: E402
                                      look_alphas, looks_for, table_look)


#: Training-noise (residual) shapes of the simulations, mean 0, sd 1, left-skewed (a run
#: that trains badly): normal; Gamma(2) (skewness -1.4); log-normal (-6.2); a degraded run
#: in 5, 10 or 20% of repeats (``DEGRADED_DROP`` sd of the normal part lower).
NOISES = ("normal", "gamma2", "lognormal", "degraded5", "degraded10", "degraded20")
#: How far a degraded run falls, in sd of the normal training noise (skewness of the
#: mixture -2.1, -1.8, -1.2 at 5, 10, 20%: the real random-split accuracies skew -1.1 to
#: -1.9 over 15 repeats).
DEGRADED_DROP = 6.0


def training_noise(rng, shape: str, size):
    """Return training noise of ``shape`` (:data:`NOISES`): mean 0, sd 1, left-skewed."""
    if shape == "normal":
        return rng.standard_normal(size)
    if shape == "gamma2":
        return -(rng.gamma(2.0, 1.0, size) - 2.0) / math.sqrt(2.0)
    if shape == "lognormal":
        mu, var = math.exp(0.5), (math.e - 1) * math.e
        return -(np.exp(rng.standard_normal(size)) - mu) / math.sqrt(var)
    if shape.startswith("degraded") and shape in NOISES:
        p, drop = int(shape[len("degraded"):]) / 100.0, DEGRADED_DROP
        fail = rng.random(size) < p
        return (rng.standard_normal(size) - drop * (fail - p)) / math.sqrt(
            1 + drop * drop * p * (1 - p))
    raise ValueError(f"unknown training-noise shape {shape!r}; known: {', '.join(NOISES)}")


def residual_tables(rng, runs: int, repeats: int, *, noise: str, census: float,
                    gaps=(0.0, 0.0), k: int = 5, design: str = "balanced",
                    source: str = "normal", sd: float = 0.01, mean_x: float = 0.8):
    """Return (x, i), shape (runs, M, repeats): models whose paired differences carry a
    census part and training noise of a given shape, under the balanced (or random) design.

    M = len(gaps); model m's exclusive accuracy in repeat r is ``mean_x + sd (gaps[m] +
    sqrt(census) l_m s[src_r] + sqrt(1 - census) e_m,r)``, i = 1 (a mean). Model 0 trains
    unstably: its e is ``training_noise(noise)`` scaled to sd sqrt(0.9) plus a normal part
    of sd sqrt(0.1), every other model's e is normal of sd sqrt(0.1) (the worst case for
    a one-sided error: the skew is not cancelled by the other model's). Loadings ``l_m``:
    1 for model 0, 0 for the others, so the pair (0, m) has exactly the share ``census`` of
    its psi variance from the held-out source (source effects :func:`source_effects` of
    ``source``, normalised to sd 1 over the k sources); pairs of two stable models have no
    census part and little noise. ``gaps`` in sd of psi: equal gaps are null pairs.
    """
    gaps = np.asarray(gaps, float)
    m = gaps.size
    eff = source_effects(rng, runs, k, source)
    eff = eff / np.sqrt(np.maximum((eff ** 2).mean(-1, keepdims=True), 1e-12))
    src = held_out(rng, runs, repeats, k, design)
    s = np.take_along_axis(eff, src, -1)[:, None, :]
    load = np.zeros((1, m, 1))
    load[0, 0, 0] = 1.0
    e = math.sqrt(0.1) * rng.standard_normal((runs, m, repeats))
    e[:, 0] = e[:, 0] + math.sqrt(0.9) * training_noise(rng, noise, (runs, repeats))
    x = mean_x + sd * (gaps[None, :, None] + math.sqrt(census) * load * s
                       + math.sqrt(1.0 - census) * e)
    return x, np.ones_like(x)


def run_sequential(x, i, *, max_repeats: Optional[int] = None, precision: float = PRECISION,
                   alpha: float = ALPHA, first: int = FIRST_LOOK,
                   higher_is_better: bool = True, cycle: Optional[int] = None,
                   spending: Optional[str] = None) -> dict:
    """Run the stopping rule on simulated tables; return what each run stopped at.

    ``x``, ``i``: shape ``(runs, models, R)`` of complete repeats (R >= ``max_repeats``).
    ``spending`` (``"obf"`` or ``"pocock"``): a look at every complete cycle
    (:func:`cycle_looks`), each at the level :func:`look_alphas` spends; None (the default,
    what ``robench run --until decided`` does today): the planned doubling looks of
    :func:`looks_for`, each at ``alpha / K`` (Bonferroni). At each look the models still open get repeats up to the look and
    :func:`table_look` decides; a run stops when its table is decided or at the last look.
    Returns the final :func:`table_look` arrays plus ``repeats`` (runs, M) and ``looks``.
    """
    x, i = np.asarray(x, float), np.asarray(i, float)
    runs, m, r = x.shape
    if spending:  # a look at every complete cycle, alpha spent across them
        plan = cycle_looks(max_repeats or r, cycle, first)
        levels = look_alphas(plan, plan[-1], alpha, spending)
    else:  # planned doubling looks, Bonferroni over them
        plan = looks_for(max_repeats or r, first, cycle)
        levels = [alpha / len(plan)] * len(plan)
    counts = np.zeros((runs, m), int)
    active = np.ones((runs, m), bool)
    running = np.ones(runs, bool)
    final = None
    idx = np.arange(r)
    for j, n in enumerate(plan):
        counts = np.where(active & running[:, None], n, counts)
        seen = idx[None, None, :] < counts[:, :, None]
        res = table_look(np.where(seen, x, np.nan), np.where(seen, i, np.nan), precision,
                         levels[j], higher_is_better, cycle=cycle, looks=1)
        stop = running & (res["decided"] | (j == len(plan) - 1))
        if final is None:
            final = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in res.items()}
        for k, v in res.items():
            if isinstance(v, np.ndarray):
                final[k][stop] = v[stop]
        running &= ~stop
        active = res["open"]
        if not running.any():
            break
    final.update(repeats=counts, looks=plan)
    return final


def error_rates(final: dict, rho_true, precision: float = PRECISION,
                higher_is_better: bool = True) -> dict:
    """Return the error rates of :func:`run_sequential`'s (or one look's) calls.

    Per pair: ``wrong_order`` (called ordered, but the model called better is not truly
    better), ``wrong_equivalent`` (called equivalent, but the true rho differ by >=
    precision), ``wrong`` (either), as fractions of all pairs; ``any_wrong`` (at least one
    wrong call in a table), ``decided``, ``mean_repeats`` and ``mc_se`` (of ``any_wrong``).
    """
    rho_true = np.asarray(rho_true, float)
    pairs = final["pairs"]
    status = final["status"]
    if not pairs:
        return {"wrong_order": 0.0, "wrong_equivalent": 0.0, "wrong": 0.0, "any_wrong": 0.0,
                "decided": float(np.mean(final["decided"])),
                "mean_repeats": float(np.mean(final.get("repeats", 0))), "mc_se": 0.0}
    true_d = np.array([rho_true[a] - rho_true[b] for a, b in pairs])
    if not higher_is_better:
        true_d = -true_d
    wrong_order = ((status == 1) & ~(true_d > 0)) | ((status == -1) & ~(true_d < 0))
    wrong_equiv = (status == 2) & (np.abs(true_d) >= precision)
    wrong = wrong_order | wrong_equiv
    out = {k: float(v.mean()) for k, v in
           (("wrong_order", wrong_order), ("wrong_equivalent", wrong_equiv), ("wrong", wrong))}
    out["any_wrong"] = float(wrong.any(-1).mean())
    out["decided"] = float(np.mean(final["decided"]))
    out["mean_repeats"] = float(np.mean(final["repeats"])) if "repeats" in final else float("nan")
    runs = status.shape[0]
    out["mc_se"] = float(np.sqrt(max(out["any_wrong"], 0.01) * (1 - out["any_wrong"]) / runs))
    return out


def correlated_accuracies(rng, runs: int, repeats: int, mean_x, mean_i, sd_x, sd_i, *,
                          shared=0.8, skew: Optional[Callable] = None):
    """Draw (x, i) of shape (runs, models, repeats) with a shared per-repeat partition effect.

    Model m's exclusive accuracy in repeat r is ``mean_x[m] + sd_x[m] * (sqrt(c_m) * z_r +
    sqrt(1 - c_m) * e_m,r)``: z_r is the repeat's partition (hard held-out sources hurt
    every model), e_m,r the model's own noise, c_m = ``shared`` (one number, or one per
    model: models hit by the partition effect to different degrees); two models' accuracies
    then correlate ``sqrt(c_a c_b)``. Inclusive accuracies likewise with their own partition
    effect. ``skew(rng, shape)`` replaces the standard normal z_r (mean 0, sd 1), e.g. a
    left-skewed effect where a few partitions are far harder than the rest.
    """
    mean_x, mean_i = np.asarray(mean_x, float), np.asarray(mean_i, float)
    sd_x, sd_i = np.asarray(sd_x, float), np.asarray(sd_i, float)
    m = len(mean_x)
    c = np.broadcast_to(np.asarray(shared, float), (m,))[:, None]
    draw = skew or (lambda g, shape: g.standard_normal(shape))
    zx = draw(rng, (runs, 1, repeats))
    zi = rng.standard_normal((runs, 1, repeats))
    a, b = np.sqrt(c), np.sqrt(1 - c)
    x = mean_x[:, None] + sd_x[:, None] * (a * zx + b * rng.standard_normal((runs, m, repeats)))
    i = mean_i[:, None] + sd_i[:, None] * (a * zi + b * rng.standard_normal((runs, m, repeats)))
    return x, i
