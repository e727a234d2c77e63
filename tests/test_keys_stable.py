"""Trial keys and score fingerprints stay byte-identical across refactors.

``tests/fixtures/pre_open_core.db`` was written by robench before the open-core refactor, by
the commands listed in ``pre_open_core.json``. Rerunning them on a copy must train nothing
(every trial key is the same) and reuse every stored score group (every trial digest, score
digest and inputs fingerprint is the same), without touching the trials table's columns:
adding one would change every trial digest and so every fingerprint.

A later change that deliberately changes what defines a trial (a component version bumped
because its results changed) is listed in the JSON's ``intentional`` entries: a trial that runs
again must differ from its stored predecessor in exactly those spec paths, so an accidental
key change still fails here. A metric whose definition changed (its version bumped) is listed
in ``intentional_metrics`` (metric, old and new version, why): its score groups are
re-aggregated from the same trials, and only those of such metrics may be.
"""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _table(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def fixture_commands(monkeypatch, tmp_path):
    """Return (database copy, commands, reports of every run) with the fixture's plugins."""
    import robench.runner
    from robench.plugins import make_registry, set_registry

    about = json.loads((FIXTURES / "pre_open_core.json").read_text())
    db = tmp_path / "pre_open_core.db"
    shutil.copyfile(FIXTURES / "pre_open_core.db", db)
    # an empty cache: nothing may come from models or sources cached by other tests
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reports = []
    execute = robench.runner.execute

    def recording_execute(*args, **kwargs):
        report = execute(*args, **kwargs)
        reports.append(report)
        return report

    monkeypatch.setattr(robench.runner, "execute", recording_execute)
    set_registry(make_registry(modules=about["modules"], load_entrypoints=False))
    yield db, about["commands"], reports
    set_registry(None)


def _differences(old, new, path=""):
    """Yield (path, old value, new value) of every leaf where two JSON values differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from _differences(old.get(key), new.get(key), f"{path}.{key}".lstrip("."))
    elif old != new:
        yield path, old, new


def _intentional(db, before: set) -> dict:
    """Return {new trial key: [(path, old, new)]}: how each rerun trial's spec differs from the
    stored trial it replaces (same protocol, data set, model, clusterer, kind and repeat)."""
    rows = _table(db, "SELECT key, protocol, dataset, model, clusterer, kind, repeat, spec "
                      "FROM trials")
    identity = lambda r: tuple(r[1:7])  # noqa: E731
    old = {}
    for r in rows:
        if r[0] in before:
            old.setdefault(identity(r), []).append(json.loads(r[7]))
    out = {}
    for r in rows:
        if r[0] not in before:
            # several stored trials can share the identity (shifted-cv's folds differ in
            # params.fold): compare with the closest one
            new = json.loads(r[7])
            out[r[0]] = min(([d for d in _differences(prev, new) if d[0] != "key"]
                             for prev in old[identity(r)]), key=len)
    return out


def _changed_groups(db, stored_groups: list) -> list:
    """Return (metric, old version, new version) of every score group not reused as stored."""
    cols = [c[1] for c in _table(db, "PRAGMA table_info(score_groups)")]
    ident = lambda r: tuple(r[cols.index(c)] for c in ("dataset", "model", "clusterer",  # noqa
                                                        "metric"))
    version, trials = cols.index("metric_version"), cols.index("trial_keys")
    old = {ident(r): r for r in stored_groups}
    old_rows = set(stored_groups)
    out = []
    for r in _table(db, "SELECT * FROM score_groups ORDER BY key"):
        prev = old.get(ident(r))
        if r in old_rows or (prev is not None and prev[version] == r[version]
                             and prev[trials] != r[trials]):
            continue  # reused, or re-scored because its trials intentionally changed
        out.append((ident(r)[3], None if prev is None else prev[version], r[version]))
    return out


def test_the_pre_open_core_database_reruns_with_nothing_to_run_or_score(fixture_commands):
    from robench.cli import cli

    db, commands, reports = fixture_commands
    about = json.loads((FIXTURES / "pre_open_core.json").read_text())
    allowed = {(c["path"], c["from"], c["to"]) for c in about.get("intentional", [])
               if "protocol" not in c}
    # an entry with a "protocol" applies to that protocol's trials only
    per_protocol = {}
    for c in about.get("intentional", []):
        if "protocol" in c:
            per_protocol.setdefault(c["protocol"], set()).add((c["path"], c["from"], c["to"]))
    columns = _table(db, "PRAGMA table_info(trials)")
    stored = {t: _table(db, f"SELECT * FROM {t} ORDER BY key")
              for t in ("trials", "scores", "score_groups")}
    before = {row[0] for row in stored["trials"]}

    for argv in commands:
        result = CliRunner().invoke(cli, [*argv, "--db", str(db)])
        assert result.exit_code == 0, result.output

    assert len(reports) == len(commands)
    changed = _intentional(db, before)
    protocols = dict(_table(db, "SELECT key, protocol FROM trials"))
    for key, diffs in changed.items():
        ok = allowed | per_protocol.get(protocols[key], set())
        assert diffs and set(diffs) <= ok, (
            f"trial {key} was planned anew; its spec differs from the stored one in {diffs}, "
            f"not only in the intentional changes {sorted(allowed)}")
    metric_changes = _changed_groups(db, stored["score_groups"])
    allowed_metrics = {(m["metric"], m["from"], m["to"])
                       for m in about.get("intentional_metrics", [])}
    assert set(metric_changes) <= allowed_metrics, (
        f"score groups re-aggregated for {sorted(set(metric_changes))}, not only for the "
        f"intentional metric changes {sorted(allowed_metrics)}")
    for argv, report in zip(commands, reports):
        assert not report.failed and not report.interrupted, argv
        assert report.n_cached + report.n_ran == report.n_planned > 0, argv
        if report.n_ran == 0:  # no trial changed: scores are reused or intentionally re-scored
            assert report.n_reused > 0, argv
            assert report.n_aggregated == 0 or allowed_metrics, argv
    assert sum(r.n_ran for r in reports) == len(changed)
    if not changed and not metric_changes:
        # every score group the database holds was reused by the command that wrote it
        n_groups = _table(db, "SELECT count(*) FROM score_groups")[0][0]
        assert sum(r.n_reused for r in reports) == n_groups
        for table, rows in stored.items():
            assert _table(db, f"SELECT * FROM {table} ORDER BY key") == rows, table
    assert _table(db, "PRAGMA table_info(trials)") == columns
