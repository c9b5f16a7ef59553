"""Text from other processes made safe to show: one line, no terminal control sequences.

Thread names, argv, frame names, file names and board values come from the inspected program and can hold
anything: ESC sequences that recolour or clear a terminal, newlines that forge lines of output, bidi
overrides that reorder what is read, bytes that are not UTF-8. :func:`printable` escapes all of them
visibly (``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``) and leaves every other character as it is. Rich markup
(``[bold]``) is not touched here: it is harmless in JSON and text; renderers that parse markup must escape it
(or print with markup off).
"""

from __future__ import annotations

from typing import Any

_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A)) | {0x200E, 0x200F, 0x061C}
MAX_DEPTH = 64


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def _unsafe(code: int) -> bool:
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or code in _BIDI


def printable(text: str) -> str:
    """``text`` with control characters, surrogates (undecodable bytes) and bidi overrides escaped."""
    if not isinstance(text, str):
        text = str(text)
    if all(not _unsafe(ord(ch)) for ch in text):
        return text
    return "".join(_escape(ch) if _unsafe(ord(ch)) else ch for ch in text)


def printable_tree(value: Any, depth: int = 0) -> Any:
    """A JSON-like tree with every string (keys too) made :func:`printable`; cut at ``MAX_DEPTH``."""
    if isinstance(value, str):
        return printable(value)
    if depth > MAX_DEPTH:
        return "<nested too deep>"
    if isinstance(value, dict):
        return {printable(str(k)): printable_tree(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_tree(v, depth + 1) for v in value]
    return value
