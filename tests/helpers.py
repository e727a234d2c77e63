"""Small helpers shared by the test modules."""

from __future__ import annotations

from robench.run.config import RunConfig, knob_sections
from robench.storage.store import decode_row


def run_config(*args, registry=None, **kw) -> RunConfig:
    """Return a resolved RunConfig; keyword arguments named like a knob section are settings.

    ``run_config(datasets=..., train={"max_epochs": 1})`` is
    ``RunConfig(datasets=..., settings={"train": {"max_epochs": 1}}).resolve(registry)``, with
    the registry of the built-ins when none is given.
    """
    from robench.plugins import get_registry

    registry = registry or get_registry()
    sections = knob_sections(registry)
    settings = dict(kw.pop("settings", {}) or {})
    for name in list(kw):
        if name in sections:
            settings[name] = kw.pop(name)
    if args:
        kw.update(dict(zip(("datasets", "models", "clusterers", "metrics"), args)))
    for kind in ("datasets", "models", "clusterers", "metrics"):
        kw.setdefault(kind, [])
    return RunConfig(settings=settings, **kw).resolve(registry)


def add_runs(store, n: int = 3) -> list[int]:
    """Record ``n`` runs in ``store`` (ids 1..n in a new file): trials and scores point to a
    run by a foreign key."""
    ids = [store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
           for _ in range(n)]
    for run_id in ids:
        store.finish_run(run_id, "ok")
    return ids


def clusterings(store, **filters) -> list[dict]:
    """Return the stored clustering rows matching ``filters``, JSON decoded (the product
    never reads them back: a run reuses a clustering by its key)."""
    rows = store.db.query("SELECT * FROM clusterings ORDER BY dataset, clusterer, k, seed, key")
    return [decode_row("clusterings", r) for r in rows
            if all(r[k] == v for k, v in filters.items())]


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` of this checkout (tests pin the tables it prints)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def query_readonly(path, sql: str, params=()) -> tuple[list, list]:
    """Run one read-only statement through robench's reader; return (columns, all rows)."""
    from robench.storage.readonly import stream_readonly

    columns, batches = stream_readonly(path, sql, params)
    return columns, [row for batch in batches for row in batch]


def save_scores(store, scores: list, run_id: int, definitions: dict,
                configuration=None) -> None:
    """Store ``scores`` as a run would (one transaction, no score-group record): for tests
    that need scores without running trials. ``definitions``: name -> (version, text)."""
    from robench.process.provenance import utc_now
    from robench.run.scoring import metric_rows, score_row

    now = utc_now()
    rows = [score_row(s, run_id, definitions, now, configuration=configuration) for s in scores]
    store.save_score_groups(rows, [], metrics=metric_rows(definitions, rows, run_id, now))
    from robench.plugins import get_registry
    from robench.run.ranking import refresh_ranks

    refresh_ranks(store, get_registry())  # a run stores its tables' ranks with the scores
