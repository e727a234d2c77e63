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
        # purity-ratio (robench/protocols/clusterability.py): an 8-model zoo per image data
        # set (the timm ResNet/ViT only in the paper profile: they cost the most); all 19
        # corruptions x 5 severities on a 60-image stratified test subsample; attacks on 60
        "clusterability": {
            "zoo": ["mlp", "cnn-1", "cnn-2", "cnn-3", "zoo-mlp-narrow", "zoo-cnn-narrow",
                    "zoo-cnn-dropout", "zoo-cnn-noise"],
            "corruption_cap": 60, "attack_cap": 60, "multicut_cap": 500, "overlap_cap": 500,
            "join_train_cap": 1000, "epsilons": [0.01, 0.03, 0.1, 0.2], "pgd_steps": 7,
            "deepfool_iter": 20, "deepfool_grads": 3,
        },
        # shifted K-fold CV (VAE-VGMM paper) at smoke-test scale: 3 folds, 1 repeat, 2 epochs,
        # 4 Monte Carlo samples, a 1-epoch common-latent VAE trained on at most 2,000 rows
        "shifted_cv": {"folds": 3, "repeats": 1, "val_fraction": 0.2,
                       "train": {"max_epochs": 2, "patience": 2, "mc_samples": 4},
                       "vae_epochs": 1, "vae_max_train": 2000, "latent_dim": 62,
                       "max_points": 1000},
        # coverage (robench/protocols/coverage.py DEFAULTS): a 6-epoch decoder on at most
        # 2,000 training rows
        "coverage": {"decoder_epochs": 6, "decoder_train_cap": 2000},
    },
    "paper": {
        "repeats": 100,
        "k": 5,
        "train": {"max_epochs": 60, "patience": 10, "batch_size": 64, "lr": 1e-3},
        # repeats None = the profile's repeats; sizes of the paper's Table 2 (capped by the data)
        "adequacy": {"repeats": None, "sizes": [100, 300, 1000, 3000, 10000, 30000]},
        # purity-ratio at full scale: the whole test split, a 12-model zoo, 7 epsilons
        "clusterability": {
            "zoo": ["mlp", "cnn-1", "cnn-2", "cnn-3", "zoo-mlp-narrow", "zoo-mlp-wide",
                    "zoo-cnn-narrow", "zoo-cnn-wide", "zoo-cnn-dropout", "zoo-cnn-noise",
                    "zoo-resnet", "zoo-vit"],
            "corruption_cap": None, "attack_cap": 1000, "multicut_cap": 2000,
            "overlap_cap": 2000, "join_train_cap": 2000,
            "epsilons": [0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.3], "pgd_steps": 40,
            "deepfool_iter": 50, "deepfool_grads": 10,
        },
        # the paper's settings: 5 folds, repeat 1, 80/20 train/validation, 100 epochs (no early
        # stop), batch 32 and a 20-epoch VAE with a 62-d latent space (both from its code)
        "shifted_cv": {"folds": 5, "repeats": 1, "val_fraction": 0.2,
                       "train": {"max_epochs": 100, "patience": 100, "batch_size": 32,
                                 "mc_samples": 10},
                       "vae_epochs": 20, "vae_max_train": None, "latent_dim": 62,
                       "max_points": 2000},
        # coverage: 5 reference models; the decoder trained longer on every training row; more
        # Monte Carlo samples
        "coverage": {"repeats": 5, "decoder_epochs": 20, "decoder_train_cap": None,
                     "shift_mc": 5000},
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
    clusterability: dict = field(default_factory=dict)  # zoo, caps, epsilons of purity-ratio
    shifted_cv: dict = field(default_factory=dict)  # folds, repeats, training, VAE, Wasserstein
    coverage: dict = field(default_factory=dict)  # r, thetas, mixes, sizes, decoder of coverage
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
        self.clusterability = {**prof.get("clusterability", {}), **(self.clusterability or {})}
        self.shifted_cv = {**prof.get("shifted_cv", {}), **(self.shifted_cv or {})}
        self.coverage = {**prof.get("coverage", {}), **(self.coverage or {})}
        if self.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {self.repeats}")
        if not 0 < self.test_size < 1:
            raise ValueError(f"test_size must be in (0, 1), got {self.test_size}")

    def to_dict(self) -> dict:
        """Return the configuration as plain JSON-able data."""
        return asdict(self)


#: Sections ``robench run --set SECTION.KEY=VALUE`` can change, and the module whose
#: ``DEFAULTS`` lists the section's knobs (None: the profile's dict lists them).
SETTABLE = {
    "train": None,
    "adequacy": None,
    "clusterability": "robench.protocols.clusterability",
    "shifted_cv": None,
    "coverage": "robench.protocols.coverage",
}


def known_knobs(section: str, profile: str = DEFAULT_PROFILE) -> list:
    """Return the knob names of a ``--set`` section (profile keys and protocol defaults)."""
    import importlib

    names = set()
    for prof in PROFILES.values():
        names |= set((prof.get(section) or {}))
    if section == "train":
        names |= {"max_epochs", "patience", "batch_size", "lr", "weight_decay", "mc_samples"}
    module = SETTABLE.get(section)
    if module:
        names |= set(getattr(importlib.import_module(module), "DEFAULTS", {}))
    return sorted(names)


def parse_settings(items, profile: str = DEFAULT_PROFILE) -> dict:
    """Turn ``["coverage.radius=0.8", ...]`` into RunConfig keyword dicts; ValueError if bad.

    VALUE is parsed as JSON (``0.8``, ``[1, 2]``, ``null``, ``true``); anything else is taken as
    a string. Unknown sections or knobs are errors that list the known ones.
    """
    import json

    out: dict = {}
    for item in items or ():
        name, eq, raw = item.partition("=")
        section, dot, knob = name.strip().partition(".")
        if not eq or not dot or not knob:
            raise ValueError(f"--set expects SECTION.KEY=VALUE, got '{item}' "
                             "(e.g. --set coverage.radius=0.8)")
        if section not in SETTABLE:
            raise ValueError(f"--set: unknown section '{section}'; known: "
                             f"{', '.join(SETTABLE)}")
        known = known_knobs(section, profile)
        if knob not in known:
            raise ValueError(f"--set: unknown {section} knob '{knob}'; known: "
                             f"{', '.join(known)}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(section, {})[knob] = value
    return out
