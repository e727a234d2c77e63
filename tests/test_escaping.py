"""robench.escaping: one function per output language, each tested on what that language's
reader does with the result (an XML parser, a CSV reader, a strict JSON reader, CommonMark's
code-span rules)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from robench.escaping import (BIDI, FORMULA_PREFIXES, MARKDOWN_NAME, MARKDOWN_PROSE, SHORT,
                              csv_cell, finite, json_text, markdown_cell, markdown_code,
                              markdown_text, shorten, terminal, xml_attr, xml_text)

#: Text XML 1.0 can hold (what round-trips exactly).
_XML_OK = st.text(st.characters(blacklist_categories=("Cs",),
                                blacklist_characters="\ufffe\uffff").filter(
    lambda c: c in "\t\n\r" or ord(c) >= 0x20))
_ANY = st.text(st.characters())
_SPAN_BREAKERS = "\n\r\x0b\x0c\x85\u2028\u2029"


def _controls(text: str) -> list:
    return [c for c in text if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or ord(c) in BIDI
            or 0xd800 <= ord(c) < 0xe000]


@given(_ANY)
def test_terminal_output_holds_no_control_or_bidi_character(text):
    assert _controls(terminal(text)) == []
    assert "\n" not in terminal(text)
    assert [c for c in _controls(terminal(text, lines=True)) if c not in "\t\n"] == []


def test_terminal_writes_controls_out_visibly():
    assert terminal("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert terminal("a\x1b[31mred\nb") == "a\\x1b[31mred\\nb"
    assert terminal("a\nb", lines=True) == "a\nb"


@given(_XML_OK, _XML_OK)
def test_xml_attribute_and_text_round_trip_through_a_parser(attr, text):
    doc = f'<svg a="{xml_attr(attr)}" b=\'{xml_attr(attr)}\'><t>{xml_text(text)}</t></svg>'
    root = ET.fromstring(doc)
    assert set(root.attrib) == {"a", "b"}
    assert root.attrib["a"] == root.attrib["b"] == attr
    assert (root.find("t").text or "") == text


@given(_ANY)
def test_any_text_gives_well_formed_xml(text):
    root = ET.fromstring(f'<svg a="{xml_attr(text)}">{xml_text(text)}</svg>')
    assert list(root.attrib) == ["a"] and len(root) == 0


def test_xml_attr_escapes_both_quotes_the_badge_case():
    hostile = 'x" onload="alert(1)'
    assert '"' not in xml_attr(hostile) and "'" not in xml_attr("it's")
    root = ET.fromstring(f'<svg aria-label="{xml_attr(hostile)}"/>')
    assert list(root.attrib) == ["aria-label"]


def _span_parts(span: str):
    fence = re.match("`+", span).group()
    assert span.endswith(fence) and len(span) > 2 * len(fence)
    return fence, span[len(fence):-len(fence)]


@given(_ANY.filter(bool))
def test_markdown_code_is_one_code_span_on_one_line(text):
    span = markdown_code(text)
    fence, inner = _span_parts(span)
    # CommonMark: a code span ends at the first backtick run of the fence's length, so no run
    # of exactly that length may occur inside; one line, so no block (heading, HTML) can start
    assert len(fence) not in {len(m) for m in re.findall("`+", inner)}
    assert not any(c in inner for c in _SPAN_BREAKERS)
    # the span shows the name (stripped of the one padding space CommonMark removes)
    shown = inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() \
        else inner
    assert shown == terminal(shorten(text, MARKDOWN_NAME))


def test_long_names_are_shortened_in_every_markdown_sink_and_stay_apart():
    """Issue 51: a 10,000-character name printed whole into a job summary."""
    long, other = "n" * 10_000, "n" * 9_999 + "m"
    for escape, limit in ((markdown_code, MARKDOWN_NAME), (markdown_cell, MARKDOWN_NAME),
                          (markdown_text, MARKDOWN_PROSE)):
        out = escape(long)
        assert long not in out and "n" * 50 in out and len(out) < limit + 20
        assert escape(long) != escape(other)  # cut alike, told apart by the digest
    assert shorten("short") == "short" and len(shorten(long)) == SHORT
    assert shorten(long, 40).startswith("n" * 30) and "\u2026#" in shorten(long, 40)


def test_markdown_code_on_the_reported_names():
    assert markdown_code("alice<!--.db") == "`alice<!--.db`"
    assert markdown_code("a``b") == "```a``b```"
    assert markdown_code("`x") == "`` `x ``"
    assert markdown_code("x.db\n### validate: passed") == "`x.db\\n### validate: passed`"
    assert markdown_code("") == ""
    assert markdown_cell("a|b") == "`a\\|b`"


@given(_ANY)
def test_markdown_text_has_no_active_markdown(text):
    out = markdown_text(text)
    assert not any(c in out for c in _SPAN_BREAKERS)
    unescaped = re.sub(r"\\.", "", out)  # what is left after every backslash escape
    assert not set(unescaped) & set("`*_[]<>!#|&~")
    assert not re.match(r"[-+=]|\d+[.)]", out)  # no list or heading underline at the start
    assert re.search(r"@\w", out) is None  # a mention needs a word character after the @


@given(_ANY)
def test_csv_cells_never_start_a_formula_and_read_back(text):
    cell = csv_cell(text)
    assert not cell.startswith(FORMULA_PREFIXES)
    buf = io.StringIO()
    csv.writer(buf).writerow([cell, 1.5, None])
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == [cell, "1.5", ""]


def test_csv_cell_cases():
    assert csv_cell("=1+2") == "'=1+2"
    assert csv_cell("@SUM(A1:A9)") == "'@SUM(A1:A9)"
    assert csv_cell("\t=1") == "'\t=1"
    assert csv_cell("-x") == "'-x"
    assert csv_cell("svm") == "svm"
    assert csv_cell(-0.5) == -0.5 and csv_cell(None) is None


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | _ANY,
                    lambda inner: st.lists(inner) | st.dictionaries(_ANY, inner),
                    max_leaves=20))
@settings(max_examples=200)
def test_json_text_is_strict_json(value):
    text = json_text(value)

    def refuse(name):
        raise ValueError(name)

    parsed = json.loads(text, parse_constant=refuse)
    assert parsed == json.loads(json.dumps(finite(value)))


def test_json_text_maps_non_finite_to_null():
    assert json_text({"a": math.inf, "b": [math.nan, -math.inf, 1.0]}) == \
        '{"a": null, "b": [null, null, 1.0]}'
