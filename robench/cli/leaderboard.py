"""`robench leaderboard`: the static site."""

from __future__ import annotations

import os
from pathlib import Path

import click

from robench.cli.common import (config_option, db_option, friendly_errors)
from robench.storage.store import Store


@click.command()
@click.option("--out", "out_dir", default="leaderboard", show_default=True,
              type=click.Path(file_okay=False), help="Directory of the static site.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=1),
              help="Models per data set on the index; every model is on the data set's page.")
@click.option("--title", default=None, metavar="TEXT",
              help="The site's title on every page (default: 'robench leaderboard'; a board's "
                   "`robench publish build` uses its leaderboard.json title).")
@config_option
@db_option
@friendly_errors
def leaderboard(out_dir, top, title, config, db_path):
    """Build the static leaderboard site from the stored scores.

    Writes index.html (an overview per data set), a page per data set and per model,
    models.html, methods.html, plots/*.svg, images/*.png, scores.json and scores.csv. Links
    are relative: open it from disk or publish the folder on any static host. The same
    database gives the same bytes.

    Each table (data set, metric) ranks the scores of one configuration and names it; by
    default the one covering the most models x clusterers (ties: the latest).

    \b
    Example:
      robench leaderboard --out leaderboard --top 10 && open leaderboard/index.html
      robench leaderboard --title "Digits robustness, lab runs"
    """
    from robench.present.site import build_site

    if not os.path.exists(db_path):
        raise FileNotFoundError(f"no results database at {db_path}; run `robench run --all` first")
    if config == "all":
        raise click.BadParameter("a leaderboard ranks one configuration per table; give an "
                                 "id, a label or 'legacy'", param_hint="--config")
    out = Path(out_dir)
    with Store(db_path, readonly=True) as store:
        path = build_site(store, out, top=top, config=config,
                          **({"title": title} if title is not None else {}))
    pages = {sub: len(list((out / sub).glob("*.html"))) for sub in ("datasets", "models")}
    click.echo(f"wrote {path}: {pages['datasets']} datasets, {pages['models']} models "
               f"({out / 'methods.html'}, {out / 'scores.json'})")


COMMANDS = (leaderboard,)
