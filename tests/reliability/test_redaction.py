"""Credentials in a scheduler address are never stored or printed (issue 16, defect 11)."""

from __future__ import annotations

import json

import pytest

from robench.process.provenance import redact_secrets
from robench.run.runner import execute
from tests.helpers import run_config


@pytest.mark.parametrize("text, expected", [
    ("tls://alice:s3cret@10.0.0.5:8786", "tls://***@10.0.0.5:8786"),
    ("tcp://token@host:8786", "tcp://***@host:8786"),
    ("https://host/x?token=abc&x=1", "https://host/x?token=***&x=1"),
    ("robench run --scheduler tcp://u:p@h:1 -d digits", "robench run --scheduler tcp://***@h:1 -d digits"),
    ("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("user@example.org", "user@example.org"),
    (None, None),
])
def test_redact_secrets(text, expected):
    assert redact_secrets(text) == expected


def test_the_run_row_keeps_no_credentials(tiny_registry, store):
    cfg = run_config(["tiny"], ["centroid"], ["kmeans"], ["rho"], registry=tiny_registry,
                     repeats=1, k=2, executor_options={"scheduler": "tls://alice:s3cret@h:1"})
    execute(cfg, tiny_registry, store, command="robench run")
    (run,) = store.runs()
    assert "s3cret" not in json.dumps(run, default=str)
    assert run["config"]["executor_options"]["scheduler"] == "tls://***@h:1"
