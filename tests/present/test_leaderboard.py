"""Tests for the static leaderboard site (robench.present.site): pages, links, content, determinism."""

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from robench import hookimpl
from robench.present.leaderboard import format_percent, rank_rows
from robench.present.plots import render_svg
from robench.plugins import Registry, make_plugin_manager
from tests.helpers import save_scores
from robench.present.site import build_site, page_slug
from robench.specs import ModelSpec, Score
from robench.storage.store import Store

RHO_DEFINITION = "rho = E[AccX] / E[AccI] over R repeats (paper eq. 3)"
PURITY_DEFINITION = "p = C_purity / Model_ACC"
HOSTILE = "<script>alert(1)</script>"
HOSTILE_ATTR = '"><img src=x onerror=alert(1)>'


def rho_scores(model, rho, acc_x, acc_i, acc_random, clusterer="kmeans", n=5, half=0.02,
               per_class=None):
    """Return the four rho sub-scores of one model on digits."""
    details = {"per_class": per_class} if per_class else {}
    return [
        Score("digits", model, clusterer, "rho", "rho", rho, rho - half, rho + half, n=n,
              details=details),
        Score("digits", model, clusterer, "rho", "acc_exclusive", acc_x, n=n),
        # E[AccI] with its interval: a model is ranked only when it excludes chance
        Score("digits", model, clusterer, "rho", "acc_inclusive", acc_i, acc_i - 0.01,
              min(acc_i + 0.01, 1.0), n=n),
        Score("digits", model, clusterer, "rho", "acc_random", acc_random, n=n),
    ]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "robench.db")
    yield s
    s.close()


@pytest.fixture
def filled(store):
    run_id = store.start_run(command="robench run", seed=0, config={"profile": "quick"},
                             plugin_versions={})
    scores = (
        rho_scores("mlp", 0.900, 0.8100, 0.9000, 0.9050,
                   per_class=[{"acc_exclusive": 0.8, "acc_inclusive": 0.9, "rho": 0.8889},
                              {"acc_exclusive": 0.82, "acc_inclusive": 0.9, "rho": 0.9111}])
        + rho_scores("lenet", 0.975, 0.9263, 0.9500, 0.9510)
        + rho_scores("logreg", 0.850, 0.7650, 0.9000, 0.9000)
        + rho_scores("lenet", 0.700, 0.6650, 0.9500, 0.9510, clusterer="oracle")
        + [
            # a metric without a section of its own: pivoted on the data-set page
            Score("digits", "mlp", "", "feature-ratio", "kmeans", 0.42, 0.40, 0.44, n=3),
            Score("digits", "lenet", "", "feature-ratio", "kmeans", 0.61, n=3,
                  higher_is_better=True),
            Score("digits", "mlp", "", "error-gap", "gap", 0.05, higher_is_better=False,
                  details={"per_fold": {"shifted": {"test": [0.7, 0.8]},
                                        "random": {"test": [0.9, 0.91]}}}),
            Score("digits", "lenet", "", "error-gap", "gap", 0.01, higher_is_better=False),
            # a score of the data set itself (no model), like shifted-cv's Wasserstein ratio
            Score("digits", "", "kmeans", "error-gap", "fold_distance_ratio", 1.24, n=3),
        ]
    )
    save_scores(
        store,
        scores,
        run_id,
        {
            "rho": ("1", RHO_DEFINITION),
            "feature-ratio": ("2", PURITY_DEFINITION),
            "error-gap": ("1", "gap " + HOSTILE),
        },
    )
    store.finish_run(run_id, "ok", n_ok=12)
    return store


def section(html, start, end):
    """Return the part of ``html`` from the first ``start`` to the next ``end``."""
    i = html.index(start)
    return html[i : html.index(end, i)]


def read(site: Path, name: str) -> str:
    return (site / name).read_text(encoding="utf-8")


class _Links(HTMLParser):
    """Collect href/src attributes and element ids of one page."""

    def __init__(self):
        super().__init__()
        self.links, self.ids, self.imgs = [], set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for key in ("href", "src"):
            if attrs.get(key) is not None:
                self.links.append((tag, key, attrs[key]))
        if tag == "img":
            self.imgs.append(attrs)


def parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def check_links(site: Path) -> int:
    """Assert every internal link of every page resolves (file and #fragment); return count."""
    pages = sorted(site.rglob("*.html"))
    parsed = {p: parse(p) for p in pages}
    n = 0
    for page, links in parsed.items():
        for tag, key, url in links.links:
            if tag == "a" and re.match(r"https?://", url):
                continue  # a paper or a model's own page: a link out, never a resource
            assert not re.match(r"[a-z][a-z0-9+.-]*:|//", url), (page, url)
            target, _, fragment = url.partition("#")
            path = (page.parent / target).resolve() if target else page
            assert path.is_file(), (page.relative_to(site), url)
            if fragment:
                assert fragment in parsed[path].ids, (page.relative_to(site), url)
            n += 1
        for img in links.imgs:
            assert img.get("alt"), (page, img)
    return n


def test_site_writes_every_page_and_all_links_resolve(filled, tmp_path):
    site = tmp_path / "site"
    index = build_site(filled, site)
    assert index == site / "index.html"
    for name in ("index.html", "datasets/digits.html", "models/mlp.html", "models/lenet.html",
                 "models/logreg.html", "models.html", "methods.html", "scores.json",
                 "scores.csv", "style.css"):
        assert (site / name).is_file(), name
    assert sorted(p.name for p in (site / "plots").glob("*.svg")) == [
        "digits-rho-0.svg", "digits-rho-1.svg", "digits-rho-2.svg", "digits-rho-3.svg"]
    assert check_links(site) > 40
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert "data:image" not in html  # images are files
        assert '<link rel="stylesheet" href="' in html and "http" not in re.sub(
            r'<a href="https?://[^"]*"', "", html)


def test_index_ranks_by_rho_with_accuracies_beside_and_ties(filled, tmp_path):
    html = read(tmp_path, build_site(filled, tmp_path).name)
    overview = section(html, 'id="ds-digits"', "</table>")
    order = [overview.index(f'models/{m}.html">{m}</a>') for m in ("lenet", "mlp", "logreg")]
    assert order == sorted(order), "models must be listed by descending rho"
    assert "rho (kmeans) rank" in overview and "E[AccX]" in overview and "E[AccI]" in overview
    assert "random split" in overview
    row = section(overview, 'models/lenet.html', "</tr>")
    # no per-repeat values stored: no pair is tested, so every model may hold every rank;
    # the estimate's position (#1) sorts the rows, labelled as a point estimate
    assert 'data-value="1"' in row and ">1-3 <span" in row and "#1</span>" in row
    assert "0.975" in row and "[0.955, 0.995]" in row
    assert "92.6%" in row and "95.0%" in row and "95.1%" in row  # E[AccX], E[AccI], random
    assert 'class="tie"' not in overview  # these intervals do not overlap


def test_untested_pairs_leave_every_rank_open(store, tmp_path):
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    scores = (rho_scores("a", 0.95, 0.9, 0.95, 0.95, half=0.05)
              + rho_scores("b", 0.93, 0.88, 0.95, 0.95, half=0.05)
              + rho_scores("c", 0.70, 0.66, 0.95, 0.95, half=0.01))
    save_scores(store, scores, run_id, {"rho": ("2", RHO_DEFINITION)})
    html = read(tmp_path, build_site(store, tmp_path).name)
    overview = section(html, 'id="ds-digits"', "</table>")
    ranks = re.findall(r'class="num rank sub" data-value="(\d)"[^>]*>([0-9-]+) ', overview)
    assert ranks == [("1", "1-3"), ("2", "1-3"), ("3", "1-3")]


def test_dataset_page_has_every_section_pivoted_other_metrics_and_plots(filled, tmp_path):
    build_site(filled, tmp_path)
    html = read(tmp_path, "datasets/digits.html")
    kmeans = section(html, "<code>kmeans</code>", "</table>")
    assert re.search(r'class="rank" data-value="1">1-[23] <span class="ci"[^>]*>#1</span></td>\s*'
                     r'<th scope="row" class="model"><a href="../models/lenet.html">lenet</a>',
                     kmeans)
    assert "[92.63%, 95.00%]" in kmeans and 'style="left: 92.63%; width: 2.37%"' in kmeans
    oracle = section(html, "<code>oracle</code>", "</table>")
    assert "lenet.html" in oracle and "mlp.html" not in oracle
    gap = section(html, 'id="other-error-gap"', "</table>")
    # lower is better for error-gap: lenet (0.01) ranks above mlp (0.05)
    assert gap.index("lenet.html") < gap.index("mlp.html")
    assert "sorted by gap (the estimate; no pair of these is tested)</caption>" in gap
    # the data set's own score is not a model's row (no blank model, no rank): its own
    # labelled table
    assert "fold_distance_ratio" not in gap and '<th scope="row" class="model"></th>' not in html
    own = section(html, "error-gap scores of the data set digits itself", "</table>")
    assert re.search(r'<th scope="row">fold_distance_ratio</th><td>kmeans</td>\s*'
                     r'<td class="num">1.240</td>', own)
    ratio = section(html, 'id="other-feature-ratio"', "</table>")
    assert "[0.400, 0.440]" in ratio
    # scores saved without a run configuration are the database's "legacy" configuration
    assert "Configuration of this table: <code>configuration legacy" in html
    assert html.count("<figure>") == 4 and 'alt="Scatter plot of rho' in html
    assert 'href="#section-rho"' in html  # table of contents


def test_model_page_shows_metadata_scores_per_class_and_folds(filled, tmp_path):
    build_site(filled, tmp_path)
    html = read(tmp_path, "models/mlp.html")
    assert "Model: mlp" in html and "MLP" in html  # the registered description
    assert "robench.builtin.models" in html
    # each detail table says which metric, score and clusterer it is
    assert "<caption>rho, sources by kmeans: per class</caption>" in html
    assert "0.889" in html and "0.911" in html
    assert "<caption>error-gap gap: per fold</caption>" in html
    assert "shifted test" in html and "0.800" in html
    assert "All 6 stored scores of mlp on digits" in html
    models = read(tmp_path, "models.html")
    assert 'href="models/logreg.html"' in models


def test_model_pages_link_to_shared_legends_and_script_instead_of_repeating_them(
        filled, tmp_path):
    # at 1,000 models the legends were a fifth of every model page (benchmarks/
    # leaderboard_scale.py: 89 MB site); they are on one page now, as the sort script is
    build_site(filled, tmp_path)
    whole = "no loss on unseen sources"  # the rho section's legend, past its link text
    legends = read(tmp_path, "legends.html")
    assert whole in legends and "Shown on 3 model pages" in legends
    assert whole in read(tmp_path, "datasets/digits.html")  # beside its table there
    script = "function key(cell)"
    assert script in read(tmp_path, "sort.js")
    for model in ("mlp", "lenet", "logreg"):
        html = read(tmp_path, f"models/{model}.html")
        assert whole not in html and script not in html
        assert 'Legend: <a href="../legends.html#legend-' in html
        assert "Robustness &rho; = E[AccX] / E[AccI]: each class" in html  # the link text
        assert '<script src="../sort.js"></script>' in html
    assert check_links(tmp_path) > 0  # every legend anchor resolves


def test_a_legend_on_one_model_page_only_stays_there():
    from markupsafe import Markup

    from robench.present.site import _share_legends

    shared = '<p class="legend">How to read it.</p>'
    own = '<ul class="legend"><li>only a</li></ul>'
    blocks_of = {m: [{"sections": [{"title": "Rho", "html": Markup(shared + extra)}]}]
                 for m, extra in (("a", own), ("b", ""))}
    entries = _share_legends(blocks_of)
    assert [(e["title"], str(e["html"]), e["pages"]) for e in entries] == [
        ("Rho", shared, 2)]
    a = str(blocks_of["a"][0]["sections"][0]["html"])
    assert own in a and shared not in a
    assert a.startswith(f'<p class="legend">Legend: <a href="../legends.html#{entries[0]["id"]}">'
                        "How to read it.</a></p>")


def test_a_builtin_model_page_states_its_parameters(filled, tmp_path):
    from robench.plugins import get_registry

    build_site(filled, tmp_path)
    text = get_registry().get("models", "mlp").params  # counted in tests/learn/test_train.py
    assert "50,826 on 8x8 digits" in text
    assert f"<dt>Parameters</dt><dd>{text}</dd>" in read(tmp_path, "models/mlp.html")
    assert f"<td>{text}</td>" in read(tmp_path, "models.html")  # text: not a number column


@pytest.mark.parametrize("params", [-1, True, 1.5, "  ", ["1"]])
def test_a_model_spec_refuses_params_that_are_neither_a_count_nor_a_text(params):
    with pytest.raises(ValueError, match="params must be a number of trainable parameters"):
        ModelSpec(name="m", build=lambda ctx: None, description="d", params=params)


def test_methods_page_definitions_papers_configurations_runs(filled, tmp_path):
    build_site(filled, tmp_path)
    html = read(tmp_path, "methods.html")
    assert RHO_DEFINITION in html and PURITY_DEFINITION in html and "Version 2" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Source-aware Partitioning for Robust Cross-validation" in html
    run = filled.runs()[0]
    runs = section(html, 'id="runs"', "</table>")
    assert run["started_at"] in runs and run["robench_version"] in runs
    configs = section(html, 'id="configurations"', "</table>")
    assert "Robustness rho" in configs and "error-gap" in configs


def test_downloads_carry_every_score(filled, tmp_path):
    build_site(filled, tmp_path)
    data = json.loads(read(tmp_path, "scores.json"))
    assert len(data["scores"]) == len(filled.scores()) == 21
    rows = list(csv.DictReader((tmp_path / "scores.csv").open(encoding="utf-8")))
    assert len(rows) == 21 and set(rows[0]) >= {"dataset", "model", "metric", "value", "ci_low"}
    lenet = next(r for r in rows if r["model"] == "lenet" and r["score"] == "rho"
                 and r["clusterer"] == "kmeans")
    assert float(lenet["value"]) == 0.975 and float(lenet["ci_low"]) == pytest.approx(0.955)


def test_same_database_gives_a_byte_identical_site(filled, tmp_path):
    def snapshot(folder):
        return {p.relative_to(folder).as_posix(): p.read_bytes()
                for p in sorted(folder.rglob("*")) if p.is_file()}

    build_site(filled, tmp_path / "a")
    build_site(filled, tmp_path / "b")
    a, b = snapshot(tmp_path / "a"), snapshot(tmp_path / "b")
    assert a == b and len(a) > 10
    svg = a["plots/digits-rho-0.svg"].decode()
    assert "<dc:date>" not in svg and "robench" in svg


def test_rebuild_removes_pages_of_models_no_longer_stored(filled, tmp_path):
    build_site(filled, tmp_path)
    (tmp_path / "models" / "gone.html").write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    build_site(filled, tmp_path)
    assert not (tmp_path / "models" / "gone.html").exists()
    assert (tmp_path / "notes.txt").exists()  # not the site's own file: left alone


def test_top_keeps_the_index_short_and_the_dataset_page_complete(filled, tmp_path):
    build_site(filled, tmp_path, top=2)
    index = section(read(tmp_path, "index.html"), 'id="ds-digits"', "</section>")
    assert "lenet.html" in index and "mlp.html" in index and "logreg.html" not in index
    assert "Top 2 of 3 models" in index
    assert "logreg.html" in section(read(tmp_path, "datasets/digits.html"), 'id="overview"',
                                    "</table>")


class HostilePlugin:
    """A plugin whose model metadata tries to inject markup."""

    @hookimpl
    def register_models(self, register):
        register(ModelSpec(name="evil", build=lambda ctx: None,
                           description=HOSTILE + HOSTILE_ATTR, version=HOSTILE_ATTR,
                           url="javascript:alert(1)", params="about " + HOSTILE))
        register(ModelSpec(name="linked", build=lambda ctx: None, description="has a link",
                           url="https://example.org/model?a=1&b=2", params=12345))


def test_hostile_names_and_metadata_render_as_text(store, tmp_path):
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(HostilePlugin(), name="hostile")
    registry = Registry(pm, infos)
    run_id = store.start_run(command=HOSTILE, seed=0, config={}, plugin_versions={})
    scores = (rho_scores("evil", 0.9, 0.8, 0.9, 0.9) + rho_scores("linked", 0.8, 0.7, 0.9, 0.9)
              + rho_scores(HOSTILE, 0.7, 0.6, 0.9, 0.9) + rho_scores(HOSTILE_ATTR, 0.6, 0.5, 0.9,
                                                                      0.9))
    save_scores(store, scores, run_id, {"rho": ("2", HOSTILE)})
    build_site(store, tmp_path, registry=registry)
    for page in tmp_path.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        assert "<script>alert" not in html and "<img src=x" not in html, page
        assert "javascript:" not in html, page
    assert (tmp_path / "models" / f"{page_slug(HOSTILE)}.html").is_file()
    assert re.fullmatch(r"[a-z0-9-]+", page_slug(HOSTILE)) and page_slug(HOSTILE) != page_slug(
        HOSTILE_ATTR)
    linked = read(tmp_path, "models/linked.html")
    assert 'href="https://example.org/model?a=1&amp;b=2"' in linked and "12,345" in linked
    assert "&lt;script&gt;" in read(tmp_path, "models/evil.html")
    assert "<dd>about &lt;script&gt;" in read(tmp_path, "models/evil.html")  # params as text
    check_links(tmp_path)


def test_leaderboard_handles_an_empty_store(store, tmp_path):
    html = read(tmp_path, build_site(store, tmp_path / "empty").relative_to(tmp_path).as_posix())
    assert "No scores yet" in html and "<table" not in html


def test_cli_leaderboard_top_and_refusals(filled, tmp_path):
    from click.testing import CliRunner

    from robench.cli import cli

    db = str(tmp_path / "robench.db")
    out = tmp_path / "cli-site"
    res = CliRunner().invoke(cli, ["leaderboard", "--db", db, "--out", str(out), "--top", "1"])
    assert res.exit_code == 0, res.output
    assert "datasets, " in res.output and (out / "models" / "mlp.html").is_file()
    bad = CliRunner().invoke(cli, ["leaderboard", "--db", db, "--out", str(out), "--top", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_render_svg_is_deterministic_and_refuses_unknown_kinds():
    plot = {"kind": "scatter", "title": "t", "xlabel": "x", "ylabel": "y", "percent": ("x",),
            "points": [{"label": "a", "x": 0.9, "y": 0.95, "y_low": 0.9, "y_high": 1.0},
                       {"label": "b", "x": float("nan"), "y": 0.5}]}
    first = render_svg(plot)
    assert first == render_svg(plot) and first.startswith("<?xml")
    lines = render_svg({"kind": "lines", "series": [{"label": "s", "x": [0, 50, 100],
                                                      "y": [0.2, 0.5, None]}]})
    assert "<svg" in lines
    with pytest.raises(ValueError, match="unknown plot kind"):
        render_svg({"kind": "pie"})


def test_rank_rows_respects_direction_ties_and_missing():
    rows = [
        {"model": "a", "value": 0.5, "higher_is_better": False},
        {"model": "b", "value": None, "higher_is_better": False},
        {"model": "c", "value": 0.2, "higher_is_better": False},
        {"model": "d", "value": 0.2, "higher_is_better": False},
    ]
    ranked = rank_rows(rows)
    assert [(r["model"], r["rank"]) for r in ranked] == [
        ("c", 1), ("d", 1), ("a", 3), ("b", None)
    ]


def test_format_percent():
    assert format_percent(0.92634) == "92.63%"
    assert format_percent(None) == "—"
    assert format_percent(float("nan")) == "—"


def test_leaderboard_lists_what_could_not_apply_unless_a_later_run_scored_it(filled, tmp_path):
    reason = "clusterer 'oracle' needs true source ids and data set 'digits' has none"
    for model in ("mlp", "logreg"):
        filled.save_skip(dataset="digits", model=model, clusterer="oracle", metric="rho",
                         reason=reason, run_id=1)
    # stale: lenet/oracle on digits has scores (a later run scored it), so it is not listed
    filled.save_skip(dataset="digits", model="lenet", clusterer="oracle", metric="rho",
                     reason=reason, run_id=1)
    filled.save_skip(dataset="other", model="mlp", clusterer="", metric="rho",
                     reason="no scores for this data set", run_id=1)
    build_site(filled, tmp_path)
    part = section(read(tmp_path, "datasets/digits.html"), 'id="not-applicable"', "</ul>")
    assert reason.replace("'", "&#39;") in part and "(models: logreg, mlp)" in part
    assert not (tmp_path / "datasets" / "other.html").exists()


def test_adequacy_curves_where_stored(store, tmp_path):
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    table = [{"size": size, "n_samples": n, "acc_exclusive": x, "acc_inclusive": i, "rho": x / i,
              "ci_low": x / i - 0.05, "ci_high": x / i + 0.05, "n": 2}
             for size, n, x, i in ((100, 100.0, 0.6, 0.8), (300, 300.0, 0.7, 0.85),
                                   ("full", 1400.0, 0.8, 0.9))]
    scores = rho_scores("mlp", 0.9, 0.81, 0.9, 0.9) + [
        Score("digits", "mlp", "kmeans", "adequacy", "worst_class_rho", 0.5,
              details={"table": table, "ranking": [
                  {"class": 9, "rho": [0.4, 0.5], "reading": "class 9 is hard"}]}),
        Score("digits", "mlp", "kmeans", "adequacy", "enough_inclusive", None,
              details={"reading": "E[AccI] still rises: more data helps"})]
    save_scores(store, scores, run_id, {"rho": ("2", "rho"), "adequacy": ("2", "adequacy")})
    build_site(store, tmp_path)
    html = read(tmp_path, "datasets/digits.html")
    part = section(html, 'id="section-adequacy"', "</section>")
    assert "rho @ full" in part and "0.889" in part and "[0.839, 0.939]" in part
    assert "n = 1400" in part and "class 9 is hard" in part and "more data helps" in part
    assert 'alt="Line plot of rho (vertical) against the number of training samples' in html
    model = read(tmp_path, "models/mlp.html")
    assert "mlp: accuracy as the training set grows (kmeans)" in model
    check_links(tmp_path)


def test_no_interval_is_shown_where_none_is_defined(store, tmp_path):
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    scores = rho_scores("mlp", 0.9, 0.81, 0.9, 0.9)
    scores[0] = Score("digits", "mlp", "kmeans", "rho", "rho", 0.9, None, None, n=1)
    save_scores(store, scores, run_id, {"rho": ("2", "rho")})
    build_site(store, tmp_path)
    for name in ("index.html", "datasets/digits.html", "models/mlp.html"):
        html = read(tmp_path, name)
        assert "0.900" in html and "[—" not in html and "—]" not in html, name


def test_a_merged_database_shows_contributors_models_with_their_provenance(tiny_registry,
                                                                          tmp_path):
    from click.testing import CliRunner

    from robench.cli import cli
    from robench.exchange.merge import merge_databases

    tiny = ["run", "-d", "tiny", "-c", "kmeans", "-k", "3", "-r", "2", "--executor", "local",
            "--metric", "rho"]
    for db, model in (("mine.db", "centroid"), ("alice.db", "spy")):
        res = CliRunner().invoke(cli, tiny + ["-m", model, "--db", str(tmp_path / db)])
        assert res.exit_code == 0, res.output
    merge_databases([tmp_path / "alice.db"], tmp_path / "mine.db", contributors=["alice"])
    with Store(tmp_path / "mine.db") as merged:
        build_site(merged, tmp_path / "site")
    site = tmp_path / "site"
    spy = read(site, "models/spy.html")
    assert "Contributed by</dt><dd>alice (alice.db, its run 1)" in spy
    assert "(from alice (alice.db, its run 1)): <code>" in spy
    mine = read(site, "models/centroid.html")
    assert "Contributed by" not in mine and "Scores from</dt><dd>run 1: <code>" in mine
    models = section(read(site, "models.html"), "<tbody>", "</tbody>")
    row = section(models, "models/spy.html", "</tr>")
    assert "alice (alice.db, its run 1)" in row
    # both contributions rank in one table
    overview = section(read(site, "index.html"), 'id="ds-tiny"', "</table>")
    assert "models/spy.html" in overview and "models/centroid.html" in overview


def test_tied_models_are_listed_by_their_value_not_by_the_next_headline(store, tmp_path):
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    scores = (rho_scores("a", 0.90, 0.85, 0.95, 0.95, half=0.05)
              + rho_scores("b", 0.93, 0.88, 0.95, 0.95, half=0.05)
              + [Score("digits", "a", "", "purity-ratio", "purity-ratio", 0.9),
                 Score("digits", "b", "", "purity-ratio", "purity-ratio", 0.1)])
    save_scores(store, scores, run_id, {"rho": ("2", "rho"), "purity-ratio": ("2", "p")})
    html = read(tmp_path, build_site(store, tmp_path).name)
    overview = section(html, 'id="ds-digits"', "</table>")
    # both share rho rank 1; b has the higher rho, so it comes first although a has the
    # better purity-ratio
    assert overview.index("models/b.html") < overview.index("models/a.html")


class _Tables(HTMLParser):
    """Collect each table's caption text and its header cells without a scope."""

    def __init__(self):
        super().__init__()
        self.tables, self.unscoped, self._caption = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append("")
        elif tag == "caption":
            self._caption = ""
        elif tag == "th" and not dict(attrs).get("scope"):
            self.unscoped.append(self.getpos())

    def handle_data(self, data):
        if self._caption is not None:
            self._caption += data

    def handle_endtag(self, tag):
        if tag == "caption" and self.tables:
            self.tables[-1], self._caption = " ".join(self._caption.split()), None


def test_every_table_has_a_caption_and_every_header_cell_a_scope(filled, tmp_path):
    from robench.plugins import make_registry

    docs = Path(__file__).resolve().parents[1] / "fixtures" / "docs.db"
    with Store(docs, readonly=True) as store:
        build_site(store, tmp_path / "docs", registry=make_registry(load_entrypoints=False))
    build_site(filled, tmp_path / "filled")
    pages = sorted((tmp_path / "docs").rglob("*.html")) + sorted(
        (tmp_path / "filled").rglob("*.html"))
    captions = []
    for page in pages:
        parser = _Tables()
        parser.feed(page.read_text(encoding="utf-8"))
        assert all(parser.tables), (page.name, parser.tables)
        assert parser.unscoped == [], (page.name, parser.unscoped)
        captions += parser.tables
    # repeated captions on a model page say which score and clusterer they show
    model = (tmp_path / "docs" / "models" / "mlp.html").read_text(encoding="utf-8")
    per_class = re.findall(r"<caption>(adequacy [^<]*per class)</caption>", model)
    assert per_class == ["adequacy rho@100, sources by kmeans: per class",
                         "adequacy rho@300, sources by kmeans: per class",
                         "adequacy rho@full, sources by kmeans: per class"]
    assert len(captions) > 40


def test_a_scatter_names_its_points_in_a_legend_with_text_of_9_pt_or_more():
    names = [f"m{i}" for i in range(10)]
    svg = render_svg({"kind": "scatter", "title": "t", "xlabel": "x", "ylabel": "y",
                      "points": [{"label": n, "x": 0.5, "y": 0.5} for n in names]})
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert all(texts.count(n) == 1 for n in names), texts  # once each: the legend
    sizes = [float(v) for v in re.findall(r"font-size: ([\d.]+)px", svg)]
    assert sizes and min(sizes) >= 9
    width = float(re.search(r'width="([\d.]+)pt"', svg).group(1))
    assert width == pytest.approx(4.2 * 72)  # at 390 px (~358 px shown) 9 pt is 10.7 CSS px


def test_a_reason_is_said_once_on_the_site_and_in_the_report(store, tmp_path):
    """A stored reason that already starts with "not applicable:" is not prefixed again."""
    from robench.families.purity_ratio.metric import ZOO_MODEL
    from robench.families.purity_ratio.report import report_lines as report
    from robench.present.formatting import why_not

    assert why_not({"not_applicable": "not applicable: tabular"}) == "not applicable: tabular"
    assert why_not({"not_applicable": "tabular"}) == "not applicable: tabular"
    assert why_not({"error": "ValueError: x"}) == "ValueError: x" and why_not(None) == ""
    run_id = store.start_run(command="robench run", seed=0, config={}, plugin_versions={})
    reason = "not applicable: no corruption or attack ground truth (tabular data set)"
    save_scores(store, [
        Score("digits", "mlp", "", "purity-ratio", "purity-ratio", 0.6),
        Score("digits", "svm", "", "purity-ratio", "purity-ratio", None,
              details={"error": "RuntimeError: no features"}),
        Score("digits", ZOO_MODEL, "", "purity-ratio", "validation", None,
              details={"not_applicable": reason})], run_id, {"purity-ratio": ("2", "p")})
    build_site(store, tmp_path)
    html = read(tmp_path, "datasets/digits.html")
    assert "Validation: not applicable: no corruption or attack ground truth" in html
    assert "not applicable: not applicable" not in html
    assert "<td>RuntimeError: no features</td>" in html  # an error is not "not applicable"
    lines = "\n".join(report(store.scores()))
    assert "validation: not applicable: no corruption" in lines
    assert "not applicable: not applicable" not in lines and "svm" in lines
def test_the_overview_legend_comes_from_the_sections_whose_headlines_it_shows(filled, tmp_path):
    from robench.families.coverage.leaderboard import LEGEND as COVERAGE
    from robench.families.purity_ratio.leaderboard import LEGEND as PURITY
    from robench.families.source_aware.leaderboard import LEGEND as RHO

    from markupsafe import escape

    html = read(tmp_path, build_site(filled, tmp_path).name)
    legend = section(html, '<p class="legend">', "</p>")
    assert str(escape(RHO)) in legend  # the fixture stores rho headlines only
    assert str(escape(PURITY)) not in legend and str(escape(COVERAGE)) not in legend
