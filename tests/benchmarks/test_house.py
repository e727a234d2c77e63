"""The line kinds of benchmarks/house.py: the split docs/architecture.md's size figures give."""

from __future__ import annotations

from tests.helpers import load_benchmark

line_kinds = load_benchmark("house").line_kinds

SOURCE = '''"""Module summary.

More prose.
"""
import os  # a trailing comment is code


class Thing:
    """One line."""

    # a comment
    def method(self):
        """Two
        lines."""
        text = """not a docstring
        but a string"""
        return text
'''


def test_each_line_is_counted_once_by_its_kind():
    kinds = line_kinds(SOURCE)
    assert kinds == {"docstrings": 7, "code": 6, "comments": 1, "blank": 3}
    assert sum(kinds.values()) == len(SOURCE.splitlines())


def test_a_module_without_docstrings_is_code_and_blank():
    assert line_kinds("x = 1\n\ny = 2\n") == {"code": 2, "blank": 1, "docstrings": 0,
                                               "comments": 0}


def test_blanking_docstrings_keeps_every_line_and_its_number():
    blank_docstrings = load_benchmark("house").blank_docstrings
    out = blank_docstrings(SOURCE)
    assert len(out.splitlines()) == len(SOURCE.splitlines())
    assert '"""' not in out.splitlines()[0] and "Two" not in out and "lines." not in out
    assert 'text = """not a docstring' in out and "# a comment" in out
    assert line_kinds(out)["docstrings"] == 0 and line_kinds(out)["code"] == 6
