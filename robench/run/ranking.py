"""The ranks the ``leaderboard`` view shows: each table's ranks as the leaderboard gives them.

A rank is decided by a metric's leaderboard section (``LeaderboardSection.ranks``), code a SQL
view cannot run; so whenever scores change robench stores every table's ranks in the ``ranks``
table, which every view reads (docs/database.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections import Counter, defaultdict

from robench.metric_kit import without_helpers
from robench.process.provenance import utc_now

#: Columns of a ``ranks`` row, in the table's order.
COLUMNS = ("dataset", "metric", "clusterer", "model", "configuration", "rank", "tied",
           "rank_interval", "n_ranked", "unranked", "rule", "ranking", "computed_at")

#: The stored tables a view reads instead of ranking
#: (:func:`robench.present.leaderboard.reading_stored_ranks`); None: ranks are computed.
STORED: contextvars.ContextVar = contextvars.ContextVar("stored_ranks", default=None)


@contextlib.contextmanager
def computing_ranks():
    """Within it, :func:`robench.present.leaderboard.rank_table` ranks (what is stored here),
    also inside a view's :func:`~robench.present.leaderboard.reading_stored_ranks`."""
    token = STORED.set(None)
    try:
        yield
    finally:
        STORED.reset(token)


#: The keys of a section's ``ranks`` row that say which row it is (not part of its ranking).
IDENTITY = ("model", "clusterer", "score")


def table_rows(store) -> list:
    """Return the score rows the views rank: every configuration, helpers left out."""
    return without_helpers(store.scores(), store.helper_models())


def compute_ranks(rows: list, registry) -> list:
    """Return a ``ranks`` row for each headline score its metric's section ranks in ``rows``
    (whole tables, :func:`table_rows`); its ``ranking`` is what the section says of it, whole
    (minus :data:`IDENTITY`), with ``n_ranked``."""
    sections = {m.name: m.leaderboard for m in registry.all("metrics")
                if m.leaderboard is not None}
    tables: dict = defaultdict(list)
    for r in rows:
        tables[(r["dataset"], r["metric"], r.get("configuration"))].append(r)
    now = utc_now()
    out = []
    for (dataset, metric, configuration), mine in sorted(tables.items(), key=repr):
        if (ranks := getattr(sections.get(metric), "ranks", None)) is None:
            continue
        try:
            with computing_ranks():
                found = [x for x in ranks(mine)
                         if isinstance(x, dict) and x.get("score") == metric]
        except Exception:  # noqa: BLE001 - a plugin's ranking that fails ranks nothing here
            continue  # (the site shows that section's failure; a run or merge goes on)
        ranked = Counter(x.get("clusterer") or "" for x in found if x.get("rank") is not None)
        value = {(r["model"], r.get("clusterer") or ""): r.get("value")
                 for r in mine if r["score"] == metric}
        for x in found:
            clusterer = x.get("clusterer") or ""
            ranking = {k: v for k, v in x.items() if k not in IDENTITY}
            ranking["n_ranked"] = ranked[clusterer]
            ranking.setdefault("value", value.get((x["model"], clusterer)))
            out.append({"dataset": dataset, "metric": metric, "clusterer": clusterer,
                        "model": x["model"], "configuration": configuration,
                        "rank": x.get("rank"), "tied": int(bool(x.get("tied"))),
                        "rank_interval": x.get("rank_interval"),
                        "n_ranked": ranked[clusterer], "unranked": x.get("unranked"),
                        "rule": x.get("rule"),
                        "ranking": json.dumps(ranking, sort_keys=True, default=str),
                        "computed_at": now})
    return out


def refresh_ranks(store, registry) -> int:
    """Recompute and store every table's ranks (replacing the stored ones); return how many.
    Ranks that come out as stored are left as they are (a merge that copies nothing)."""
    rows = compute_ranks(table_rows(store), registry)
    kept = [c for c in COLUMNS if c != "computed_at"]

    def plain(rs):
        return sorted(tuple(str(r.get(c)) for c in kept) for r in rs)

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


#: What a view says where the ranks it shows are not stored.
NOT_COMPUTED = "ranks not computed: run `robench migrate`"


def stored_rankings(store) -> dict:
    """Return {(dataset, metric, configuration, clusterer, model): the stored ``ranking``,
    decoded}; empty for a file whose ``ranks`` table predates the ``ranking`` column."""
    if not store.db["ranks"].exists() or "ranking" not in store.db["ranks"].columns_dict:
        return {}
    out = {}
    for r in store._select("SELECT dataset, metric, configuration, clusterer, model, ranking "
                           "FROM ranks", []):
        ranking = r["ranking"]
        out[(r["dataset"], r["metric"], r["configuration"], r["clusterer"] or "",
             r["model"])] = json.loads(ranking) if isinstance(ranking, str) else ranking
    return out
