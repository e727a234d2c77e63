"""Corruption error and mCE (Hendrycks & Dietterich): pure functions, no I/O.

With E^f_{s,c} the top-1 error of classifier f on corruption c at severity s, the paper's
corruption error is CE^f_c = sum_s E^f_{s,c} / sum_s E^base_{s,c} and mCE is the mean of CE^f_c
over the corruptions; its relative corruption error subtracts each model's clean error first:
rCE^f_c = sum_s (E^f_{s,c} - E^f_clean) / sum_s (E^base_{s,c} - E^base_clean).
"""

from __future__ import annotations

from typing import Optional


def _ratio(num: float, den: float) -> Optional[float]:
    return None if den <= 0 else num / den


def corruption_errors(model_acc: dict, base_acc: dict) -> dict:
    """Return {corruption: CE or None} from per-severity accuracies {corruption: [acc_s, ...]}.

    CE is None where the baseline makes no error on that corruption at any severity (0/0 or x/0).
    """
    out = {}
    for c, accs in model_acc.items():
        e_model = sum(1.0 - a for a in accs)
        e_base = sum(1.0 - a for a in base_acc[c])
        out[c] = _ratio(e_model, e_base)
    return out


def relative_corruption_errors(model_acc: dict, model_clean: float, base_acc: dict,
                               base_clean: float) -> dict:
    """Return {corruption: relative CE or None}: errors above each model's clean error.

    None where the baseline's corrupted error does not exceed its clean error in sum.
    """
    out = {}
    for c, accs in model_acc.items():
        num = sum((1.0 - a) - (1.0 - model_clean) for a in accs)
        den = sum((1.0 - a) - (1.0 - base_clean) for a in base_acc[c])
        out[c] = _ratio(num, den)
    return out


def mean_defined(values: dict) -> Optional[float]:
    """Return the mean of the values that are not None (None if there are none)."""
    vals = [v for v in values.values() if v is not None]
    return sum(vals) / len(vals) if vals else None


def mean_corruption_accuracy(model_acc: dict) -> Optional[float]:
    """Return the mean accuracy over every (corruption, severity) cell."""
    cells = [a for accs in model_acc.values() for a in accs]
    return sum(cells) / len(cells) if cells else None
