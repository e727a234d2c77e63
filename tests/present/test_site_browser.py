"""The leaderboard site in a real browser: headless Chromium from the system package manager,
driven by Playwright for Python (no browser download: the system binary is used).

Skips, saying why, where /usr/bin/chromium or the playwright package is missing; `.ci/run`
installs both so CI runs it.
"""

import base64
import io
from pathlib import Path

import pytest

from robench.plugins import Registry, make_plugin_manager
from robench.run.scoring import save_scores
from robench.present.site import build_site
from robench.specs import Score
from robench.storage.store import Store
from tests.present.test_leaderboard import HOSTILE, HOSTILE_ATTR, HostilePlugin, rho_scores

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="no system Chromium at /usr/bin/chromium "
                              "(apt-get update && apt-get install -y chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (pip install -e '.[test]')")

DATASETS = ("digits", "mnist-5k", "synthetic-sources")
MODELS = ("mlp", "cnn-1", "cnn-2", "cnn-3", "svm", "evil", "linked", HOSTILE, HOSTILE_ATTR)


def _png(width: int, height: int) -> bytes:
    """Return a grey PNG of the given size (a stand-in for a decoded strip)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (width, height), color=128).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build a site of 3 data sets x 9 models (two with hostile names, one hostile plugin)."""
    tmp = tmp_path_factory.mktemp("browser")
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(HostilePlugin(), name="hostile")
    registry = Registry(pm, infos)
    with Store(tmp / "robench.db") as store:
        run_id = store.start_run(command="robench run --all", seed=0,
                                 config={"profile": "quick"}, plugin_versions={})
        scores = []
        for d, dataset in enumerate(DATASETS):
            for i, model in enumerate(MODELS):
                acc_i = 0.97 - 0.015 * i - 0.01 * d
                rho = 0.96 - 0.03 * ((i * 7) % 9) / 9
                for s in rho_scores(model, rho, rho * acc_i, acc_i, acc_i + 0.004, half=0.015):
                    scores.append(Score(dataset, s.model, s.clusterer, s.metric, s.score,
                                        s.value, s.ci_low, s.ci_high, n=s.n))
                scores.append(Score(dataset, model, "", "purity-ratio", "purity-ratio",
                                    0.5 + 0.02 * i, details={}))
                scores.append(Score(dataset, model, "", "purity-ratio", "model_acc", acc_i))
        # a coverage score with a decoded strip wider than a phone (the real one is 10 x 28 px
        # per class, scaled): it must scroll inside its container, not widen the page
        strip = base64.b64encode(_png(width=560, height=56)).decode()
        for model in ("mlp", HOSTILE):
            scores.append(Score("digits", model, "", "coverage", "coverage", 0.7, 0.6, 0.8, n=2,
                                details={"by_mix": {"0-100": 0.3, "50-50": 0.7, "100-0": 0.99},
                                         "repeats": 2, "decoder": {
                                             "rows": [{"label": "test images", "png": strip}],
                                             "columns": list(range(10)), "legible": True,
                                             "recognised": 0.9, "clean": 0.95},
                                         "table": {"0-100": {"100": 0.3}, "50-50": {"100": 0.7},
                                                   "100-0": {"100": 0.99}}}))
            scores.append(Score("digits", model, "", "coverage", "model_acc", 0.9, n=2))
        save_scores(store, scores, run_id, {"rho": ("2", "rho = E[AccX]/E[AccI]"),
                                            "purity-ratio": ("2", "p = C/Model_ACC"),
                                            "coverage": ("4", "coverage")})
        build_site(store, tmp / "site", registry=registry)
    return tmp / "site"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


def open_page(browser, url: str, width: int, problems: list, javascript: bool = True):
    """Open ``url`` at ``width`` px, recording console errors, page errors, dialogs and
    failed requests in ``problems``."""
    context = browser.new_context(viewport={"width": width, "height": 900},
                                  java_script_enabled=javascript)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
    page.goto(url)
    page.wait_for_load_state("load")
    return page


def test_every_page_loads_without_errors_dialogs_or_overflow(site, browser):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 3 + 9 + 3
    for path in pages:
        for width in (1400, 390):
            problems: list = []
            page = open_page(browser, path.as_uri(), width, problems)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            broken = page.evaluate(
                "Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                ".map(i => i.src)")
            links = page.evaluate("Array.from(document.querySelectorAll('a[href]'))"
                                  ".map(a => a.href)")
            page.context.close()
            name = path.relative_to(site)
            assert problems == [], (name, width, problems)
            assert broken == [], (name, broken)
            assert overflow <= 0, f"{name} overflows the page by {overflow}px at {width}px"
            for href in links:
                if href.startswith("file://"):
                    target = Path(href[len("file://"):].split("#")[0])
                    assert target.is_file(), (name, href)
                else:
                    assert href.startswith("https://"), (name, href)


def test_each_overview_fits_the_desktop_viewport_after_its_toc_link(site, browser):
    problems: list = []
    page = open_page(browser, (site / "index.html").as_uri(), 1400, problems)
    for dataset in DATASETS:
        page.click(f"nav.toc a[href='#ds-{dataset}']")
        page.wait_for_timeout(50)
        box = page.evaluate(f"""(() => {{
            const t = document.querySelector('#ds-{dataset} table').getBoundingClientRect();
            return [t.top, t.bottom, window.innerHeight];
        }})()""")
        top, bottom, height = box
        assert 0 <= top and bottom <= height, (dataset, box)
    page.context.close()
    assert problems == []


def column(page, table: str, index: int) -> list:
    return page.evaluate(f"""Array.from(document.querySelectorAll('{table} tbody tr'))
        .map(r => r.cells[{index}].getAttribute('data-value') || r.cells[{index}].textContent)""")


def test_sorting_by_a_header_reorders_rows_and_without_javascript_the_rank_order_stays(
        site, browser):
    problems: list = []
    page = open_page(browser, (site / "datasets" / "digits.html").as_uri(), 1400, problems)
    table = "#overview table"
    headers = page.evaluate(f"Array.from(document.querySelectorAll('{table} thead th'))"
                            ".map(h => h.textContent.trim())")
    acc_i = headers.index("E[AccI]")
    ranks = [float(v) for v in column(page, table, 1)]
    assert ranks == sorted(ranks)  # ranked order before any click
    page.click(f"{table} thead th:nth-child({acc_i + 1}) button")
    values = [float(v) for v in column(page, table, acc_i)]
    assert values == sorted(values) and len(values) == len(MODELS)
    assert page.get_attribute(f"{table} thead th:nth-child({acc_i + 1})",
                              "aria-sort") == "ascending"
    page.click(f"{table} thead th:nth-child({acc_i + 1}) button")
    assert [float(v) for v in column(page, table, acc_i)] == sorted(values, reverse=True)
    model_col = page.evaluate(f"Array.from(document.querySelectorAll('{table} tbody th'))"
                              ".map(h => h.textContent.trim())")
    assert model_col[0] == "mlp"  # the most accurate model first, its name moved with the row
    page.context.close()

    no_js = open_page(browser, (site / "datasets" / "digits.html").as_uri(), 1400, problems,
                      javascript=False)
    assert no_js.evaluate("document.querySelectorAll('th button.sort').length") == 0
    assert [float(v) for v in column(no_js, table, 1)] == sorted(ranks)
    no_js.context.close()
    assert problems == []


def test_hostile_model_names_render_as_text(site, browser):
    problems: list = []
    page = open_page(browser, (site / "models.html").as_uri(), 1400, problems)
    names = page.evaluate("Array.from(document.querySelectorAll('tbody th.model'))"
                          ".map(h => h.textContent.trim())")
    assert HOSTILE in names and HOSTILE_ATTR in names
    assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0
    page.click(f"text={HOSTILE}")
    page.wait_for_load_state("load")
    assert HOSTILE in page.inner_text("h1")
    page.context.close()
    assert problems == []
