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

A change to what identifies a *score* is listed in ``intentional_scores`` (change, schema
version, why). Since schema 1 a score's key includes its configuration: the fixture's scores
become configuration ``legacy`` and must stay exactly as stored (every column they had), and
the rerun stores each group anew under its configuration. Such a re-keyed group must have the
same trials as its legacy predecessor and, unless its metric's version intentionally changed,
the same values; a command run a second time must reuse every group.
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
    import robench.run.runner
    from robench.plugins import make_registry, set_registry

    about = json.loads((FIXTURES / "pre_open_core.json").read_text())
    db = tmp_path / "pre_open_core.db"
    shutil.copyfile(FIXTURES / "pre_open_core.db", db)
    # an empty cache: nothing may come from models or sources cached by other tests
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reports = []
    execute = robench.run.runner.execute

    def recording_execute(*args, **kwargs):
        report = execute(*args, **kwargs)
        reports.append(report)
        return report

    monkeypatch.setattr(robench.run.runner, "execute", recording_execute)
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


def _changed_groups(db, stored_groups: list, cols: list) -> list:
    """Return (metric, old version, new version) of every score group not reused as stored.

    ``cols`` are the columns the stored groups had; a group with the same trials and metric
    version as its legacy predecessor but a configuration of its own is a re-keyed group
    (metric, version, version, 'rekeyed')."""
    ident = lambda r: tuple(r[cols.index(c)] for c in ("dataset", "model", "clusterer",  # noqa
                                                        "metric"))
    version, trials = cols.index("metric_version"), cols.index("trial_keys")
    old = {ident(r): r for r in stored_groups}
    old_rows = set(stored_groups)
    out = []
    names = ", ".join(f'"{c}"' for c in cols)
    present = [c[1] for c in _table(db, "PRAGMA table_info(score_groups)")]
    legacy = "configuration = 'legacy'" if "configuration" in present else "1"
    for r in _table(db, f"SELECT {names} FROM score_groups WHERE {legacy} ORDER BY key"):
        assert r in old_rows, f"a legacy score group changed: {r}"
    if "configuration" not in present:
        legacy_rows = []
    else:
        legacy_rows = _table(db, f"SELECT {names} FROM score_groups WHERE NOT ({legacy}) "
                                 "ORDER BY key")
        for r in legacy_rows:
            prev = old.get(ident(r))
            if prev is not None and prev[version] == r[version] and prev[trials] == r[trials]:
                out.append((ident(r)[3], r[version], r[version], "rekeyed"))
            elif prev is None or prev[version] == r[version]:
                continue  # new, or re-scored because its trials intentionally changed
            else:
                out.append((ident(r)[3], prev[version], r[version]))
        return out
    for r in _table(db, "SELECT * FROM score_groups ORDER BY key"):
        prev = old.get(ident(r))
        if r in old_rows or (prev is not None and prev[version] == r[version]
                             and prev[trials] != r[trials]):
            continue  # reused, or re-scored because its trials intentionally changed
        out.append((ident(r)[3], None if prev is None else prev[version], r[version]))
    return out


def _check_rekeyed_scores(db, stored_scores, cols, changed_metrics):
    """Legacy scores are kept as stored; a score stored anew has its legacy value unless its
    metric intentionally changed (trials rerun only because their keys changed give the same
    numbers: invariant 4)."""
    present = {c[1] for c in _table(db, "PRAGMA table_info(scores)")}
    # schema 2 keeps each definition once, in metrics
    moved = {"definition": "(SELECT definition FROM metrics WHERE metrics.id = scores.metric_id)"}
    names = ", ".join(f'"{c}"' if c in present else moved[c] for c in cols)
    legacy = _table(db, f"SELECT {names} FROM scores WHERE configuration = 'legacy' ORDER BY key")
    assert legacy == stored_scores, "legacy scores changed"
    at = {c: cols.index(c) for c in cols}
    ident = lambda r: tuple(r[at[c]] for c in ("dataset", "model", "clusterer", "metric",  # noqa
                                               "score"))
    old = {ident(r): r for r in stored_scores}
    new = _table(db, f"SELECT {names} FROM scores WHERE configuration != 'legacy'")
    compared = 0
    for r in new:
        prev = old.get(ident(r))
        if prev is None or r[at["metric"]] in changed_metrics:
            continue
        for c in ("value", "ci_low", "ci_high", "n", "metric_version"):
            # a retrained float32 model may differ in the last bits (shifted-cv's VAE: 1e-8)
            expected = pytest.approx(prev[at[c]], rel=1e-6) if isinstance(prev[at[c]], float) \
                else prev[at[c]]
            assert r[at[c]] == expected, (ident(r), c, prev[at[c]], r[at[c]])
        assert r[at["key"]] != prev[at["key"]]
        compared += 1
    assert compared > 0


def test_the_pre_open_core_database_reruns_with_nothing_to_run_or_score(fixture_commands):
    from robench.cli import cli

    db, commands, reports = fixture_commands
    about = json.loads((FIXTURES / "pre_open_core.json").read_text())
    allowed = {(c["path"], c["from"], c["to"]) for c in about.get("intentional", [])
               if "protocol" not in c and "model" not in c}
    # an entry with a "protocol" (a "model") applies to that protocol's (model's) trials only
    per_protocol, per_model = {}, {}
    for c in about.get("intentional", []):
        if "protocol" in c:
            per_protocol.setdefault(c["protocol"], set()).add((c["path"], c["from"], c["to"]))
        elif "model" in c:
            per_model.setdefault(c["model"], set()).add((c["path"], c["from"], c["to"]))
    # the columns of the trials table once the file is migrated (a copy, opened to write):
    # the runs below must add none
    migrated = db.with_name("migrated.db")
    shutil.copyfile(db, migrated)
    from robench.storage.store import Store

    Store(migrated).close()
    columns = _table(migrated, "PRAGMA table_info(trials)")
    columns_before = {t: _table(db, f"PRAGMA table_info({t})") for t in ("scores", "score_groups")}
    stored = {t: _table(db, f"SELECT * FROM {t} ORDER BY key")
              for t in ("trials", "scores", "score_groups")}
    before = {row[0] for row in stored["trials"]}

    for argv in commands:
        result = CliRunner().invoke(cli, [*argv, "--db", str(db)])
        assert result.exit_code == 0, result.output

    assert len(reports) == len(commands)
    changed = _intentional(db, before)
    protocols = dict(_table(db, "SELECT key, protocol FROM trials"))
    models = dict(_table(db, "SELECT key, model FROM trials"))
    for key, diffs in changed.items():
        ok = allowed | per_protocol.get(protocols[key], set()) | per_model.get(models[key], set())
        assert diffs and set(diffs) <= ok, (
            f"trial {key} was planned anew; its spec differs from the stored one in {diffs}, "
            f"not only in the intentional changes {sorted(allowed)}")
    group_cols = [c[1] for c in columns_before["score_groups"]]
    metric_changes = _changed_groups(db, stored["score_groups"], group_cols)
    rekeyed = {m[0] for m in metric_changes if m[-1] == "rekeyed"}
    if rekeyed:
        assert about.get("intentional_scores"), (
            f"score groups of {sorted(rekeyed)} were stored anew from the same trials, and no "
            "intentional_scores entry says why score identity changed")
    if about.get("intentional_scores"):
        _check_rekeyed_scores(db, stored["scores"], [c[1] for c in columns_before["scores"]],
                              {m["metric"] for m in about.get("intentional_metrics", [])})
        metric_changes = [m for m in metric_changes if m[-1] != "rekeyed"]
    allowed_metrics = {(m["metric"], m["from"], m["to"])
                       for m in about.get("intentional_metrics", [])}
    assert set(metric_changes) <= allowed_metrics, (
        f"score groups re-aggregated for {sorted(set(metric_changes))}, not only for the "
        f"intentional metric changes {sorted(allowed_metrics)}")
    for i, (argv, report) in enumerate(zip(commands, reports)):
        assert not report.failed and not report.interrupted, argv
        assert report.n_cached + report.n_ran == report.n_planned > 0, argv
        again = argv in commands[:i]
        if rekeyed and again:  # a command's second run reuses every group its first stored
            assert report.n_aggregated == 0 and report.n_reused > 0, argv
        elif report.n_ran == 0 and not rekeyed:  # scores reused or intentionally re-scored
            assert report.n_reused > 0, argv
            assert report.n_aggregated == 0 or allowed_metrics, argv
    assert sum(r.n_ran for r in reports) == len(changed)
    if not changed and not metric_changes:
        # every score group the database holds was reused by the command that wrote it
        n_groups = _table(db, "SELECT count(*) FROM score_groups")[0][0]
        assert sum(r.n_reused for r in reports) == n_groups
        for table, rows in stored.items():
            assert _table(db, f"SELECT * FROM {table} ORDER BY key") == rows, table
    # Columns the trials table intentionally gained since (appended when a rerun trial writes
    # one); every column it had is unchanged.
    added = [c["column"] for c in about.get("intentional_columns", []) if c["table"] == "trials"]
    after = _table(db, "PRAGMA table_info(trials)")
    assert after[:len(columns)] == columns
    assert [c[1] for c in after[len(columns):]] in ([], added[:len(after) - len(columns)])
