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
