"""A data reference round-trips (issue 30, point 7): its canonical name parses to the same data
set in every process and executor, whatever the names hold (percent-encoding included)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from robench.data.references import parse_reference, reference_name, remembered
from tests.reliability.cli import rows, run

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=400, deadline=None)
@given(scheme=st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True), target=TEXT,
       options=st.dictionaries(TEXT, TEXT, max_size=4))
def test_a_canonical_name_parses_back_to_what_it_names(scheme, target, options):
    name = reference_name(scheme, target, options)
    assert parse_reference(name) == (scheme, target, options), name
    assert reference_name(*parse_reference(name)) == name  # canonical: a fixed point


def test_the_cases_of_the_issue_round_trip():
    for given_, value in (("a%2Bb", "a+b"), ("a%26b", "a&b"), ("a+b", "a b"), ("a%3Db", "a=b")):
        scheme, target, options = parse_reference(f"csv:/d/t.csv?target={given_}")
        assert options == {"target": value}
        # before: the name was written unencoded and meant another column when parsed again
        assert parse_reference(reference_name(scheme, target, options))[2] == {"target": value}
    assert parse_reference(reference_name("npz", "/a?b%c.npz", {}))[1] == "/a?b%c.npz"


def test_a_column_named_with_query_characters_means_the_same_column_in_a_worker(tmp_path,
                                                                             monkeypatch):
    from tests.plugins.tiny import make_tiny

    ds = make_tiny()
    head = ",".join(f"f{i}" for i in range(ds.X.shape[1]))
    # the two columns label the rows differently: two data sets (two content fingerprints)
    body = "\n".join(",".join(f"{v:.6f}" for v in x) + f",{c},{(c + 1) % 3}"
                     for x, c in zip(ds.X, ds.y))
    (tmp_path / "t.csv").write_text(f"{head},a+b,a&b\n{body}\n")
    db = tmp_path / "r.db"
    for target in ("a%2Bb", "a%26b"):
        done = run(["run", "-d", f"csv:t.csv?target={target}", "-m", "centroid", "-c",
                    "kmeans", "--metric", "rho", "-k", "2", "-r", "1", "--executor", "process",
                    "-j", "1", "--db", str(db)], tmp_path, plugins=["tests.plugins.tiny"])
        # before: "no target column 'a b'" (a%2Bb) and "unknown option(s) b" (a%26b) in the
        # worker, which parsed the unencoded canonical name
        assert done.returncode == 0, done.stderr
    names = sorted(n for (n,) in rows(db, "SELECT DISTINCT dataset FROM trials"))
    # stored under stable names (no path); where each was read from, encoded, in the cache
    assert len(names) == 2 and all(n.startswith("csv:t-") for n in names)
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))  # the runs' cache
    read = [parse_reference(remembered(n))[2] for n in names]
    assert sorted(read, key=str) == [{"target": "a&b"}, {"target": "a+b"}]
    assert rows(db, "SELECT DISTINCT status FROM trials") == [("ok",)]
