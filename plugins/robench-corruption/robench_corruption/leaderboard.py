"""Leaderboard section of the mce metric: models sorted by mCE (untested: no rank), CE per
corruption."""

from __future__ import annotations

from pathlib import Path

from robench.present.formatting import scores_by_model
from robench.specs import LeaderboardSection

from robench_corruption.metric import METRIC

TEMPLATES = str(Path(__file__).resolve().parent / "templates")
#: What the overview's legend says about this family's headline column.
LEGEND = "mCE = corruption error relative to the baseline model's (1 = as good; lower is better)"


def section(rows: list):
    """Return the context of one data set's mce section, or None without scores."""
    from robench.present.leaderboard import rank_rows

    models = scores_by_model(rows, METRIC)
    if not models:
        return None
    corruptions = sorted({k.split("|", 1)[1] for sc in models.values() for k in sc
                          if k.startswith("ce|")})
    table, baseline = [], None
    for model, sc in sorted(models.items()):
        head = sc.get(METRIC) or {}
        details = head.get("details") or {}
        baseline = baseline or details.get("baseline")
        g = lambda k: (sc.get(k) or {}).get("value")  # noqa: E731
        table.append({"model": model, "value": head.get("value"), "higher_is_better": False,
                      "relative_mce": g("relative_mce"), "clean": g("clean_accuracy"),
                      "corruption_accuracy": g("corruption_accuracy"),
                      "ce": [g(f"ce|{c}") for c in corruptions],
                      "note": details.get("not_applicable") or details.get("error"),
                      "n": head.get("n")})
    return {"models": rank_rows(table), "corruptions": corruptions, "baseline": baseline}


def headline(rows: list):
    """Return mCE's column of the overview (lower is better; no interval, no test)."""
    tables = section(rows)
    if not tables:
        return None
    return {"label": "mCE", "format": "num", "rows": tables["models"],
            "baseline": tables["baseline"] or "",
            "note": f"mean corruption error over the corruptions and severities, relative to "
                    f"the baseline model '{tables['baseline'] or '?'}' (= 1); lower is better; "
                    "no interval is computed."}


#: The mce metric's section of each data set's leaderboard (MetricSpec.leaderboard).
SECTION = LeaderboardSection(build=section, template="mce.html", templates=TEMPLATES,
                             title="Common corruptions (mCE)", headline=headline, legend=LEGEND)
