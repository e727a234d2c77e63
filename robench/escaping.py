"""One escaping function per output language robench writes text from other people into.

Names, paths, reasons and values come from contributed databases, plugins and file names;
each writer escapes for the language it writes with that language's function here
(``terminal``, ``xml_text``, ``xml_attr``, ``markdown_code``, ``markdown_cell``,
``markdown_text``, ``csv_cell``, ``json_text``; ``shorten`` before any of them), and nothing
else. This module imports nothing of robench (ground room): every room may use it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any


#: Characters of stored text (a name, a file name, a reason) one line of a report shows.
SHORT = 80


def shorten(value: Any, limit: int = SHORT) -> str:
    """Return ``value`` as text of at most ``limit`` characters (cut before escaping).

    Longer text keeps its beginning, an ellipsis and 8 hex digits of the SHA-256 of the whole
    (``averyveryl…#1a2b3c4d``), so two long names that begin alike stay apart.
    """
    text = str(value)
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return text[:max(1, limit - 10)] + "\u2026#" + digest


#: Bidirectional formatting characters: they reorder how a line is shown (Trojan Source).
BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_TERMINAL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_TERMINAL.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})
# line and paragraph separators end a line in some terminals and editors; surrogates cannot be
# encoded (printing one raises UnicodeEncodeError)
_TERMINAL.update({c: f"\\u{c:04x}" for c in (*BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000))})
_TERMINAL_LINES = {c: v for c, v in _TERMINAL.items() if c not in (0x09, 0x0A)}


def terminal(value: Any, lines: bool = False) -> str:
    """Return ``value`` as text that cannot drive a terminal (one line; ``lines``: LF, tab kept)."""
    return str(value).translate(_TERMINAL_LINES if lines else _TERMINAL)


# XML 1.0 allows tab, LF, CR and everything from U+0020 except surrogates, U+FFFE and U+FFFF
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# a carriage return in character data is read back as a line feed unless referenced
_XML_TEXT = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", 0x0D: "&#13;"}
_XML_ATTR = {**_XML_TEXT, ord('"'): "&quot;", ord("'"): "&#39;", 0x09: "&#9;", 0x0A: "&#10;"}


def xml_text(value: Any, table: dict = _XML_TEXT) -> str:
    """Return ``value`` as XML character data (between tags)."""
    # a character XML cannot hold even as a reference is shown as its code, never dropped
    return _XML_FORBIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", str(value)).translate(table)


def xml_attr(value: Any) -> str:
    """Return ``value`` for a quoted XML attribute value (either quote)."""
    return xml_text(value, _XML_ATTR)


_BACKTICKS = re.compile("`+")
# what can open emphasis, code, links, images, raw HTML, entities, tables or strikethrough
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]<>!|~&#$])")
# what starts a block at the beginning of a line (list, quote, heading underline, ordered list)
_MD_BULLET = re.compile(r"^([-+=])")
_MD_ORDERED = re.compile(r"^(\d+)([.)])")


#: Characters of a name a Markdown code span shows (:func:`shorten` beyond): a contribution's
#: file name of 10,000 characters must not fill a job summary.
MARKDOWN_NAME = 200
#: Characters of Markdown prose from data (a reason quoting names and values) shown.
MARKDOWN_PROSE = 4000


def markdown_code(value: Any, limit: int = MARKDOWN_NAME) -> str:
    """Return ``value`` as one inline code span, shortened to ``limit`` first ("" for empty text).

    The fence is one backtick longer than the longest run inside; text that starts or ends with a
    backtick or a space is padded (CommonMark strips one from each side).
    """
    # control characters (newlines first: a new line can start a heading, a list or raw HTML)
    # are written out as in a terminal
    text = terminal(shorten(value, limit))
    if not text:
        return ""
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    if text[0] in "` " or text[-1] in "` ":
        text = f" {text} "
    return f"{fence}{text}{fence}"


def markdown_cell(value: Any, limit: int = MARKDOWN_NAME) -> str:
    """Return ``value`` as a code span in a Markdown table cell (``|`` escaped: GFM splits it)."""
    return markdown_code(value, limit).replace("|", "\\|")


def markdown_text(value: Any, limit: int = MARKDOWN_PROSE) -> str:
    """Return ``value`` as one line of Markdown prose, shortened to ``limit`` characters.

    Inline-syntax punctuation and a leading block marker are backslash-escaped; ``@`` mentions
    are broken by a word joiner (GitHub links ``@name`` even when the ``@`` is escaped).
    """
    text = _MD_PUNCTUATION.sub(r"\\\1", terminal(shorten(value, limit)))
    text = _MD_ORDERED.sub(r"\1\\\2", _MD_BULLET.sub(r"\\\1", text))
    return text.replace("@", "@\u2060")


#: First characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """Return a CSV cell: text control-escaped (LF and tab kept), a ``'`` before a formula."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = str(value)
    if text.startswith(FORMULA_PREFIXES):
        text = "'" + text
    return terminal(text, lines=True)


def finite(value: Any) -> Any:
    """Return ``value`` (JSON-like) with every non-finite float as None, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return finite(value.tolist())  # numpy scalars and arrays
    return value


def json_text(value: Any, **kwargs) -> str:
    """Return ``value`` as standard JSON (no NaN or Infinity: they are null)."""
    kwargs.setdefault("default", str)
    return json.dumps(finite(value), allow_nan=False, **kwargs)
