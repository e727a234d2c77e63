"""Run configuration and the profiles that set its scale."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Optional

#: Training budget and repeats per profile. ``quick`` keeps ``robench run --all`` to a few
#: minutes on 2 CPU cores; ``paper`` is the source-aware paper's scale (100 repeats).
PROFILES = {
    "quick": {
        "repeats": 3,
        "k": 5,
        "train": {"max_epochs": 4, "patience": 2, "batch_size": 64, "lr": 2e-3},
        # the adequacy sweep (opt-in here): 2 repeats, sizes below the full partition
        "adequacy": {"repeats": 2, "sizes": [100, 300, 1000]},
    },
    "paper": {
        "repeats": 100,
        "k": 5,
        "train": {"max_epochs": 60, "patience": 10, "batch_size": 64, "lr": 1e-3},
        # repeats None = the profile's repeats; sizes of the paper's Table 2 (capped by the data)
        "adequacy": {"repeats": None, "sizes": [100, 300, 1000, 3000, 10000, 30000]},
    },
}
DEFAULT_PROFILE = "quick"


def default_jobs() -> int:
    """Return the default number of worker processes: one per core, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass
class RunConfig:
    """Everything that defines one ``robench run`` (stored with the run)."""

    datasets: list
    models: list
    clusterers: list
    metrics: list
    profile: str = DEFAULT_PROFILE
    repeats: Optional[int] = None
    k: Optional[int] = None
    seed: int = 0
    test_size: float = 0.2
    val_fraction: float = 0.1
    train: dict = field(default_factory=dict)
    adequacy: dict = field(default_factory=dict)  # repeats, sizes of the adequacy sweep
    executor: str = "local"
    jobs: int = 1
    executor_options: dict = field(default_factory=dict)  # e.g. {"scheduler": ADDRESS}
    explicit: dict = field(default_factory=dict)  # kind -> names the user asked for by name

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile '{self.profile}'; known: {', '.join(PROFILES)}")
        prof = PROFILES[self.profile]
        if self.repeats is None:
            self.repeats = prof["repeats"]
        if self.k is None:
            self.k = prof["k"]
        self.train = {**prof["train"], **(self.train or {})}
        self.adequacy = {**prof.get("adequacy", {}), **(self.adequacy or {})}
        if self.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {self.repeats}")
        if not 0 < self.test_size < 1:
            raise ValueError(f"test_size must be in (0, 1), got {self.test_size}")

    def to_dict(self) -> dict:
        """Return the configuration as plain JSON-able data."""
        return asdict(self)
