"""A results database on a read-only file system: read commands read it where it is, write
commands refuse with one line naming the file and what to do, and nothing changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.storage.migrations import unwritable
from tests.reliability.cli import HOSTILE
from tests.reliability.test_bad_input import RUN


@pytest.fixture
def tiny_registry():
    from robench.plugins import make_registry, set_registry

    set_registry(make_registry(modules=list(HOSTILE), load_entrypoints=False))
    yield
    set_registry(None)


def test_unwritable_names_a_read_only_file_system(tmp_path, monkeypatch):
    assert unwritable(tmp_path / "r.db") is None
    real = os.statvfs

    def read_only(path):
        st = real(path)
        return SimpleNamespace(f_flag=st.f_flag | os.ST_RDONLY)

    monkeypatch.setattr(os, "statvfs", read_only)
    assert unwritable(tmp_path / "r.db") == "it is on a read-only file system"


def _mount_read_only(src_db, mnt):
    """Mount a tmpfs at ``mnt`` holding ``src_db``, then remount it read-only (root only)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount(8) to make a read-only file system")
    mnt.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                        capture_output=True)
    if ok.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {ok.stderr.decode().strip()}")
    shutil.copyfile(src_db, mnt / "robench.db")
    if subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True).returncode:
        subprocess.run(["umount", str(mnt)])
        pytest.skip("cannot remount the tmpfs read-only")


def test_read_only_file_system(tmp_path, tiny_registry):
    good = tmp_path / "good.db"
    done = CliRunner().invoke(cli, [*RUN, "--db", str(good)])
    assert done.exit_code == 0, done.output
    mnt = tmp_path / "ro"
    _mount_read_only(good, mnt)
    try:
        db = mnt / "robench.db"
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        for argv in (["results"], ["query", "select count(*) as n from trials"]):
            res = CliRunner().invoke(cli, [*argv, "--db", str(db)])
            assert res.exit_code == 0, res.output
        for argv, where in (([*RUN, "--db", str(db)], db),
                            ([*RUN, "--db", str(mnt / "new.db")], mnt / "new.db"),
                            (["leaderboard", "--db", str(db), "--out", str(mnt / "site")],
                             mnt / "site")):
            res = CliRunner().invoke(cli, argv)
            assert res.exit_code == 2, res.output
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error")]
            assert len(errors) == 1 and str(where) in errors[0], res.stderr
            assert "read-only file system" in errors[0].lower(), errors[0]
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before
        assert sorted(p.name for p in mnt.iterdir()) == ["robench.db"]
    finally:
        subprocess.run(["umount", str(mnt)])
