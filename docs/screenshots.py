"""Build the leaderboard site from a results database and screenshot its index with Chromium.

    python docs/screenshots.py --db robench.db            # writes docs/leaderboard-*.png

Uses Playwright for Python with the system Chromium (``apt-get install -y chromium``; never
``playwright install``). Each screenshot is stamped with the database's name, its newest run
and the date, so a reader knows what it shows.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
WIDTHS = {"desktop": (1400, 900), "phone": (390, 844)}


def stamp_text(db: Path) -> str:
    """Return the line stamped on each screenshot: database, newest run with its commit,
    profile and machine, and the date."""
    import json

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT id, command, robench_version, git_rev, platform, config "
                          "FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    finally:
        con.close()
    if row:
        try:
            profile = json.loads(row[5] or "{}").get("profile", "?")
        except ValueError:
            profile = "?"
        command = row[1] if len(row[1] or "") <= 60 else row[1][:59] + "\u2026"
        run = (f"run {row[0]}: {command} (robench {row[2]}, commit {(row[3] or '?')[:10]}, "
               f"profile {profile}, {row[4]})")
    else:
        run = "no runs"
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return f"{db.name} - {run} - screenshot {day}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path, help="results database")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="folder of the PNG files (default: docs/)")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if not args.db.exists():
        print(f"error: no database at {args.db}", file=sys.stderr)
        return 2
    if not Path(CHROMIUM).exists():
        print(f"error: {CHROMIUM} missing: apt-get update && apt-get install -y chromium",
              file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    from robench.present.site import build_site
    from robench.storage.store import Store

    text = stamp_text(args.db)
    with tempfile.TemporaryDirectory() as tmp:
        with Store(args.db, readonly=True) as store:  # never migrates or changes it
            index = build_site(store, tmp, top=args.top)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for name, (width, height) in WIDTHS.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(index.as_uri())
                page.evaluate("""text => {
                    const s = document.createElement('div');
                    s.textContent = text;
                    s.style.cssText = 'font: 12px sans-serif; background: #fff8d6; ' +
                                      'padding: 4px 8px; border-bottom: 1px solid #d6a83a';
                    document.body.prepend(s);
                }""", text)
                path = args.out / f"leaderboard-{name}.png"
                page.screenshot(path=str(path))
                print(f"wrote {path} ({width}x{height})")
                page.close()
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
