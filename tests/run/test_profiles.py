"""The standard profile: the quick profile with more repeats and epochs."""

from robench.run.config import PROFILES, REPEATS, SOURCES
from robench.specs import Knob
from tests.helpers import run_config


def test_standard_sits_between_quick_and_paper():
    assert list(PROFILES)[:3] == ["quick", "standard", "paper"]
    quick = run_config(datasets=["digits"], models=["mlp"], metrics=["rho"], profile="quick")
    std = run_config(datasets=["digits"], models=["mlp"], metrics=["rho"], profile="standard")
    assert (quick.repeats, std.repeats, REPEATS["paper"]) == (3, 15, 100)
    # whole rotation cycles: the balanced design's test uses complete cycles only
    assert std.repeats % SOURCES["standard"] == 0 and std.repeats // SOURCES["standard"] >= 2
    assert (quick.train["max_epochs"], std.train["max_epochs"]) == (4, 12)
    assert quick.train["patience"] < std.train["patience"]


def test_standard_takes_the_quick_value_where_a_knob_gives_none():
    knob = Knob("zoo", "list", "models", default=[], items="str",
                profiles={"quick": ["mlp", "cnn-1"], "paper": ["mlp"]})
    assert knob.value_for("standard") == ["mlp", "cnn-1"]
    assert Knob("n", "int", "n", default=7).value_for("standard") == 7
    assert Knob("n", "int", "n", default=7, profiles={"standard": 9}).value_for("standard") == 9
    std = run_config(datasets=["digits"], models=["mlp"], metrics=["purity-ratio"],
                     profile="standard")
    quick = run_config(datasets=["digits"], models=["mlp"], metrics=["purity-ratio"])
    assert std.knobs["clusterability"]["zoo"] == quick.knobs["clusterability"]["zoo"] != []
