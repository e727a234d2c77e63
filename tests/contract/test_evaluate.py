"""robench.evaluate: a scikit-learn estimator, an nn.Module factory or a registered name on
arrays or a data reference, through the same planner, executor and store (same keys,
resumable), returning the scores as rows."""

import numpy as np
import pytest
from click.testing import CliRunner

import robench
from tests.plugins.tiny import make_tiny


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def test_logistic_regression_on_arrays_returns_rho_rows_and_a_second_call_trains_nothing(
        digits, tmp_path):
    from sklearn.linear_model import LogisticRegression

    db = tmp_path / "r.db"
    rows = robench.evaluate(LogisticRegression(max_iter=200), digits, metrics=["rho"],
                            clusterers=["kmeans"], db=db, as_frame=False)
    assert isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)
    by_score = {r["score"]: r for r in rows if r["metric"] == "rho"}
    rho = by_score["rho"]
    # readable default names: the parameters that differ from the defaults; the data's shape
    # and content fingerprint
    assert rho["model"] == "sklearn:LogisticRegression(max_iter=200)"
    assert rho["dataset"].startswith("arrays:1797x64-") and rho["clusterer"] == "kmeans"
    assert len(rho["dataset"].rsplit("-", 1)[1]) == 12
    # rho is E[AccX] / E[AccI] of the stored repeats
    assert rho["value"] == pytest.approx(by_score["acc_exclusive"]["value"]
                                         / by_score["acc_inclusive"]["value"])
    assert 0.5 < rho["value"] < 1.2
    assert rows.run["ran"] == rows.run["planned"] == 9 and rows.run["failed"] == 0

    again = robench.evaluate(LogisticRegression(max_iter=200), digits, metrics=["rho"],
                             clusterers=["kmeans"], db=db, as_frame=False)
    assert again.run["ran"] == 0 and again.run["stored"] == 9  # trains nothing
    assert {(r["score"], r["value"]) for r in again} == {(r["score"], r["value"]) for r in rows}

    # other parameters are another model: a new name, new keys, trained afresh
    other = robench.evaluate(LogisticRegression(max_iter=200, C=0.1), digits, metrics=["rho"],
                             clusterers=["kmeans"], db=db, as_frame=False, repeats=1)
    assert other[0]["model"] == "sklearn:LogisticRegression(C=0.1, max_iter=200)"
    assert other.run["ran"] == 3


def test_default_names_show_changed_parameters_and_stay_unique():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    from robench.api import NAME_MAX, sklearn_model_name

    assert sklearn_model_name(LogisticRegression()) == "sklearn:LogisticRegression"
    assert sklearn_model_name(LogisticRegression(solver="saga", C=0.5)) == \
        "sklearn:LogisticRegression(C=0.5, solver='saga')"
    # a value that cannot be written exactly (an array) adds a digest of every parameter
    weighted = [sklearn_model_name(LogisticRegression(class_weight={0: w, 1: 1.0}))
                for w in (1.0, 2.0)]
    assert weighted[0] != weighted[1] and all(n.startswith("sklearn:LogisticRegression(")
                                              and n[-9] == "-" for n in weighted)
    # long: cut, with the digest; no default constructor: class and digest
    long = sklearn_model_name(SVC(C=2, gamma=0.01, kernel="poly", degree=5, coef0=1.5,
                                  tol=1e-5, class_weight="balanced", max_iter=10000))
    assert len(long) <= NAME_MAX and long.startswith("sklearn:SVC(C=2, ") and long[-9] == "-"
    piped = sklearn_model_name(make_pipeline(StandardScaler(), SVC(C=2)))
    assert piped.startswith("sklearn:Pipeline-") and len(piped) == len("sklearn:Pipeline-") + 8


def test_a_default_estimator_is_named_by_its_class_and_returns_a_data_frame(digits, tmp_path):
    pd = pytest.importorskip("pandas")
    from sklearn.naive_bayes import GaussianNB

    frame = robench.evaluate(GaussianNB(), digits, metrics="rho", clusterers="kmeans",
                             repeats=1, db=tmp_path / "r.db")
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns)[:5] == ["dataset", "model", "clusterer", "metric", "score"]
    assert set(frame["model"]) == {"sklearn:GaussianNB"}
    assert frame.attrs["run"]["ran"] == 3


def test_evaluate_uses_the_same_keys_as_robench_run(tiny_registry, tmp_path):
    """A registered model on a registered data set: the CLI then finds every trial stored."""
    from robench.cli import cli

    db = tmp_path / "r.db"
    rows = robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"],
                            repeats=2, k=3, db=db, registry=tiny_registry, as_frame=False)
    assert rows.run["ran"] == 6
    res = CliRunner().invoke(cli, ["run", "-d", "tiny", "-m", "centroid", "-c", "kmeans",
                                   "--metric", "rho", "-r", "2", "-k", "3", "--executor",
                                   "local", "--device", "cpu", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "6 already stored" in res.output and ", 0 run," in res.output


def test_groups_are_true_sources_for_the_oracle_clusterer(tmp_path):
    from sklearn.neighbors import KNeighborsClassifier

    ds = make_tiny()
    rows = robench.evaluate(KNeighborsClassifier(3), (ds.X, ds.y, ds.sources),
                            metrics=["rho"], clusterers=["oracle"], repeats=1, k=3,
                            db=tmp_path / "r.db", as_frame=False)
    assert {r["clusterer"] for r in rows} == {"oracle"}
    assert not rows.run["skipped"]


class SmallNet:
    """A factory taking the trial's context (a plain class, so its source has a digest)."""

    def __new__(cls, ctx):
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(ctx.n_features, 16), nn.ReLU())
                self.head = nn.Linear(16, ctx.n_classes)

            def features(self, x):
                return self.body(x)

            def forward(self, x):
                return self.head(self.features(x))

        torch.manual_seed(0)
        return Net()


def test_a_torch_module_factory_trains_per_trial_and_resumes(tmp_path):
    ds = make_tiny(n_per_source=15)
    kw = dict(metrics=["rho"], clusterers=["kmeans"], repeats=1, k=3, db=tmp_path / "r.db",
              as_frame=False, device="cpu", settings={"train": {"max_epochs": 2}})
    rows = robench.evaluate(SmallNet, (ds.X, ds.y), **kw)
    assert {r["model"] for r in rows} == {"torch:SmallNet"} and rows.run["ran"] == 3
    assert robench.evaluate(SmallNet, (ds.X, ds.y), **kw).run["ran"] == 0


def test_image_arrays_become_an_image_data_set(tmp_path):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    images = (X[:400].reshape(-1, 8, 8) * 15).astype(np.uint8)  # uint8 0..240
    rows = robench.evaluate("cnn-1", (images, y[:400]), metrics=["rho"], clusterers=["kmeans"],
                            repeats=1, k=2, db=tmp_path / "r.db", as_frame=False,
                            settings={"train": {"max_epochs": 1}}, data_name="digits-uint8")
    assert {r["dataset"] for r in rows} == {"digits-uint8"} and rows.run["ran"] == 3


def test_refusals_are_clear(digits, tmp_path):
    import torch
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(TypeError, match="not a module instance"):
        robench.evaluate(torch.nn.Linear(64, 10), digits, db=tmp_path / "r.db")
    with pytest.raises(ValueError, match="use executor='local'"):
        robench.evaluate(LogisticRegression(), digits, executor="process", db=tmp_path / "r.db")
    with pytest.raises(ValueError, match="unknown train knob 'epochs'"):
        robench.evaluate(LogisticRegression(), digits, settings={"train": {"epochs": 2}},
                         db=tmp_path / "r.db")
    with pytest.raises(ValueError, match="tuple \\(X, y\\)"):
        robench.evaluate(LogisticRegression(), digits[0], db=tmp_path / "r.db")
    with pytest.raises(TypeError, match="scikit-learn estimator or an nn.Module factory"):
        robench.evaluate(42, digits, db=tmp_path / "r.db")
    from robench.plugins import UnknownComponentError

    with pytest.raises(UnknownComponentError, match="unknown metric"):
        robench.evaluate(LogisticRegression(), digits, metrics=["rhoo"], db=tmp_path / "r.db")


def test_evaluate_races_with_until_or_a_budget_as_robench_run_does(tiny_registry, tmp_path):
    """until="decided" races the paired metrics' tables (robench.run.execution.execute, the
    command's own entry); a budget (a duration, as --budget) races too."""
    db = tmp_path / "r.db"
    raced = robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"], k=3,
                             repeats=12, until="decided", precision=0.5, db=db,
                             registry=tiny_registry, as_frame=False, progress=False)
    (table,) = raced.run["adaptive"]
    assert table["metric"] == "rho" and table["looks_taken"] == [6]  # decided at once
    rho = next(r for r in raced if r["score"] == "rho")
    assert rho["details"]["design"] == "adaptive" and rho["n"] == 6
    budgeted = robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"],
                                k=3, repeats=12, budget="1h", precision=0.5, db=db,
                                registry=tiny_registry, as_frame=False, progress=False)
    assert budgeted.run["adaptive"] and budgeted.run["ran"] == 0  # the same look, stored
    plain = robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"], k=3,
                             repeats=2, db=db, registry=tiny_registry, as_frame=False,
                             progress=False)
    assert plain.run["adaptive"] == [] and plain.run["ran"] == 0
    with pytest.raises(ValueError, match="--budget"):
        robench.evaluate("centroid", "tiny", metrics=["rho"], budget="soon", db=db,
                         registry=tiny_registry)
    with pytest.raises(ValueError, match="--precision goes with --until decided"):
        robench.evaluate("centroid", "tiny", metrics=["rho"], precision=0.1, db=db,
                         registry=tiny_registry)


def test_evaluate_prints_its_progress_on_stderr_unless_asked_not_to(tiny_registry, tmp_path,
                                                                     capsys):
    robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"], k=3,
                     repeats=1, db=tmp_path / "r.db", registry=tiny_registry, as_frame=False)
    out, err = capsys.readouterr()
    assert out == ""
    assert "3 trials planned: 0 already stored, 3 to run" in err
    assert "[1/3] tiny/centroid/kmeans inclusive #0 ok" in err and "[3/3] tiny/centroid " in err
    robench.evaluate("centroid", "tiny", metrics=["rho"], clusterers=["kmeans"], k=3,
                     repeats=1, db=tmp_path / "r.db", registry=tiny_registry, as_frame=False,
                     progress=False)
    assert capsys.readouterr() == ("", "")
