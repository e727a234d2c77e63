"""Configurations: what a score's trials were run with, as part of the score's identity.

A *configuration* is what changes a metric's trials besides the data set, model and clusterer
(profile, repeats, sources, seed, split fractions, its protocols' knobs); its :func:`fingerprint`
is part of every score's key. docs/database.md has which one a table shows and ``--config``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
import json
from typing import Iterable, Optional

from robench.data.cache import content_key
from robench.errors import ConfigurationError  # noqa: F401 (public here too)
from robench.storage.migrations import LEGACY, LEGACY_LABEL  # noqa: F401 (public here too)
from robench.run.config import TRAIN_SECTION, knob_sections

#: ``--config`` value that shows every configuration instead of choosing one per table.
ALL = "all"


def _sections(metric, registry) -> list[str]:
    """Return the knob sections a metric's trials read, sorted: train and its protocols'."""
    sections, todo, seen = {TRAIN_SECTION}, [metric.protocol], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            protocol = registry.get("protocols", name)
        except LookupError:
            continue
        if protocol.section:
            sections.add(protocol.section)
        todo.extend(protocol.after or ())
    return sorted(sections)


def describe(cfg, metric, registry) -> dict:
    """Return the configuration of ``metric``'s trials in the run ``cfg`` (resolved) as a dict;
    ``changed`` (the knobs not at the profile's value) is for the label, not the fingerprint."""
    if not cfg.knobs:
        cfg.resolve(registry)
    sections = _sections(metric, registry)
    declared = knob_sections(registry)
    knobs = {s: dict(cfg.knobs.get(s) or {}) for s in sections if s in cfg.knobs}
    changed = {f"{section}.{knob.name}": knobs[section][knob.name]
               for section in sections for knob in declared.get(section, (None, []))[1]
               if knob.name in knobs.get(section, {})
               and knobs[section][knob.name] != knob.value_for(cfg.profile)}
    return {"profile": cfg.profile, "repeats": int(cfg.repeats), "sources": int(cfg.k),
            "seed": int(cfg.seed), "test_size": float(cfg.test_size),
            "val_fraction": float(cfg.val_fraction), "knobs": knobs, "changed": changed}


def fingerprint(description: dict) -> str:
    """Return the configuration id: a stable hash (24 hex) of a :func:`describe` dict."""
    content = {k: v for k, v in description.items() if k != "changed"}
    return content_key("configuration", content)


def label(description: dict) -> str:
    """Return a short human label, e.g. ``quick R=3 k=5 seed=0 (train.max_epochs=1)``; a raced
    table's (``raced``: up to R repeats, each model as many as its pairs needed) says so."""
    raced = " raced" if description.get("raced") else ""
    text = (f"{description['profile']} R={description['repeats']}{raced} "
            f"k={description['sources']} seed={description['seed']}")
    if changed := description.get("changed") or {}:
        text += " (" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(changed.items())) + ")"
    return text


def configuration_row(description: dict, run_id: Optional[int] = None) -> dict:
    """Return the ``configurations`` row of a :func:`describe` dict."""
    return {"id": fingerprint(description), "label": label(description),
            **{k: description[k] for k in ("profile", "repeats", "sources", "seed", "knobs")},
            "description": description, "run_id": run_id}


def short(config_id: str) -> str:
    """Return the id as shown next to a label: ``legacy`` or the first 8 hex digits."""
    return config_id if config_id == LEGACY else (config_id or "")[:8]


@dataclass
class Choice:
    """The configuration one table (data set, metric) shows, and what else it could show."""

    dataset: str
    metric: str
    configuration: str
    label: str
    covered: int  # (model, clusterer) combinations with a score in this configuration
    latest_run: int
    others: list = field(default_factory=list)  # [(id, label, covered)] not shown

    @property
    def text(self) -> str:
        """One line: the configuration shown, its coverage, and the others not shown."""
        line = f"configuration {self.label} [{short(self.configuration)}]"
        if self.others:
            line += (f"; {len(self.others)} other configuration(s) not shown: "
                     + ", ".join(f"{lab} [{short(i)}]" for i, lab, _ in self.others)
                     + " (--config ID or --config all)")
        return line


def resolve(wanted: Optional[str], known: dict) -> Optional[str]:
    """Return the configuration id ``wanted`` names (id, unique id prefix, label, ``legacy``)
    among ``known`` (id -> label), None, or ``all``; ConfigurationError for none or several."""
    if wanted is None or wanted == ALL or wanted in known:
        return wanted
    by_label = [i for i, lab in known.items() if lab == wanted]
    prefix = [i for i in known if i.startswith(wanted)] if len(wanted) >= 4 else []
    matches = by_label or prefix
    if len(matches) == 1:
        return matches[0]
    listing = "; ".join(f"{short(i)} = {lab}" for i, lab in sorted(known.items()))
    if len(matches) > 1:
        raise ConfigurationError(f"--config {wanted!r} matches several configurations: "
                                 + ", ".join(short(i) for i in matches) + f". Known: {listing}")
    names = [short(i) for i in known] + list(known.values())
    close = difflib.get_close_matches(wanted, names, n=1)
    raise ConfigurationError(
        f"unknown configuration {wanted!r}" + (f"; did you mean {close[0]!r}?" if close else "")
        + f". Known: {listing or 'none'} (or 'all')")


def choose(rows: Iterable[dict], labels: dict, wanted: Optional[str] = None) -> dict:
    """Return {(dataset, metric): Choice} for score rows: the configuration covering the most
    (model, clusterer), a tie to the latest run; with ``wanted`` (a resolved id) a table
    without scores in it is left out."""
    tables: dict = {}
    for row in rows:
        config = row.get("configuration") or LEGACY
        entry = tables.setdefault((row["dataset"], row["metric"]), {}).setdefault(
            config, {"combos": set(), "run": -1})
        entry["combos"].add((row.get("model"), row.get("clusterer") or ""))
        entry["run"] = max(entry["run"], row.get("run_id") or 0)
    out = {}
    for (dataset, metric), configs in tables.items():
        ranked = sorted(configs.items(),
                        key=lambda item: (-len(item[1]["combos"]), -item[1]["run"], item[0]))
        if wanted is not None:
            ranked = [c for c in ranked if c[0] == wanted] + [c for c in ranked if c[0] != wanted]
            if ranked[0][0] != wanted:
                continue
        chosen, info = ranked[0]
        others = [(i, labels.get(i, i), len(v["combos"])) for i, v in ranked[1:]]
        out[(dataset, metric)] = Choice(dataset, metric, chosen, labels.get(chosen, chosen),
                                        len(info["combos"]), info["run"], others)
    return out


def chosen_rows(rows: list[dict], choices: dict) -> list[dict]:
    """Return the rows of each table's chosen configuration (rows of unchosen tables dropped)."""
    return [row for row in rows
            if (choice := choices.get((row["dataset"], row["metric"]))) is not None
            and (row.get("configuration") or LEGACY) == choice.configuration]


def table_configurations(scores: list[dict], labels: dict,
                         wanted: Optional[str] = None) -> tuple[list[dict], dict]:
    """Return (the scores to show, {(dataset, metric): Choice}) for ``wanted`` (resolved;
    ``all`` keeps every row and no Choice)."""
    if wanted == ALL:
        return list(scores), {}
    choices = choose(scores, labels, wanted)
    return chosen_rows(scores, choices), choices
