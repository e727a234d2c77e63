"""A data set whose content a test can change under the same name (``CONTENT['seed']``)."""

from __future__ import annotations

from robench import hookimpl
from robench.specs import DatasetSpec
from tests.plugins.tiny import make_tiny

#: The seed ``mutable`` is generated from; a test changes it to replace the data.
CONTENT = {"seed": 0}


@hookimpl
def register_datasets(register):
    register(DatasetSpec(
        "mutable", lambda: make_tiny(seed=CONTENT["seed"], name="mutable"),
        "tiny's layout with content chosen by the test", has_sources=True,
    ))
