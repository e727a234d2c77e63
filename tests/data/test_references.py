"""Data sets by reference (npz:, npy:, csv:, imagefolder:) and their refusals (issue 21)."""

import json
import re
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli
from robench.data import DatasetError

FAST = ["--executor", "local", "--set", "train.max_epochs=1"]


@pytest.fixture(autouse=True)
def fresh_registry():
    """Every CLI call builds its registry afresh (resolution is cached per registry)."""
    from robench.plugins import set_registry

    set_registry(None)
    yield
    set_registry(None)


def invoke(*args):
    from robench.plugins import set_registry

    set_registry(None)
    return CliRunner().invoke(cli, [str(a) for a in args])


def source_arrays(seed=0, n_classes=3, n_sources=2, per_source=20, dim=5):
    """Return X, y, groups: class means plus a shift per true source."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_classes * n_sources), per_source)
    y = groups // n_sources
    X = rng.normal(0, 1, (groups.size, dim)) + 3.0 * y[:, None] + 1.0 * groups[:, None]
    return X, y, groups


def write_npz(path, seed=0, **override):
    X, y, groups = source_arrays(seed)
    arrays = {"X": X, "y": y, "groups": groups}
    arrays.update(override)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def rows(db, sql):
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # no schema yet
        return []
    finally:
        conn.close()


def test_npz_end_to_end_with_true_sources_and_the_oracle(tmp_path):
    npz = write_npz(tmp_path / "x.npz")
    db = tmp_path / "r.db"
    res = invoke("run", "-d", f"npz:{npz}", "-m", "mlp", "-c", "oracle", "-r", 2,
                 "--metric", "rho", *FAST, "--db", db)
    assert res.exit_code == 0, res.output
    trials = rows(db, "SELECT dataset, status, versions FROM trials")
    assert len(trials) == 6 and {t[1] for t in trials} == {"ok"}
    name, = {t[0] for t in trials}  # its stable name: base name and content fingerprint
    assert re.fullmatch(r"npz:x-[0-9a-f]{8}", name) and str(tmp_path) not in name
    content = {json.loads(t[2])["dataset_content"] for t in trials}
    assert len(content) == 1 and len(content.pop()) == 20
    scores = rows(db, "SELECT clusterer, score FROM scores WHERE metric='rho'")
    assert ("oracle", "rho") in scores


def test_a_replaced_npz_retrains_and_an_unchanged_one_is_neither_parsed_nor_hashed(
        tmp_path, monkeypatch):
    import robench.builtin.references as refs
    import robench.data.dataset as data

    npz = write_npz(tmp_path / "x.npz", seed=0)
    db = tmp_path / "r.db"
    args = ("run", "-d", f"npz:{npz}", "-m", "centroid-free", "--db", db)
    args = ("run", "-d", f"npz:{npz}", "-m", "svm", "-c", "oracle", "-r", 1,
            "--metric", "rho", *FAST, "--db", db)
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert "0 already stored, 3 run" in first.output

    parsed, hashed = [], []
    read_npz, fingerprint = refs._read_npz, data.Dataset.fingerprint
    monkeypatch.setattr(refs, "_read_npz", lambda *a: parsed.append(a) or read_npz(*a))

    def counting(self):
        if self._fingerprint is None:
            hashed.append(self.name)
        return fingerprint(self)

    monkeypatch.setattr(data.Dataset, "fingerprint", counting)
    again = invoke(*args)
    assert again.exit_code == 0, again.output
    assert "3 already stored, 0 run" in again.output
    assert parsed == [] and hashed == []  # found by size and mtime in the cache

    write_npz(npz, seed=1)  # other content at the same path
    replaced = invoke(*args)
    assert replaced.exit_code == 0, replaced.output
    assert "0 already stored, 3 run" in replaced.output
    assert len(parsed) == 1
    keys = rows(db, "SELECT DISTINCT json_extract(versions, '$.dataset_content') FROM trials")
    assert len(keys) == 2


def test_relative_and_absolute_references_are_one_data_set(tmp_path, monkeypatch):
    write_npz(tmp_path / "x.npz")
    monkeypatch.chdir(tmp_path)
    from robench.plugins import make_registry

    reg = make_registry(load_entrypoints=False)
    a = reg.get("datasets", "npz:x.npz")
    b = reg.get("datasets", f"npz:{tmp_path}/./x.npz")
    assert a.name == b.name == f"npz:x-{a.fingerprint()[:8]}"
    assert a.has_sources and not a.is_image
    assert reg.load_dataset(a.name).fingerprint() == a.fingerprint()


def test_npy_folder_and_uint8_images_with_channels_last(tmp_path):
    from robench.plugins import make_registry

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (12, 6, 5, 3), dtype=np.uint8)  # (n, H, W, C)
    y = np.repeat([0, 1, 2], 4)
    (tmp_path / "arr").mkdir()
    np.save(tmp_path / "arr" / "X.npy", X)
    np.save(tmp_path / "arr" / "y.npy", y)
    reg = make_registry(load_entrypoints=False)
    spec = reg.get("datasets", f"npy:{tmp_path / 'arr'}")
    assert spec.is_image and spec.image_shape == (3, 6, 5) and not spec.has_sources
    ds = reg.load_dataset(spec.name)
    np.testing.assert_array_equal(ds.X.reshape(12, 3, 6, 5),
                                  X.transpose(0, 3, 1, 2).astype(np.float32) / 255)


def test_npz_labels_are_mapped_to_0_to_c_minus_1_and_named(tmp_path):
    from robench.plugins import make_registry

    X, y, _ = source_arrays()
    write_npz(tmp_path / "x.npz", y=y * 10 + 3, groups=None)
    reg = make_registry(load_entrypoints=False)
    ds = reg.load_dataset(reg.get("datasets", f"npz:{tmp_path / 'x.npz'}").name)
    assert ds.class_names == ["3", "13", "23"]
    np.testing.assert_array_equal(ds.y, y)


def ds_fingerprint(reference: str) -> str:
    """Return the first 8 hex digits of the content fingerprint of the data ``reference``
    names (what its stable name ends with)."""
    from robench.plugins import make_registry

    return make_registry(load_entrypoints=False).get("datasets", reference).fingerprint()[:8]


def write_csv(path, seed=0):
    import pandas as pd

    X, y, _ = source_arrays(seed)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["label"] = np.array(["cat", "dog", "emu"])[y]
    frame.to_csv(path, index=False)
    return path


def test_csv_end_to_end_with_svm(tmp_path):
    csv = write_csv(tmp_path / "t.csv")
    db = tmp_path / "r.db"
    res = invoke("run", "-d", f"csv:{csv}?target=label", "-m", "svm", "-c", "kmeans", "-k", 2,
                 "-r", 2, "--metric", "rho", *FAST, "--db", db)
    assert res.exit_code == 0, res.output
    trials = rows(db, "SELECT dataset, status FROM trials")
    assert len(trials) == 6 and {t[1] for t in trials} == {"ok"}
    assert {t[0] for t in trials} == {f"csv:t-{ds_fingerprint(f'csv:{csv}?target=label')}"}


def write_images(root, n_per_class=12, size=(10, 9), classes=("bar", "dot", "ring"), rgb=False):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            a = (rng.random(size) * 60).astype(np.uint8)
            a[2 * c:2 * c + 3, :] = 250
            img = Image.fromarray(a)
            (img.convert("RGB") if rgb else img).save(root / name / f"{i}.png")
    return root


def test_imagefolder_end_to_end_with_cnn_2(tmp_path):
    root = write_images(tmp_path / "imgs")
    db = tmp_path / "r.db"
    res = invoke("run", "-d", f"imagefolder:{root}?size=8&mode=gray", "-m", "cnn-2", "-c",
                 "kmeans", "-k", 2, "-r", 1, "--metric", "rho", *FAST, "--db", db)
    assert res.exit_code == 0, res.output
    trials = rows(db, "SELECT dataset, status FROM trials")
    assert len(trials) == 3 and {t[1] for t in trials} == {"ok"}
    grey = ds_fingerprint(f"imagefolder:{root}?size=8&mode=gray")
    assert trials[0][0] == f"imagefolder:imgs-{grey}"


def test_imagefolder_reads_classes_sorted_sizes_and_modes(tmp_path):
    from robench.plugins import make_registry

    root = write_images(tmp_path / "imgs", n_per_class=2, size=(6, 4), rgb=True)
    reg = make_registry(load_entrypoints=False)
    spec = reg.get("datasets", f"imagefolder:{root}")
    assert spec.image_shape == (3, 6, 4)  # RGB files, their own size
    ds = reg.load_dataset(spec.name)
    assert ds.class_names == ["bar", "dot", "ring"] and ds.y.tolist() == [0, 0, 1, 1, 2, 2]
    grey = reg.get("datasets", f"imagefolder:{root}?mode=gray&size=3x2")
    assert grey.image_shape == (1, 3, 2)


def _bad_cases(tmp_path):
    X, y, g = source_arrays()
    cases = {}
    cases["1-D X"] = f"npz:{write_npz(tmp_path / 'a.npz', X=X[:, 0])}"
    cases["y length"] = f"npz:{write_npz(tmp_path / 'b.npz', y=y[:-1])}"
    cases["5 channels"] = f"npz:{write_npz(tmp_path / 'c.npz', X=np.zeros((y.size, 5, 4, 6)))}"
    cases["float y"] = f"npz:{write_npz(tmp_path / 'd.npz', y=y.astype(float))}"
    nan = X.copy()
    nan[7, 2] = np.nan
    cases["NaN"] = f"npz:{write_npz(tmp_path / 'e.npz', X=nan)}"
    inf = X.copy()
    inf[3, 1] = np.inf
    cases["inf"] = f"npz:{write_npz(tmp_path / 'f.npz', X=inf)}"
    cases["no y"] = f"npz:{write_npz(tmp_path / 'g.npz', y=None)}"
    cases["missing"] = f"npz:{tmp_path / 'nowhere.npz'}"
    (tmp_path / "h.npz").write_text("not a zip")
    cases["not npz"] = f"npz:{tmp_path / 'h.npz'}"
    root = write_images(tmp_path / "imgs", n_per_class=3)
    (root / "dot" / "broken.png").write_bytes(b"\x89PNG garbage")
    cases["unreadable image"] = f"imagefolder:{root}"
    csv = write_csv(tmp_path / "t.csv")
    text = csv.read_text().splitlines()
    text[1] = "a," + text[1].split(",", 1)[1]
    (tmp_path / "u.csv").write_text("\n".join(text))
    cases["text feature"] = f"csv:{tmp_path / 'u.csv'}?target=label"
    cases["no target option"] = f"csv:{csv}"
    cases["misspelt target"] = f"csv:{csv}?target=lable"
    cases["unknown option"] = f"npz:{tmp_path / 'b.npz'}?colour=red"
    cases["unknown scheme"] = "parquet:x.parquet"
    return cases


EXPECTED = {
    "1-D X": "X must have one row per sample", "y length": "samples and y has",
    "5 channels": "with 1, 3 or 4 channels", "float y": "y must hold integer class labels",
    "NaN": "NaN or infinite value(s) in 1 row(s), the first in row 7",
    "inf": "the first in row 3", "no y": "no array y", "missing": "data file not found",
    "not npz": "cannot read", "unreadable image": "broken.png",
    "text feature": "column(s) f0 are not numeric", "no target option": "target=COLUMN",
    "misspelt target": "no target column 'lable'. Did you mean 'label'? Columns: f0,",
    "unknown option": "unknown option(s) colour", "unknown scheme": "Known schemes: csv:",
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_files_exit_2_with_one_line_and_store_nothing(tmp_path, case):
    ref = _bad_cases(tmp_path)[case]
    db = tmp_path / "r.db"
    res = invoke("run", "-d", ref, "-m", "svm", "--metric", "rho", *FAST, "--db", db)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert EXPECTED[case] in lines[0], lines[0]
    assert "Traceback" not in res.output
    assert rows(db, "SELECT count(*) FROM trials") in ([], [(0,)])
    assert rows(db, "SELECT count(*) FROM runs") in ([], [(0,)])


def test_a_class_too_small_for_k_exits_2_before_anything_is_stored(tmp_path):
    npz = write_npz(tmp_path / "x.npz")  # 40 samples per class
    db = tmp_path / "r.db"
    res = invoke("run", "-d", f"npz:{npz}", "-m", "svm", "-c", "kmeans", "-k", 21,
                 "--metric", "rho", *FAST, "--db", db)
    assert res.exit_code == 2, res.output
    assert "k=21" in res.output and "at most 20" in res.output
    assert rows(db, "SELECT count(*) FROM trials") in ([], [(0,)])
    assert rows(db, "SELECT count(*) FROM runs") in ([], [(0,)])
    # the oracle reads the file's true sources: -k does not apply to it
    ok = invoke("run", "-d", f"npz:{npz}", "-m", "svm", "-c", "oracle", "-k", 21, "-r", 1,
                "--metric", "rho", *FAST, "--db", db)
    assert ok.exit_code == 0, ok.output


def test_list_datasets_shows_the_reference_syntax():
    res = invoke("list", "datasets")
    assert res.exit_code == 0
    for syntax in ("npz:PATH", "npy:FOLDER", "csv:PATH?target=COLUMN",
                   "imagefolder:ROOT[?size=N|HxW][&mode=gray|rgb]"):
        assert syntax in res.output


def test_register_dataset_resolvers_adds_a_scheme(tmp_path):
    from robench.plugins import make_registry

    reg = make_registry(modules=["tests.plugins.blob_scheme"], load_entrypoints=False)
    spec = reg.get("datasets", "blobs:7?n=30")
    assert spec.name == "blobs:7?n=30" and spec.plugin == "tests.plugins.blob_scheme"
    ds = reg.load_dataset(spec.name)
    assert ds.n_samples == 30
    assert reg.dataset_versions(spec.name)["dataset_content"] == ds.fingerprint()
    with pytest.raises(DatasetError, match="unknown option"):
        reg.get("datasets", "blobs:7?m=3")


def test_a_registered_data_set_name_cannot_look_like_a_reference():
    from robench import hookimpl
    from robench.plugins import Registry, make_plugin_manager
    from robench.specs import DatasetSpec

    class Bad:
        @hookimpl
        def register_datasets(self, register):
            register(DatasetSpec("npz:x", lambda: None, "no"))

    pm, infos = make_plugin_manager(load_entrypoints=False, builtins=False)
    pm.register(Bad(), name="bad")
    reg = Registry(pm, infos)  # only this plugin is disabled (issue 30)
    assert reg.infos["bad"].status == "failed"
    assert "references come from dataset resolvers" in reg.infos["bad"].error


def test_a_file_data_set_is_named_by_its_base_name_and_content_never_its_path(tmp_path,
                                                                             monkeypatch):
    """Issue 51: a data set given by file was stored, shown and published under its absolute
    path (a home directory on a shared board), and two people with one file had two data sets.
    Now: the base name and a short content fingerprint, or the name= given; the name alone
    resolves again on this machine (a worker, verify), and is refused once the file there
    holds other data."""
    from robench.plugins import make_registry

    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ana").mkdir()
    (tmp_path / "bo").mkdir()
    write_npz(tmp_path / "ana" / "x.npz")
    write_npz(tmp_path / "bo" / "x.npz")
    reg = make_registry(load_entrypoints=False)
    ana = reg.get("datasets", f"npz:{tmp_path / 'ana' / 'x.npz'}")
    bo = reg.get("datasets", f"npz:{tmp_path / 'bo' / 'x.npz'}")
    assert ana.name == bo.name == f"npz:x-{ana.fingerprint()[:8]}"  # one data set
    assert reg.get("datasets", f"npz:{tmp_path / 'ana' / 'x.npz'}?name=digits-ana").name == \
        "npz:digits-ana"
    # a fresh registry (a worker, robench verify) finds the data by its name alone
    fresh = make_registry(load_entrypoints=False)
    assert fresh.load_dataset(ana.name).name == ana.name
    assert fresh.load_dataset("npz:digits-ana").fingerprint() == ana.fingerprint()
    # a worker on another machine (another cache): the registry's recipe says where it was read
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert make_registry(**reg.recipe).load_dataset(ana.name).fingerprint() == ana.fingerprint()
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "third"))
    with pytest.raises(DatasetError):  # the control: neither recipe nor cache knows the name
        make_registry(load_entrypoints=False).get("datasets", ana.name)
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    # other content: another name; the old name, read from there, is refused in one line
    write_npz(tmp_path / "bo" / "x.npz", seed=1)
    other = make_registry(load_entrypoints=False).get("datasets",
                                                      f"npz:{tmp_path / 'bo' / 'x.npz'}")
    assert other.name != ana.name and other.name.startswith("npz:x-")
    with pytest.raises(DatasetError, match="now holds other data"):
        make_registry(load_entrypoints=False).get("datasets", ana.name)
    with pytest.raises(DatasetError, match="must be 1-80 letters"):
        reg.get("datasets", f"npz:{tmp_path / 'ana' / 'x.npz'}?name=../up")
