"""The ranks the ``leaderboard`` view shows: each table's ranks as the leaderboard gives them.

A rank is decided by a metric's leaderboard section (``LeaderboardSection.ranks``: models that
share a repeat's partitions compared by paired differences, rank intervals (``1-2``) or ties (``1=``), a model at
chance not ranked), code a SQL view cannot run. So whenever scores change (a run, a merge, a
migration) robench stores the ranks of every table in the ``ranks`` table, computed from the
rows the site and ``robench results`` rank: each data set's scores in the configuration its
table shows, helper models left out, each metric's section ranking its rows. The
``leaderboard`` view joins them: a model has the same rank there, in ``robench results``, on
the site and on its badge; a helper model is not in the view; a metric whose section gives no
ranks (purity-ratio without an interval, for one) has no rank.
"""

from __future__ import annotations

from collections import defaultdict

from robench.metric_kit import without_helpers
from robench.process.provenance import utc_now
from robench.run.configurations import LEGACY, LEGACY_LABEL, resolve, table_configurations

#: Columns of a ``ranks`` row, in the table's order.
COLUMNS = ("dataset", "metric", "clusterer", "model", "configuration", "rank", "tied",
           "rank_interval", "n_ranked", "unranked", "rule", "computed_at")


def table_rows(store) -> list:
    """Return the score rows the leaderboard ranks: chosen configuration, helpers left out."""

    labels = {i: row.get("label") or i for i, row in store.configurations().items()}
    labels.setdefault(LEGACY, LEGACY_LABEL)
    rows, _ = table_configurations(store.scores(), labels, resolve(None, labels))
    return without_helpers(rows, store.helper_models())


def compute_ranks(rows: list, registry) -> list:
    """Return a ``ranks`` row for each headline score its metric's section ranks in ``rows``.

    ``rows`` are whole tables (:func:`table_rows`): a rank is relative to its table.
    """
    sections = {m.name: m.leaderboard for m in registry.all("metrics")
                if m.leaderboard is not None}
    tables: dict = defaultdict(list)
    for r in rows:
        tables[(r["dataset"], r["metric"])].append(r)
    now = utc_now()
    out = []
    for (dataset, metric), mine in sorted(tables.items()):
        ranks = getattr(sections.get(metric), "ranks", None)
        if ranks is None:
            continue
        configuration = {(r["model"], r.get("clusterer") or ""): r.get("configuration")
                         for r in mine if r["score"] == metric}
        try:
            found = [x for x in ranks(mine) if isinstance(x, dict) and x.get("score") == metric]
        except Exception:  # noqa: BLE001 - a plugin's ranking that fails ranks nothing here
            continue  # (the site shows that section's failure; a run or merge goes on)
        ranked: dict = defaultdict(int)
        for x in found:
            ranked[x.get("clusterer") or ""] += x.get("rank") is not None
        for x in found:
            clusterer = x.get("clusterer") or ""
            out.append({"dataset": dataset, "metric": metric, "clusterer": clusterer,
                        "model": x["model"],
                        "configuration": configuration.get((x["model"], clusterer)),
                        "rank": x.get("rank"), "tied": int(bool(x.get("tied"))),
                        "rank_interval": x.get("rank_interval"),
                        "n_ranked": ranked[clusterer], "unranked": x.get("unranked"),
                        "rule": x.get("rule"), "computed_at": now})
    return out


def refresh_ranks(store, registry) -> int:
    """Recompute and store every table's ranks (replacing the stored ones); return how many.

    Ranks that come out as stored are left as they are (not even their time rewritten): a
    merge that copies nothing changes no byte.
    """
    rows = compute_ranks(table_rows(store), registry)
    kept = [c for c in COLUMNS if c != "computed_at"]

    def plain(rs):
        return sorted(tuple(str(r[c]) for c in kept) for r in rs)

    stored = store._select("SELECT * FROM ranks", []) if store.db["ranks"].exists() else None
    if stored is not None and plain(stored) == plain(rows):
        return len(rows)
    with store._write():
        conn = store.db.conn
        conn.execute("DELETE FROM ranks")
        conn.executemany(f'INSERT OR REPLACE INTO ranks ({", ".join(COLUMNS)}) '
                         f'VALUES ({", ".join("?" * len(COLUMNS))})',
                         [[r[c] for c in COLUMNS] for r in rows])
    return len(rows)
