"""The site's builders: one per page kind over one Site object."""


def test_each_page_kind_has_its_own_builder(tmp_path):
    """build_site = read the site once, then one builder per page kind (docs/architecture.md)."""
    import shutil
    from pathlib import Path

    from robench.plugins import make_registry
    from robench.present import site as site_mod
    from robench.present.leaderboard import reading_stored_ranks
    from robench.storage.store import Store

    db = tmp_path / "docs.db"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "fixtures" / "docs.db", db)
    registry = make_registry(load_entrypoints=False)
    with Store(db, readonly=True) as store, reading_stored_ranks(store):  # as build_site
        site = site_mod.read_site(store, registry, site_mod.DEFAULT_TOP, None)
        metas = site_mod._model_metas(site)
        kinds = {"index": site_mod.index_page(site), "datasets": site_mod.dataset_pages(site),
                 "models": site_mod.model_pages(site, metas),
                 "model list": site_mod.models_page(site, metas),
                 "methods": site_mod.methods_page(site)}
    assert list(kinds["index"]) == ["index.html"]
    assert {p.split("/")[0] for p in kinds["datasets"]} == {"datasets"}
    assert len(kinds["datasets"]) == len(site.datasets) > 0
    assert {p.split("/")[0] for p in kinds["models"]} <= {"models", "legends.html"}
    assert list(kinds["model list"]) == ["models.html"] and list(kinds["methods"]) == [
        "methods.html"]
    with Store(db, readonly=True) as store:
        site_mod.build_site(store, tmp_path / "site", registry=registry)
    for pages in kinds.values():
        for name, text in pages.items():
            assert (tmp_path / "site" / name).read_text(encoding="utf-8") == text
