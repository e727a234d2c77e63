"""Larger synthetic data sets for the scaling benchmark (a plugin module, loaded by name)."""

from functools import partial

from robench import hookimpl
from robench.builtin.datasets import make_synthetic_sources
from robench.specs import DatasetSpec


def _load(n):
    ds = make_synthetic_sources(n_samples=n)
    ds.name = f"synthetic-{n // 1000}k"
    return ds


@hookimpl
def register_datasets(register):
    for n in (20_000, 50_000):
        register(DatasetSpec(f"synthetic-{n // 1000}k", partial(_load, n),
                             f"synthetic-sources with {n:,} samples (benchmark only).",
                             has_sources=True, is_image=True))
