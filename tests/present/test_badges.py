"""SVG badges per model and headline metric, written by the site, made locally."""

import xml.etree.ElementTree as ET

from click.testing import CliRunner

from robench.present.badges import COLOURS, badge_svg, colour, headline_badge
from robench.cli import cli


def test_a_badge_is_valid_svg_with_its_text_escaped_and_the_same_bytes_each_time():
    svg = badge_svg("robench <rho>", "#1 of 3 · 0.912 & more", "#123456")
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts == ["robench <rho>", "#1 of 3 · 0.912 & more"]
    assert badge_svg("a", "b", "#000") == badge_svg("a", "b", "#000")
    assert int(root.get("width")) == 2 * 12 + 7 * (len("robench <rho>") + len(texts[1]))


def test_rank_score_and_interval_are_on_the_badge():
    row = {"rank": 2, "rank_interval": "2", "rank_best": 2, "rank_worst": 2, "value": 0.8123,
           "ci_low": 0.75, "ci_high": 0.86}
    svg = headline_badge("robench rho · digits", row, 40)
    assert "rank 2 of 40 · 0.812 [0.750, 0.860]" in svg and COLOURS["top"] in svg
    assert "not ranked · —" in headline_badge("rho", {"rank": None, "value": None}, 3)
    assert colour(1, 5) == COLOURS["first"] and colour(5, 5) == COLOURS["ranked"]


def test_a_shared_first_rank_is_no_win_on_the_badge():
    """Three models none of whose pairs is decided each read "rank 1-3 of 3", in the colour
    of a top rank, never the winner's green; a decided first keeps it (the control)."""
    open_ = {"rank": 1, "rank_interval": "1-3", "rank_best": 1, "rank_worst": 3, "value": 0.9,
             "ci_low": 0.8, "ci_high": 1.0}
    svg = headline_badge("robench rho · digits", open_, 3)
    assert "rank 1-3 of 3 · " in svg and COLOURS["first"] not in svg
    alone = headline_badge("robench rho · digits",
                           dict(open_, rank_interval="1", rank_worst=1), 3)
    assert "rank 1 of 3 · " in alone and COLOURS["first"] in alone


def test_a_position_no_test_backs_is_not_shown_as_a_rank():
    """A headline row with a position but no tested rank interval (mCE: one value per model,
    no interval) reads as a position by the estimate, in the colour of no rank: no displayed
    order without its test."""
    svg = headline_badge("robench mCE · digits", {"rank": 1, "value": 0.615}, 5)
    assert "#1 of 5 by estimate, untested · 0.615" in svg
    assert "rank 1" not in svg and COLOURS["first"] not in svg and COLOURS["none"] in svg


def test_the_site_writes_a_badge_per_model_and_headline(helped, tmp_path):
    run = CliRunner().invoke
    assert run(cli, ["run", "-d", "tiny", "-m", "spy", "-m", "centroid", "--metric", "helped",
                     "--executor", "local", "--db", str(helped)]).exit_code == 0
    site = tmp_path / "site"
    assert run(cli, ["leaderboard", "--db", str(helped), "--out", str(site)]).exit_code == 0
    badges = sorted(p.name for p in (site / "badges").iterdir())
    assert badges == ["centroid--tiny--helped.svg", "spy--tiny--helped.svg"]
    svg = (site / "badges" / "spy--tiny--helped.svg").read_text()
    assert "robench helped · tiny" in svg and " of 2" in svg and "%" in svg
    page = (site / "models" / "spy.html").read_text()
    assert "![robench helped on tiny](badges/spy--tiny--helped.svg)" in page
    assert '<img class="badge" src="../badges/spy--tiny--helped.svg"' in page


def test_a_long_name_gives_a_badge_of_bounded_width():
    """Issue 51: a 10,000-character model name made a badge 70,000 px wide."""
    import xml.etree.ElementTree as ET

    from robench.present.badges import BADGE_TEXT, badge_svg

    svg = badge_svg("m" * 10_000 + "<x>", "rho 0.9", "#2e7d32")
    root = ET.fromstring(svg)
    assert int(root.attrib["width"]) < (BADGE_TEXT + 10) * 8 and "m" * 10_000 not in svg
