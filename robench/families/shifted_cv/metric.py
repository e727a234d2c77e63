"""The ``shifted-cv`` metric: shifted vs random K-fold CV and the fold Wasserstein ratio."""

from __future__ import annotations

from robench.metric_kit import error_line, failure
from robench.present.formatting import as_dict
from robench.specs import Score
from robench.families.shifted_cv import protocol as sc

METRIC = "shifted-cv"
VERSION = "1"
DESCRIPTION = ("Shifted (sub-domain) vs random K-fold CV: test accuracy, the "
               "validation-test gap, std ratio, and the fold Wasserstein ratio.")
HIGHER_IS_BETTER = True
USES_CLUSTERER = True
DISPLAY_ORDER = 40
#: The plugin module that registered shifted-cv before the families moved (fingerprints).
MOVED_FROM = "robench.builtin.vae_vgmm"
REFERENCES = (("Xudong Sun, Alexej Gossmann, Yu Wang and Bernd Bischl, Variational "
               "Resampling Based Assessment of Deep Neural Networks under Distribution "
               "Shift (IEEE SSCI 2019)", "https://arxiv.org/abs/1906.02972"),)
DEFINITION = (
    "Shifted K-fold cross-validation (Sun et al., Algorithms 1-2) vs random stratified K-fold. "
    "Sub-domains: the run's clusterer with k = K per class (vae-vgmm: a VAE per class and a "
    "variational GMM, Dirichlet-distribution prior, on its latent means; an empty component is "
    "refilled by splitting the largest cluster with 2-means). Per class the K sub-domains are "
    "assigned to the K folds (shuffled per class and repeat when repeats > 1); each fold is the "
    "test set once; the other folds are split at random, stratified, 80/20 into train and "
    "validation; the model early-stops and selects its epoch on validation only. Random CV "
    "uses the same rule on StratifiedKFold folds. shifted-cv (headline): mean test accuracy "
    "over the shifted folds x repeats. acc_random: the same under random CV. drop: acc_random "
    "- shifted-cv. gap_shifted / gap_random: mean over folds of validation minus test accuracy "
    "(the paper's 26-point drop is gap_shifted at the last epoch). std_ratio: sample std of "
    "the shifted test accuracies / sample std of their validation accuracies (the paper's ~14); "
    "details hold std_ratio_random (shifted test std / random test std), the last-epoch "
    "figures, every fold and the mean train / validation / test curves per epoch (test read by "
    "an observer after each epoch, never for selection). wasserstein_ratio (model ''): mean "
    "off-diagonal W1 distance between the K shifted folds / that between the K random folds, "
    "in the latent means of one VAE trained on all classes (POT emd2, Euclidean cost, exact; "
    "folds subsampled to max_points; a distance counts only if POT converged)."
)


def _diff(a, b):
    return None if a is None or b is None else a - b


def _ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def _fold_fallback(trials: list) -> dict:
    """Return the fewer-folds fallback of a group's shifted trials, or {} (the folds asked for)."""
    for t in trials:
        p = t.get("params") or {}
        if t.get("kind") == "shifted" and p.get("folds_requested"):
            return {"folds": p["folds"], "folds_requested": p["folds_requested"],
                    "fold_fallback": sc.fallback_note(p["folds"], p["folds_requested"])}
    return {}


def aggregate(group: dict, trials: list) -> list:
    """Turn one (dataset, model, clusterer)'s fold trials into scores, plus the fold distances."""
    clus = group["clusterer"]
    base = dict(dataset=group["dataset"], model=group["model"], clusterer=clus, metric=METRIC)
    summary = sc.summarize(trials, clus)
    stats = {}
    for kind in sc.KINDS:
        s = summary[kind]
        s = {**s, "gap": [_diff(v, t) for v, t in zip(s["val"], s["test"])],
             "last_gap": [_diff(v, t) for v, t in zip(s["last_val"], s["last_test"])]}
        stats[kind] = {**{k: sc.mean_std(s[k]) for k in (
            "test", "val", "train", "gap", "last_test", "last_val", "last_gap")},
            "n": len(s["test"])}
    sh, ra = stats["shifted"], stats["random"]
    n_failed = sum(1 for t in trials if failure(t) is not None and t.get("kind") in sc.KINDS)
    table = {kind: {name: {"mean": v[0], "std": v[1]} for name, v in st.items() if name != "n"}
             for kind, st in stats.items()}
    details = {"table": table, "n_failed": n_failed,
               "folds": {k: summary[k]["folds"] for k in sc.KINDS},
               "per_fold": {k: {f: summary[k][f] for f in ("train", "val", "test", "last_val",
                                                           "last_test")} for k in sc.KINDS},
               "curves": {k: summary[k]["curves"] for k in sc.KINDS},
               "std_ratio_random": _ratio(sh["test"][1], ra["test"][1]),
               "last_epoch": {"drop": _diff(ra["last_test"][0], sh["last_test"][0]),
                              "gap_shifted": sh["last_gap"][0],
                              "std_ratio": _ratio(sh["last_test"][1], sh["last_val"][1])},
               **_fold_fallback(trials)}
    scores = [
        Score(**base, score="shifted-cv", value=sh["test"][0], n=sh["n"],
              details={**details, "std": sh["test"][1]}),
        Score(**base, score="acc_random", value=ra["test"][0], n=ra["n"],
              details={"std": ra["test"][1], "per_fold": summary["random"]["test"]}),
        Score(**base, score="drop", value=_diff(ra["test"][0], sh["test"][0]),
              n=min(sh["n"], ra["n"]), higher_is_better=False),
        *(Score(**base, score=f"gap_{kind}", value=st["gap"][0], n=st["n"], higher_is_better=False,
                details={"std": st["gap"][1], "val_mean": st["val"][0], "val_std": st["val"][1]})
          for kind, st in (("shifted", sh), ("random", ra))),
        Score(**base, score="std_ratio", value=_ratio(sh["test"][1], sh["val"][1]), n=sh["n"],
              higher_is_better=False,
              details={"test_std": sh["test"][1], "val_std": sh["val"][1],
                       "std_ratio_random": details["std_ratio_random"]}),
    ]
    return scores + wasserstein_scores(group, trials)


def wasserstein_scores(group: dict, trials: list) -> list:
    """Return the fold-distance ratio of each fold-distance trial (model ''), None if failed."""
    found = [(t, as_dict(t.get("details")) if failure(t) is None else {}) for t in trials
             if t.get("kind") == sc.WASSERSTEIN]
    return [Score(dataset=group["dataset"], model="", clusterer=group["clusterer"], metric=METRIC,
                  score="wasserstein_ratio", value=w.get("ratio"), n=len(w.get("repeats") or []),
                  higher_is_better=True, details={**w, "error": error_line(t)}) for t, w in found]
