"""Read what a cell of a results database holds, whoever wrote it.

A database can come from anyone (``robench merge`` takes contributors' files) and SQLite
accepts what Python's readers do not: JSON nested 2,000 deep (``json`` raises RecursionError
past about 1,000), text in a REAL column, ``'NaN'`` or ``'Infinity'`` as text, a BLOB where a
name belongs. Every reader goes through these functions, so a hostile cell becomes a missing
value (None) instead of an exception.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: Deepest JSON a reader decodes; robench writes at most a handful of levels.
MAX_JSON_DEPTH = 64


class TooDeep(ValueError):
    """JSON text nested deeper than :data:`MAX_JSON_DEPTH`."""


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Return how deep lists and dicts nest in ``value`` (iterative; stops past ``limit``)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def loads(text: str, limit: int = MAX_JSON_DEPTH, constants: bool = False) -> Any:
    """Return ``json.loads(text)``; ValueError (TooDeep) if it nests deeper than ``limit``,
    never RecursionError. ``NaN`` and ``Infinity`` read as None, or as floats with ``constants``."""
    # NaN and Infinity are not JSON (robench writes with allow_nan=False): read them as missing
    parse_constant = float if constants else (lambda name: None)
    if text.count("[") + text.count("{") > limit:  # only then can it be too deep
        try:
            value = json.loads(text, parse_constant=parse_constant)
        except RecursionError:
            raise TooDeep(f"JSON nested deeper than {limit} levels") from None
        if json_depth(value, limit) > limit:
            raise TooDeep(f"JSON nested deeper than {limit} levels")
        return value
    return json.loads(text, parse_constant=parse_constant)


def decoded(text: Any, otherwise: Any = None) -> Any:
    """Return the value of a JSON cell (the one JSON reader of robench): the decoded text
    (``NaN``/``Infinity`` inside read as None), ``otherwise`` for text that is not JSON or nests
    too deep and for a BLOB, anything else unchanged."""
    if isinstance(text, bytes):
        return otherwise
    if not isinstance(text, str):
        return text
    try:
        return loads(text)
    except ValueError:
        return otherwise


def number(value: Any) -> Any:
    """Return a REAL cell as a finite number, else None (text, NaN, inf, BLOB, bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def integer(value: Any) -> Any:
    """Return an INTEGER cell as an int, else None (a whole finite float becomes an int)."""
    if isinstance(value, int):  # a bool too
        return int(value)
    if (isinstance(value, float) and math.isfinite(value) and value.is_integer()
            and -2**63 <= value < 2**63):  # an id SQLite can be asked about again
        return int(value)
    return None


def text(value: Any) -> Any:
    """Return a TEXT cell as str (None stays None; a number as written; BLOB bytes decoded)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
