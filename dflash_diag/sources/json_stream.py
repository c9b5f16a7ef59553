"""A JSON document read as a stream: its top-level object's values one at a time, and the items of one of its arrays
one at a time, so that reading a trace of a gigabyte costs what is kept of it, not ~11 bytes per byte of text (what
``json.loads`` of the whole costs).

Strict like the board reader (``NaN``, ``Infinity`` and ``1e999`` refused: ``dflash_contract``'s decoder) and bounded: no
value outside the streamed array may be longer than ``max_value_chars``, no item of it longer than
``max_item_chars``; the nesting is Python's own parser's (a ``RecursionError`` is a bad document here). The standard
library's decoder does the parsing (``raw_decode`` on a sliding window of the text); this module only walks the
top-level punctuation between values.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from dflash_contract.board import strict_decoder

CHUNK_BYTES = 1 << 20
ARRAY_START = object()  # yielded as ``(array_key, ARRAY_START)`` when the streamed array begins (it may be empty)
_WHITESPACE = " \t\n\r"


class JsonStreamError(ValueError):
    """Not a JSON document of the expected shape, or (``over_bound``) a value over its bound."""

    def __init__(self, message: str, *, over_bound: bool = False) -> None:
        super().__init__(message)
        self.over_bound = over_bound


_DECODER = strict_decoder()  # the contract's one strict JSON: no NaN, Infinity or 1e999


class _Text:
    """A sliding window on the document's text: what has been read and not consumed yet."""

    def __init__(self, stream: BinaryIO, chunk_bytes: int) -> None:
        self._stream = stream
        self._chunk = chunk_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Read another chunk (dropping what was consumed); False at the end of the document."""
        if self.eof:
            return False
        data = self._stream.read(self._chunk)
        try:
            text = self._utf8.decode(data, final=not data)
        except UnicodeDecodeError:
            raise JsonStreamError("not UTF-8 text") from None
        if not data:
            self.eof = True
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return bool(data) or bool(text)

    def skip_space(self) -> str:
        """The next significant character (not consumed); '' at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        ch = self.skip_space()
        if not ch or ch not in chars:
            raise JsonStreamError(f"expected one of {chars!r} at a top-level position, found {ch or 'the end'!r}")
        self.pos += 1
        return ch

    def value(self, max_chars: int) -> Any:
        """The next whole JSON value, read on as long as it is incomplete and within ``max_chars``."""
        self.skip_space()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except (json.JSONDecodeError, RecursionError) as exc:
                too_long = len(self.buf) - self.pos > max_chars
                if isinstance(exc, RecursionError) or too_long or not self.more():
                    raise JsonStreamError(_what(exc, too_long, max_chars), over_bound=too_long) from None
                continue
            except ValueError as exc:  # a constant (NaN), or an integer past Python's digit limit
                raise JsonStreamError(str(exc)[:200]) from None
            if end == len(self.buf) and not isinstance(value, dict | list | str) and self.more():
                continue  # a number at the window's end may go on in the next chunk
            if end - self.pos > max_chars:
                raise JsonStreamError(f"a value of more than {max_chars:,} characters", over_bound=True)
            self.pos = end
            return value


def _what(exc: BaseException, too_long: bool, max_chars: int) -> str:
    if too_long:
        return f"a value of more than {max_chars:,} characters"
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return f"not JSON ({exc})"[:200]


def iter_document(stream: BinaryIO, *, array_key: str, max_value_chars: int, max_item_chars: int,
                  chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` for each top-level key of the object in ``stream``, except ``array_key``, whose items come
    one by one as ``(array_key, item)`` after ``(array_key, ARRAY_START)`` (a document that is a bare array is read
    as that array). JsonStreamError when the document is not one."""
    text = _Text(stream, chunk_bytes)
    first = text.expect("{[")
    if first == "[":
        yield array_key, ARRAY_START
        yield from _items(text, array_key, max_item_chars)
        _end(text)
        return
    if text.skip_space() == "}":
        text.pos += 1
        _end(text)
        return
    while True:
        key = text.value(max_value_chars)
        if not isinstance(key, str):
            raise JsonStreamError("an object key that is not a string")
        text.expect(":")
        if key == array_key and text.skip_space() == "[":
            text.pos += 1
            yield array_key, ARRAY_START
            yield from _items(text, array_key, max_item_chars)
        else:
            yield key, text.value(max_value_chars)
        if text.expect(",}") == "}":
            break
    _end(text)


def _items(text: _Text, key: str, max_item_chars: int) -> Iterator[tuple[str, Any]]:
    if text.skip_space() == "]":
        text.pos += 1
        return
    while True:
        yield key, text.value(max_item_chars)
        if text.expect(",]") == "]":
            return


def _end(text: _Text) -> None:
    if text.skip_space():
        raise JsonStreamError("more text after the document")
