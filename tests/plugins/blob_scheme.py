"""A reference scheme for tests: ``blobs:SEED?n=N`` generates two Gaussian blobs."""

from __future__ import annotations

import numpy as np

from robench import hookimpl
from robench.data import Dataset
from robench.specs import DatasetSpec, ResolverSpec


def resolve_blobs(target, options):
    seed, n = int(target), int(options.get("n", 40))

    def load():
        rng = np.random.default_rng(seed)
        y = np.arange(n) % 2
        return Dataset(f"blobs:{target}", rng.normal(size=(n, 3)) + 3.0 * y[:, None], y)

    return DatasetSpec("blobs", load, f"two blobs, seed {seed}")


@hookimpl
def register_dataset_resolvers(register):
    register(ResolverSpec("blobs", resolve_blobs, "two Gaussian blobs", syntax="blobs:SEED[?n=N]",
                          options=("n",), takes_path=False))
