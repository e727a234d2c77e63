"""The coverage claims' controls: Table 2's computation on models without the feature.

A "model" here is i.i.d. unit Gaussian classes, their means ``sep`` apart, with the
nearest-mean softmax head, run through the family's own science module: a figure that comes
out the same for it follows from the construction (docs/claims.md, "The controls"). With
r = 1 a Gaussian class puts about half its points in the centroid region (the chi-square
median lies below its mean).
"""

from __future__ import annotations

import numpy as np

from robench.families.coverage import science as cov

#: Separation of the class means of a weak and of a strong null model (about 40% and 97%
#: accuracy with 10 classes in 8 dimensions).
WEAK, STRONG = 0.5, 2.0


def null_model(seed: int, sep: float, knobs: dict, n_classes: int = 10, per_class: int = 100,
               dim: int = 8, size: int = 300) -> dict:
    """Return one null model's test accuracy, CP (mean over classes) and accuracy per mix."""
    rng = np.random.default_rng(seed)
    means = sep * rng.standard_normal((n_classes, dim))

    def draw(n):
        y = np.repeat(np.arange(n_classes), n)
        return means[y] + rng.standard_normal((len(y), dim)), y

    Z_fit, y_fit = draw(per_class)
    Z_test, y_test = draw(per_class // 2)
    centroids, radius = cov.class_centroids(Z_fit, y_fit, n_classes)

    def proba(Z):
        logits = -0.5 * ((np.asarray(Z)[:, None, :] - centroids[None]) ** 2).sum(-1)
        e = np.exp(logits - logits.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    r = float(knobs.get("radius", 1.0))
    regions = cov.Regions(centroids, radius, r, float(knobs.get("theta1", 0.4)),
                          float(knobs.get("theta2", 0.6)), proba,
                          spread=cov.class_spread(Z_fit, y_fit, n_classes),
                          boundary_rule=knobs.get("boundary_rule", "paper"),
                          wc_l=float(knobs.get("wc_l", cov.PAPER_WC_L)))
    dist = cov.normalized_distance(Z_test, y_test, centroids, radius)
    out = {"model_acc": float(np.mean(proba(Z_test).argmax(1) == y_test)),
           "cp": float(np.nanmean(cov.centroid_positioning(dist, y_test, n_classes, r))),
           "mixes": {}}
    for mix in knobs.get("mixes") or [[0, 100], [30, 70], [50, 50], [70, 30], [100, 0]]:
        try:
            g = cov.generate(Z_test, y_test, regions, tuple(mix), size, seed=seed,
                             step=float(knobs.get("step", 0.1)))
        except cov.NoSeeds:
            out["mixes"][tuple(mix)] = None
            continue
        out["mixes"][tuple(mix)] = float(np.mean(proba(g["Z"]).argmax(1) == g["y"]))
    acc = list(out["mixes"].values())
    out["coverage"] = None if any(a is None for a in acc) else float(np.mean(acc))
    return out
