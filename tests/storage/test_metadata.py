"""robench metadata: datasette metadata that matches the tables that exist."""

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from robench.cli import cli
from robench.storage.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_metadata_describes_every_table_view_and_column_that_exists(tmp_path):
    db = tmp_path / "robench.db"
    shutil.copyfile(FIXTURES / "main_0a81169.db", db)
    Store(db).close()  # the current schema, with the fixture's scores
    before = hashlib.md5(db.read_bytes()).hexdigest()
    out = tmp_path / "metadata.json"
    res = CliRunner().invoke(cli, ["metadata", "--db", str(db), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert hashlib.md5(db.read_bytes()).hexdigest() == before  # read-only
    meta = json.loads(out.read_text())
    tables = meta["databases"]["robench"]["tables"]
    conn = sqlite3.connect(db)
    objects = {name: [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
               for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN "
                                           "('table', 'view') AND name NOT LIKE 'sqlite_%'")}
    conn.close()
    assert set(tables) == set(objects)  # every table and view, nothing that does not exist
    for name, columns in objects.items():
        assert set(tables[name]["columns"]) == set(columns), name
        assert all(tables[name]["columns"].values()) and tables[name]["description"]
    assert tables["trials"]["units"] == {"seconds": "s"}
    assert "(a view)" in tables["leaderboard"]["description"]
    assert "rho v2: " in tables["metrics"]["description"]  # the stored definition
    assert meta["title"] == "robench results"


def test_metadata_of_an_old_file_describes_what_it_has(tmp_path):
    res = CliRunner().invoke(cli, ["metadata", "--db", str(FIXTURES / "main_0a81169.db")])
    assert res.exit_code == 0
    tables = json.loads(res.output)["databases"]["main_0a81169"]["tables"]
    assert "metrics" not in tables and "leaderboard" not in tables  # schema 0 has neither
    conn = sqlite3.connect(FIXTURES / "main_0a81169.db")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(scores)")]
    conn.close()
    assert set(tables["scores"]["columns"]) == set(columns)  # incl. the old definition column
