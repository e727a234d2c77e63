"""Configurations: what a score's trials were run with, as part of the score's identity.

A *configuration* is everything about a run that changes a metric's trials besides the data
set, model and clusterer: the profile, repeats, sources per class, seed, the train/test split
fractions and the knob values of the sections the metric's protocol reads (``train``, its own
section, and those of the protocols it runs ``after``). :func:`describe` returns it as a plain
dict; :func:`fingerprint` hashes it. The fingerprint is part of every score's key and is
stored in ``scores.configuration``; the ``configurations`` table describes each one (label,
profile, repeats, sources, seed, knobs). So ``robench run -r 3`` then ``-r 2`` on one database
keeps both scores instead of the second overwriting the first.

Scores stored before configurations were recorded belong to the configuration ``legacy``.

A *table* — one metric on one data set, as ``robench results`` and the leaderboard show it —
ranks scores of one configuration only. :func:`choose` picks it: by default the configuration
covering the most (model, clusterer) combinations of that table; a tie goes to the latest
(the highest run id among its scores). ``--config`` picks one by id (a unique prefix), by
label, ``legacy``, or ``all`` (no choice: every configuration's scores, labelled).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Optional
import json

from robench.data.cache import content_key
from robench.errors import ConfigurationError  # noqa: F401 (public here too)
from robench.storage.migrations import LEGACY, LEGACY_LABEL  # noqa: F401 (public here too)
from robench.run.config import TRAIN_SECTION, knob_sections
#: ``--config`` value that shows every configuration instead of choosing one per table.
ALL = "all"


def _sections(metric, registry) -> list[str]:
    """Return the knob sections a metric's trials read: train, its protocol's, and those of
    the protocols it runs after (transitively), sorted."""

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
    """Return the configuration of ``metric``'s trials in the run ``cfg`` (resolved) as a dict.

    Keys: profile, repeats, sources, seed, test_size, val_fraction, knobs ({section: {knob:
    value}} for the sections the metric reads) and changed (the knobs whose value is not the
    profile's, as ``section.knob``: value; shown in the label, not part of the fingerprint
    beyond the values themselves).
    """

    if not cfg.knobs:
        cfg.resolve(registry)
    sections = _sections(metric, registry)
    declared = knob_sections(registry)
    knobs = {s: dict(cfg.knobs.get(s) or {}) for s in sections if s in cfg.knobs}
    changed = {}
    for section in sections:
        for knob in declared.get(section, (None, []))[1]:
            value = knobs.get(section, {}).get(knob.name)
            profile_value = knob.value_for(cfg.profile)
            if knob.name in knobs.get(section, {}) and value != profile_value:
                changed[f"{section}.{knob.name}"] = value
    return {
        "profile": cfg.profile,
        "repeats": int(cfg.repeats),
        "sources": int(cfg.k),
        "seed": int(cfg.seed),
        "test_size": float(cfg.test_size),
        "val_fraction": float(cfg.val_fraction),
        "knobs": knobs,
        "changed": changed,
    }


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
    changed = description.get("changed") or {}
    if changed:

        text += " (" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(changed.items())) + ")"
    return text


def configuration_row(description: dict, run_id: Optional[int] = None) -> dict:
    """Return the ``configurations`` row of a :func:`describe` dict."""
    return {
        "id": fingerprint(description),
        "label": label(description),
        "profile": description["profile"],
        "repeats": description["repeats"],
        "sources": description["sources"],
        "seed": description["seed"],
        "knobs": description["knobs"],
        "description": description,
        "run_id": run_id,
    }


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
    """Return the configuration id ``wanted`` names (id, unique id prefix, label, ``legacy``),
    None for no choice given, or ``all``; ConfigurationError if it names none or several.

    ``known`` maps id to label.
    """
    if wanted is None or wanted == ALL:
        return wanted
    if wanted in known:
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
    """Return {(dataset, metric): Choice} for score rows; see the module docstring for the rule.

    ``labels`` maps configuration id to label. ``wanted`` is a resolved id (or None): a table
    that has scores in it shows it; a table without scores in it is left out.
    """
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
    out = []
    for row in rows:
        choice = choices.get((row["dataset"], row["metric"]))
        if choice is not None and (row.get("configuration") or LEGACY) == choice.configuration:
            out.append(row)
    return out


def table_configurations(scores: list[dict], labels: dict,
                         wanted: Optional[str] = None) -> tuple[list[dict], dict]:
    """Return (the scores to show, {(dataset, metric): Choice}) for ``wanted`` (resolved).

    The function the leaderboard and ``robench results`` call: with ``wanted`` ``all`` every
    row is kept and each configuration of a table gets its own Choice-less label via ``labels``.
    """
    if wanted == ALL:
        return list(scores), {}
    choices = choose(scores, labels, wanted)
    return chosen_rows(scores, choices), choices
