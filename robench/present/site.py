"""Build the leaderboard as a static, multi-page site from the results database.

docs/leaderboard.md lists its pages; each metric's LeaderboardSection supplies its part of them.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import jinja2
import markupsafe

from robench.present.leaderboard import (environment, not_applicable, registered_sections,
                                 chosen_configurations, format_number, format_percent,
                                 rank_rows, reading_stored_ranks)
from robench.metric_kit import is_helper, without_helpers
from robench.escaping import csv_cell, shorten
from robench.present.badges import headline_badge
from robench.present.formatting import cut, is_finite, printable, why_not
from robench.storage.store import Store
from robench.plugins import get_registry
from robench.present.plots import render_svg
from robench.storage.verification import status, verifications

DEFAULT_TOP = 20
#: The site's title when none is given (a board's is its ``leaderboard.json`` title).
DEFAULT_TITLE = "robench leaderboard"
_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
_OWNED = {"datasets": ".html", "models": ".html", "plots": ".svg", "images": ".png",
          "badges": ".svg"}
STYLE = Path(__file__).resolve().parent / "templates" / "site" / "style.css"
SORT_JS = STYLE.with_name("sort.js")
#: A family section's legend: a paragraph or list of class "legend" (never nested in itself).
_LEGEND = re.compile(r'<(p|ul) class="legend">.*?</\1>', re.S)
_TAG = re.compile(r"<[^>]*>")


def page_slug(name: str) -> str:
    """Return a file-name-safe slug of ``name`` (a hash is added unless it is a plain slug)."""
    name = str(name)
    if _SLUG.fullmatch(name) and name not in (".", ".."):
        return name
    safe = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "x"
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:10]}"


def _drawn(what: str, fn, *args, **kwargs):
    """Return ``(fn(*args), None)``, or ``(None, note)`` when it raises (the rest is built)."""
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - whatever stored values make a section raise
        why = cut(printable(f"{type(exc).__name__}: {exc}"), 200)
        return None, f"{what} could not be drawn from the stored scores ({why})."


def _badge_name(model: str, dataset: str, metric: str, used: dict) -> str:
    """Return the file stem of a badge: readable, and never one another badge has."""
    name = f"{page_slug(model)}--{page_slug(dataset)}--{page_slug(metric)}"
    if used.setdefault(name, (model, dataset, metric)) != (model, dataset, metric):
        name = page_slug(f"{name}|{model}|{dataset}|{metric}")
        used[name] = (model, dataset, metric)
    return name


def _spec(registry, kind: str, name: str):
    """Return the registered spec of ``kind`` named ``name``, or None if this install lacks it."""
    return registry.get(kind, name) if name in registry.names(kind) else None


class _Assets(dict):
    """The files of one build (plots, images, badges) by name; an image's name is its hash."""

    def image(self, png_b64: str) -> str:
        data = base64.b64decode(png_b64)
        name = f"images/{hashlib.sha256(data).hexdigest()[:16]}.png"
        self[name] = data
        return name

    def plot(self, plot: dict, stem: str) -> dict:
        svg = render_svg(plot).encode("utf-8")
        name = f"plots/{page_slug(stem)}.svg"
        self[name] = svg
        return {"src": name, "title": plot.get("title", ""), "alt": plot.get("alt", ""),
                "caption": plot.get("caption", "")}


def _site_environment(sections: dict, assets: _Assets, model_pages: dict) -> jinja2.Environment:
    """Return the leaderboard environment with the site's templates and link filters."""
    env = environment(sections)
    env.loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(STYLE.parent)), env.loader])

    @jinja2.pass_context
    def model_link(context, name):
        slug = model_pages.get(name)
        if slug is None:
            return short_name(name)
        root = context.get("root", "")
        return markupsafe.Markup('<a href="{}models/{}.html">{}</a>').format(
            root, slug, short_name(name))

    @jinja2.pass_context
    def png_src(context, png_b64):
        return context.get("root", "") + assets.image(png_b64)

    env.filters.update(model=model_link, png_src=png_src, slug=page_slug, name=short_name,
                       short=shorten)
    return env


def short_name(name) -> markupsafe.Markup:
    """Return a stored name for HTML: escaped, shortened, whole in a ``title`` where cut."""
    text = str(name)
    short = shorten(text)
    if short == text:
        return markupsafe.escape(text)
    return markupsafe.Markup('<span title="{}">{}</span>').format(text, short)


def _configuration(rows: list, runs: dict, choice=None) -> str:
    """Return the label of the configuration behind one table's score rows."""
    if choice is not None:
        return choice.text
    ids = sorted({r["run_id"] for r in rows if r.get("run_id") is not None})
    ran = [runs[i] for i in ids if i in runs]
    ns = sorted({r["n"] for r in rows if isinstance(r.get("n"), int)})
    parts = [("run", ids),
             ("profile", sorted({str((r.get("config") or {}).get("profile") or "")
                                 for r in ran} - {""})),
             ("seed", sorted({r["seed"] for r in ran if r.get("seed") is not None})),
             ("n =", [", ".join(map(str, ns[:4])) + (" …" if len(ns) > 4 else "")] if ns else [])]
    return " · ".join(f"{label} {', '.join(map(str, values))}"
                      for label, values in parts if values) or "not recorded"


def _provenance(rows: list, runs: dict) -> list:
    """Return the runs behind a model's scores, each with its merge source and versions."""
    out = []
    for run_id in sorted({r["run_id"] for r in rows if r.get("run_id") is not None}):
        run = runs.get(run_id) or {}
        source = str(run["contributor"]) if run.get("contributor") else ""
        if source and run.get("source"):
            its = run.get("source_run_id")
            source += f" ({run['source']}" + ("" if its is None else f", its run {its}") + ")"
        out.append({"id": run_id, "source": source, "command": run.get("command") or "",
                    "robench": run.get("robench_version") or "",
                    "git": (run.get("git_rev") or "")[:12],
                    "finished": run.get("finished_at") or run.get("started_at") or ""})
    return out


def _overview(rows: list, sections: dict, registry, empty: Optional[list] = None) -> Optional[dict]:
    """Return one data set's overview; a headline no model has a value in goes to ``empty``."""
    heads = []
    for metric, section in sections.items():
        mine = [r for r in rows if r["metric"] == metric]
        if section.headline is not None and mine:
            head = _headline(metric, section, mine, registry, empty)
            heads += [head] if head is not None else []
    if not heads:
        return None
    models = sorted({m for h in heads for m in h["by_model"]})

    # each headline's rows come best first (tied rows by value): a model's place is its
    # position in the first headline that has it, then in the next ones
    positions = [{r["model"]: i for i, r in enumerate(h["rows"])} for h in heads]
    return {"heads": heads, "models": sorted(models, key=lambda m: (
        [p.get(m, 10 ** 9) for p in positions], m))}


def _headline(metric: str, section, mine: list, registry, empty: Optional[list]) -> Optional[dict]:
    """Return a section's headline column of the overview, or None (noted in ``empty``)."""
    head = _drawn("headline", section.headline, mine)[0]
    if not (isinstance(head, dict) and head.get("rows")):
        return None
    label = head.get("label") or metric
    if not any(is_finite(r.get("value")) for r in head["rows"]):
        if empty is not None:
            why = next((w for w in (why_not(r.get("details")) for r in mine) if w),
                       "no value stored")
            empty.append({"metric": metric, "label": label, "why": why})
        return None
    higher = getattr(_spec(registry, "metrics", metric), "higher_is_better", True)
    baseline = head.get("baseline")  # the direction, and where it has one its baseline
    return {"metric": metric, "label": label, "rows": head["rows"],
            "direction": ("higher is better" if higher else "lower is better") + (
                f"; relative to the baseline model {baseline} (= 1)" if baseline else ""),
            "format": head.get("format", "num"), "note": head.get("note", ""),
            "rule": head.get("rule", ""), "columns": list(section.columns),
            "by_model": {r["model"]: r for r in head["rows"]}, "higher_is_better": higher}


def _pivot_other(rows: list, pseudo=frozenset({""})) -> list:
    """Return one table per metric without a section: models down, sub-scores across."""
    return [_pivot_table(metric, [r for r in rows if r["metric"] == metric], pseudo)
            for metric in sorted({r["metric"] for r in rows})]


def _pivot_table(metric: str, every: list, pseudo) -> dict:
    """Return :func:`_pivot_other`'s table of one metric."""
    mine = [r for r in every if r["model"] not in pseudo]
    own = sorted((r for r in every if r["model"] in pseudo),
                 key=lambda r: (r.get("clusterer") or "", r["score"], r["model"]))
    columns = sorted({(r.get("clusterer") or "", r["score"]) for r in mine},
                     key=lambda c: (c[1] != metric, c))
    cells: dict = defaultdict(dict)
    for r in mine:
        cells[r["model"]][(r.get("clusterer") or "", r["score"])] = r
    head = ([c for c in columns if c[1] == metric] or columns[:1] or [None])[0]
    order = rank_rows([{"model": m, "value": r.get("value"),
                        "higher_is_better": r.get("higher_is_better", True)}
                       for m, r in ((m, cells[m].get(head) or {}) for m in sorted(cells))]
                      ) if head is not None else []

    def label(c):  # a score, its clusterer in brackets
        return c[1] + (f" ({c[0]})" if c[0] else "")

    return {"metric": metric, "ranked_by": label(head) if head else "",
            "columns": [{"key": c, "label": label(c)} for c in columns],
            "rows": [{"model": o["model"], "rank": o["rank"],
                      "cells": [cells[o["model"]].get(c) for c in columns]} for o in order],
            "dataset_rows": own}


def _detail_tables(row: dict) -> list:
    """Return a score's per-class and per-fold tables, titled by metric, score and clusterer."""
    det = row.get("details") if isinstance(row.get("details"), dict) else {}
    what = row["metric"] if row["score"] == row["metric"] else f"{row['metric']} {row['score']}"
    if row.get("clusterer"):
        what += f", sources by {row['clusterer']}"
    per_class, per_fold, tables = det.get("per_class"), det.get("per_fold"), []
    if isinstance(per_class, list) and per_class and all(isinstance(c, dict) for c in per_class):
        keys = sorted({k for c in per_class for k, v in c.items() if is_finite(v)})
        tables.append({"title": f"{what}: per class", "columns": ["class"] + keys, "rows": [
            [str(i)] + [c.get(k) for k in keys] for i, c in enumerate(per_class)]})
    series = [(f"{kind} {name}", vals)
              for kind, values in sorted(per_fold.items()) if isinstance(values, dict)
              for name, vals in sorted(values.items()) if isinstance(vals, list)
              ] if isinstance(per_fold, dict) else []
    if series:
        tables.append({"title": f"{what}: per fold", "columns": ["fold"] + [c for c, _ in series],
                       "rows": [[str(i)] + [s[i] if i < len(s) else None for _, s in series]
                                for i in range(max(len(s) for _, s in series))]})
    return tables


def _strip_images(value):
    """Return ``value`` with base64 PNG strings (decoded examples) replaced by a marker."""
    if isinstance(value, dict):
        return {k: ("(image: see the model page)" if k == "png" and isinstance(v, str)
                    else _strip_images(v)) for k, v in value.items()}
    return [_strip_images(v) for v in value] if isinstance(value, list) else value


EXPORT_COLUMNS = ("dataset", "model", "clusterer", "metric", "metric_version", "score", "value",
                  "ci_low", "ci_high", "n", "higher_is_better", "run_id")


def _downloads(scores: list) -> dict[str, bytes]:
    """Return scores.json (with details, images stripped) and scores.csv (no details)."""
    rows = [{**{c: s.get(c) for c in EXPORT_COLUMNS},
             "higher_is_better": bool(s.get("higher_is_better")),
             "details": _strip_images(s.get("details"))} for s in scores]
    # one score per line: a rebuilt site's diff shows which scores changed
    lines = [json.dumps(r, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
             for r in rows]
    js = ('{"columns":' + json.dumps(list(EXPORT_COLUMNS) + ["details"]) + ',"scores":[\n'
          + ",\n".join(lines) + "\n]}")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for r in rows:
        # names are contributors' text: a spreadsheet must not read one as a formula
        writer.writerow(["" if r[c] is None else csv_cell(r[c]) for c in EXPORT_COLUMNS])
    return {"scores.json": (js + "\n").encode("utf-8"), "scores.csv": buf.getvalue().encode()}


def _json_safe(v):
    """Return ``v`` with non-finite floats as None (JSON has no NaN) and text printable."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, str):
        return printable(v, lines=True)
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    return [_json_safe(x) for x in v] if isinstance(v, list) else v


def _share_legends(blocks_of: dict[str, list]) -> list[dict]:
    """Move the legends on two or more model pages to legends.html; return its entries."""
    pages_with: dict[str, int] = defaultdict(int)
    title_of: dict[str, str] = {}
    for blocks in blocks_of.values():
        seen = set()
        for part in (part for block in blocks for part in block["sections"]):
            for match in _LEGEND.finditer(part["html"]):
                seen.add(match.group(0))
                title_of.setdefault(match.group(0), part["title"])
        for text in seen:
            pages_with[text] += 1
    shared = {text: "legend-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
              for text, n in pages_with.items() if n >= 2}
    if not shared:
        return []

    def link(match):
        text = match.group(0)
        if (anchor := shared.get(text)) is None:
            return text
        words = " ".join(_TAG.sub("", text).split())
        if len(words) > 80:  # cut at a space: never inside a character reference
            words = words[:80].rsplit(" ", 1)[0] + " &hellip;"
        return (f'<p class="legend">Legend: <a href="../legends.html#{anchor}">{words}</a>'
                "</p>")

    for part in (p for blocks in blocks_of.values() for b in blocks for p in b["sections"]):
        part["html"] = markupsafe.Markup(_LEGEND.sub(link, str(part["html"])))
    return [{"id": anchor, "title": title_of[text], "html": markupsafe.Markup(text),
             "pages": pages_with[text]}
            for text, anchor in sorted(shared.items(), key=lambda t: (title_of[t[0]], t[1]))]


@dataclass
class Site:
    """Everything the pages of one build are made from (read once, then only rendered)."""

    registry: object
    top: int
    scores: list  # the chosen configuration's scores, JSON-safe
    runs: dict  # run id -> run row
    records: list  # verification records
    sections: dict  # metric -> LeaderboardSection
    assets: _Assets
    env: jinja2.Environment
    pseudo: set  # model names that are not models ("" and sections' pseudo models)
    model_names: list  # every model with a page
    model_pages: dict  # model -> page slug
    helpers: dict  # (data set, model) -> metrics it was a helper of
    ranked_scores: list  # the scores of contributed (not helper) models
    datasets: list = field(default_factory=list)  # one context per data set (its page)
    tables_used: list = field(default_factory=list)  # (data set, metric) tables and configs
    per_model: dict = field(default_factory=lambda: defaultdict(list))  # model -> its rows
    badges: dict = field(default_factory=lambda: defaultdict(list))  # model -> its badges
    badge_names: dict = field(default_factory=dict)  # stem -> (model, data set, metric)
    title: str = DEFAULT_TITLE  # the site's title: every page's <title>, its brand, the <h1>

    def render(self, page: str, root: str = "", **context) -> str:
        """Return the page ``page``.html rendered with ``context`` and what every page gets."""
        return self.env.get_template(f"{page}.html").render(
            root=root, page=page, n_scores=len(self.scores), site_title=self.title,
            runs=[self.runs[i] for i in sorted(self.runs)], **context)


def read_site(store: Store, registry, top: int, config: Optional[str],
              title: str = DEFAULT_TITLE) -> Site:
    """Read what a build needs and lay out its data sets (a blank ``title``: the default)."""
    chosen, choices = chosen_configurations(store, config)
    scores = _json_safe(chosen)
    # helper models (trained by a metric for its own scores) get pages, never a rank
    helpers = store.helper_models()
    run_ids = sorted({s["run_id"] for s in scores if s.get("run_id") is not None})
    sections = registered_sections(registry)
    assets = _Assets()
    pseudo = {""} | {m for section in sections.values() for m in section.pseudo_models}
    model_names = sorted({s["model"] for s in scores} - pseudo)
    model_pages = {m: page_slug(m) for m in model_names}
    site = Site(registry=registry, top=top, scores=scores,
                runs={r["id"]: r for r in _json_safe(store.runs(run_ids) if run_ids else [])},
                records=verifications(store), sections=sections, assets=assets,
                env=_site_environment(sections, assets, model_pages), pseudo=pseudo,
                model_names=model_names, model_pages=model_pages, helpers=helpers,
                ranked_scores=without_helpers(scores, helpers),
                title=printable(" ".join(str(title or "").split()))[:200] or DEFAULT_TITLE)
    for r in scores:
        if is_helper(r, helpers) and r["model"] in model_pages:
            site.per_model[r["model"]].append(r)
    skips = store.skips()
    site.datasets += [_dataset_context(
        site, name, [s for s in site.ranked_scores if s["dataset"] == name],
        [s for s in skips if s["dataset"] == name], choices)
        for name in sorted({s["dataset"] for s in site.ranked_scores})]
    return site


def _dataset_context(site: Site, name: str, rows: list, skips: list, choices: dict) -> dict:
    """Return one data set's page context; record its tables, rows, badges on ``site``."""
    empty: list = []
    overview = _overview(rows, site.sections, site.registry, empty)
    ranked = overview["models"] if overview else sorted({r["model"] for r in rows} - site.pseudo)
    top_models = ranked[:site.top]
    parts, plots, top = [], [], set(top_models)
    for metric, section in site.sections.items():
        mine = [r for r in rows if r["metric"] == metric]
        html = _drawn_section(site, section, metric, mine, name) if mine else None
        if html is not None:  # a section that shows nothing has no part
            title = section.title or metric
            parts.append({"metric": metric, "title": title, "id": f"section-{page_slug(metric)}",
                          "html": markupsafe.Markup(html),
                          "configuration": _table_used(site, name, metric, title, mine, choices)})
            plots += _section_plots(site, f"{name}-{metric}", section,
                                    [r for r in mine if r["model"] in top])
    shown = {part["metric"] for part in parts}
    other = [r for r in rows if r["metric"] not in shown]  # no family section shows them
    for metric in sorted({r["metric"] for r in other}):
        _table_used(site, name, metric, metric, [r for r in other if r["metric"] == metric],
                    choices)
    for r in rows:
        if r["model"] in site.model_pages:
            site.per_model[r["model"]].append(r)
    _headline_badges(site, name, overview)
    configurations = [{"metric": t["metric"], "text": t["configuration"]}
                      for t in site.tables_used if t["dataset"] == name]
    return {"name": name, "slug": page_slug(name), "overview": overview, "empty_heads": empty,
            "configurations": configurations, "top_models": top_models, "top_set": top,
            "sections": parts, "plots": plots, "other": _pivot_other(other, site.pseudo),
            "not_applicable": not_applicable(skips, rows),
            "n_models": len({r["model"] for r in rows} - site.pseudo),
            "helpers": [{"model": m, "metrics": site.helpers[(name, m)]}
                        for m in sorted({m for (d, m) in site.helpers if d == name})],
            "verification": _verification_text(site.records, dataset=name)}


def _table_used(site: Site, name: str, metric: str, title: str, rows: list,
                choices: dict) -> str:
    """Record on ``site`` the table of ``rows`` on data set ``name``; return its configuration."""
    configuration = _configuration(rows, site.runs, choices.get((name, metric)))
    site.tables_used.append({"dataset": name, "metric": metric, "title": title,
                             "configuration": configuration})
    return configuration


def _drawn_section(site: Site, section, metric: str, rows: list, dataset: str):
    """Return a family section's HTML, the note why it could not be drawn, or None."""
    def html():
        context = section.build(rows)
        return markupsafe.Markup(site.env.get_template(f"{metric}/{section.template}").render(
            section=context, dataset=short_name(dataset),
            metric=site.registry.get("metrics", metric), root="../")) if context else None

    drawn, note = _drawn(f"The {section.title or metric} section", html)
    return drawn if note is None else markupsafe.Markup('<p class="unavailable">{}</p>').format(
        note)


def _section_plots(site: Site, stem: str, section, rows: list, model=None) -> list:
    """Return the plots a section draws from ``rows`` for ``model`` (None: the data set)."""
    plots = _drawn("plots", section.plots, rows)[0] if section.plots is not None else None
    drawn = [_drawn("plot", site.assets.plot, plot, f"{stem}-{i}")[0]
             for i, plot in enumerate(plots or ())
             if isinstance(plot, dict) and plot.get("model") == model]
    return [d for d in drawn if d is not None]


def _verification_text(records: list, **which) -> str:
    """Return a page's verification line for this model's or data set's trials."""
    found = status(records, **which)
    if "sampled" not in found:
        return found["text"]
    whose = "this model's" if "model" in which else "this data set's"
    total, matched = found.get("record_sampled"), found.get("record_verified")
    if total is None or total == found["sampled"]:
        return f"{found['text']}; counted over {whose} trials, all the trials it re-ran"
    return (f"{found['text']}; counted over {whose} trials: that verification re-ran "
            f"{total} trials in all, every model and data set it sampled ({matched} of "
            f"{total} matched)")


def _headline_badges(site: Site, dataset: str, overview: Optional[dict]) -> None:
    """Make an SVG badge of every headline row of a data set's overview, for its model page."""
    for h in (overview or {}).get("heads", ()):
        n_ranked = sum(1 for r in h["rows"] if r.get("rank"))
        for r in h["rows"]:
            if r["model"] in site.model_pages:
                src = f"badges/{_badge_name(r['model'], dataset, h['metric'], site.badge_names)}.svg"
                site.assets[src] = headline_badge(
                    f"robench {h['label']} · {dataset}", r, n_ranked,
                    pct=h["format"] == "pct").encode("utf-8")
                site.badges[r["model"]].append({"dataset": dataset, "metric": h["metric"],
                                                "label": h["label"], "src": src})


def index_page(site: Site) -> dict[str, str]:
    """Return index.html: one overview table per data set, the legends of the shown headlines."""
    shown = {h["metric"] for ds in site.datasets if ds["overview"] for h in ds["overview"]["heads"]}
    legends = [s.legend for metric, s in site.sections.items() if metric in shown and s.legend]
    return {"index.html": site.render("index", datasets=site.datasets, top=site.top,
                                      legends=legends)}


def dataset_pages(site: Site) -> dict[str, str]:
    """Return datasets/<slug>.html for every data set."""
    return {f"datasets/{ds['slug']}.html": site.render("dataset", "../", ds=ds)
            for ds in site.datasets}


def _model_metas(site: Site) -> dict:
    """Return every model's metadata: registry entry, runs, provenance, verification, badges."""
    helper_of: dict[str, list] = defaultdict(list)
    for (d, m), metrics in sorted(site.helpers.items()):
        helper_of[m].append(f"{', '.join(metrics)} on {d}")
    metas = {}
    for m in site.model_names:
        spec = _spec(site.registry, "models", m)  # None: this installation does not know it
        metas[m] = {"name": m, "registered": False, "plugin": "", "plugin_version": "",
                    "version": "", "description": "", "url": "", "params": None} if spec is None \
            else {"name": m, "registered": True, "plugin": spec.plugin, "plugin_version": getattr(
                site.registry.infos.get(spec.plugin), "version", "") or "",
                "version": spec.version, "description": spec.description,
                "url": spec.url if re.match(r"https?://", spec.url or "") else "",
                "params": spec.params}
        runs = _provenance(site.per_model[m], site.runs)
        # a helper was trained by a metric, not contributed by anyone
        metas[m].update(runs=runs, provenance="" if m in helper_of else "; ".join(
            sorted({r["source"] for r in runs if r["source"]})),
            helper="; ".join(helper_of.get(m, ())), badges=site.badges.get(m, []),
            verification=_verification_text(site.records, model=m))
    return metas


def _model_blocks(site: Site, model: str) -> list:
    """Return a model page's blocks: per data set its scores, sections, plots and details."""
    rows = site.per_model[model]
    blocks = []
    for ds in site.datasets:
        mine = [r for r in rows if r["dataset"] == ds["name"]]
        if not mine:
            continue
        parts, plots = [], []
        for metric, section in site.sections.items():
            own = [r for r in mine if r["metric"] == metric]
            html = _drawn_section(site, section, metric, own, ds["name"]) if own else None
            if html is not None:
                parts.append({"title": section.title or metric, "html": html})
            # drawn for each data set's top models only (docs/leaderboard.md, "It scales")
            if own and model in ds["top_set"]:
                plots += _section_plots(site, f"{ds['name']}-{model}-{metric}", section, own, model)
        details = [t for r in mine for t in (_drawn("details", _detail_tables, r)[0] or ())]
        heads = ds["overview"]["heads"] if ds["overview"] else ()
        headline = [{"head": h, "row": h["by_model"][model]} for h in heads
                    if h["by_model"].get(model)]
        blocks.append({"ds": ds, "scores": sorted(mine, key=lambda r: (
            r["metric"], r.get("clusterer") or "", r["score"])), "details": details,
            "sections": parts, "plots": plots, "headline": headline})
    return blocks


def model_pages(site: Site, metas: dict) -> dict[str, str]:
    """Return models/<slug>.html for every model, and legends.html of the legends they share."""
    blocks_of = {model: _model_blocks(site, model) for model in site.model_names}
    legends = _share_legends(blocks_of)
    pages = {f"models/{site.model_pages[model]}.html": site.render(
        "model", "../", meta=metas[model], blocks=blocks) for model, blocks in blocks_of.items()}
    if legends:
        pages["legends.html"] = site.render("legends", legends=legends)
    return pages


def models_page(site: Site, metas: dict) -> dict[str, str]:
    """Return models.html: the contributed models, then the helpers, with their data sets."""
    asked = {s["model"] for s in site.ranked_scores}  # models someone ran, somewhere
    names = site.model_names
    return {"models.html": site.render(
        "models", models=[metas[m] for m in names if m in asked],
        helpers=[metas[m] for m in names if m not in asked],
        datasets_of={m: sorted({r["dataset"] for r in site.per_model[m]}) for m in names},
        any_provenance=any(metas[m].get("provenance") for m in names))}


def methods_page(site: Site) -> dict[str, str]:
    """Return methods.html: each metric's definitions and papers, the tables' configurations."""
    metrics = []
    for metric in sorted({s["metric"] for s in site.scores}):
        spec = _spec(site.registry, "metrics", metric)
        versions = sorted({(s.get("metric_version") or "", s.get("definition") or "")
                           for s in site.scores if s["metric"] == metric})
        metrics.append({"name": metric, "spec": spec, "versions": versions,
                        "references": [{"title": t, "url": u if re.match(r"https?://", u or "")
                                        else ""} for t, u in (spec.references if spec else ())]})
    return {"methods.html": site.render("methods", metrics=metrics, tables=site.tables_used)}


def write_site(out_dir, files: dict[str, bytes]) -> Path:
    """Write the changed ``files`` under ``out_dir``, remove stale ones; return index.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for sub, ext in _OWNED.items():  # a page of a model no longer in the database goes away
        folder = out / sub
        if folder.is_dir():
            for old in folder.glob(f"*{ext}"):
                if f"{sub}/{old.name}" not in files:
                    old.unlink()
    for name, data in sorted(files.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
    return out / "index.html"


def build_site(store: Store, out_dir, registry=None, top: int = DEFAULT_TOP,
               config: Optional[str] = None, title: str = DEFAULT_TITLE) -> Path:
    """Write the static site of ``store``'s scores, one configuration per table (``config``
    picks one; ``title``: a board's ``leaderboard.json`` title); return index.html."""
    registry = get_registry() if registry is None else registry
    if top < 1:
        raise ValueError(f"--top must be at least 1, got {top}")
    with reading_stored_ranks(store):  # every page and badge shows the stored ranks
        site = read_site(store, registry, top, config, title)
        pages = {**index_page(site), **dataset_pages(site)}
        metas = _model_metas(site)
        pages.update(model_pages(site, metas))
        pages.update(models_page(site, metas))
        pages.update(methods_page(site))
    files = {name: text.encode("utf-8") for name, text in pages.items()}
    files.update(site.assets, **_downloads(site.scores), **{
        "style.css": STYLE.read_bytes(), "sort.js": SORT_JS.read_bytes()})
    return write_site(out_dir, files)


__all__ = ["build_site", "page_slug", "DEFAULT_TOP", "DEFAULT_TITLE", "format_number",
           "format_percent"]
