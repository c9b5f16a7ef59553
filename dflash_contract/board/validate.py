"""Strict JSON (no NaN/Infinity, no ``1e999`` overflowing to infinity, bounded nesting) and the validation of a
whole board document into plain, checked values."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from dflash_contract import proc
from dflash_contract.board.keys import PROBE_STATUSES, STATUS_OK
from dflash_contract.board.schema import (
    BOARD_SCHEMA,
    MAX_BOARD_BYTES,
    MAX_BOARD_DEPTH,
    BoardDocument,
    WriterIdentity,
)


class BoardFormatError(ValueError):
    """The bytes are not a valid board document; the message says what is wrong (one line)."""


# No number a writer of ours produces is past these: every reader may turn any number into a float (a 401-digit
# integer cannot be: OverflowError) and add or multiply a few of them (1e308 could overflow to infinity).
MAX_ABS_INT = 2**63 - 1
MAX_ABS_FLOAT = 1e18


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf: a number no writer of ours can produce
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bounded_float(text: str) -> float:
    value = _finite_float(text)
    if abs(value) > MAX_ABS_FLOAT:
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # decided before int() converts it (quadratic in the digits past 4300)
        raise ValueError(f"number {text[:20]}... is out of range")
    value = int(text)
    if abs(value) > MAX_ABS_INT:
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def loads_strict(data: bytes | str, *, max_depth: int | None = MAX_BOARD_DEPTH, bounded_numbers: bool = False) -> Any:
    """JSON without NaN/Infinity, numbers that overflow to infinity, or nesting deeper than ``max_depth``; with
    ``bounded_numbers``, no integer past 64 bits and no float past ``MAX_ABS_FLOAT`` either (a board's).

    ValueError (UnicodeDecodeError included) on anything else; never RecursionError. ``max_depth=None``
    skips the linear pre-pass (a pure-Python loop, seconds on tens of MiB): nesting is then bounded only by
    the interpreter's recursion limit, and the caller checks the depth of what it gets."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if max_depth is not None and _nesting_exceeds(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        if bounded_numbers:
            return json.loads(text, parse_constant=_reject_constant, parse_float=_bounded_float,
                              parse_int=_bounded_int)
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth or 'the recursion limit allows'} levels") from None


def strict_decoder() -> json.JSONDecoder:
    """:func:`loads_strict`'s rules on numbers and constants as a decoder, for readers that decode a document piece by
    piece (``raw_decode``: a stream); they bound nesting themselves (a RecursionError is caught there)."""
    return json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _nesting_exceeds(text: str, max_depth: int) -> bool:
    """Whether brackets outside strings nest deeper than ``max_depth`` (one linear pass, before parsing)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _get(doc: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str = "") -> Any:
    if key not in doc:
        raise BoardFormatError(f"missing {where}{key}")
    value = doc[key]
    if isinstance(value, bool) and bool not in kinds:
        raise BoardFormatError(f"{where}{key} has the wrong type (bool)")
    if not isinstance(value, kinds):
        raise BoardFormatError(f"{where}{key} has the wrong type ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise BoardFormatError(f"{where}{key} is not a finite number")
    return value


def _short(value: object, n: int = 40) -> str:
    return repr(str(value)[:n])


def validate_document(doc: Any) -> BoardDocument:
    """Check every field's type and range; BoardFormatError names the first problem."""
    if not isinstance(doc, dict):
        raise BoardFormatError("the document is not a JSON object")
    schema = _get(doc, "schema", (str,))
    if schema != BOARD_SCHEMA:
        raise BoardFormatError(f"schema {_short(schema, 60)} is not {BOARD_SCHEMA!r} (written by another dflash-diag version?)")
    w = _get(doc, "writer", (dict,))
    pid = _get(w, "pid", (int,), "writer.")
    ticks = _get(w, "start_time_ticks", (int,), "writer.")
    argv = _get(w, "argv", (list,), "writer.")
    if not proc.is_valid_pid(pid) or not 0 <= ticks < 2**63 or not all(isinstance(a, str) for a in argv):
        raise BoardFormatError("writer has an invalid pid, start_time_ticks or argv")
    torch_version = w.get("torch")
    if torch_version is not None and not isinstance(torch_version, str):
        raise BoardFormatError("writer.torch has the wrong type")
    writer: WriterIdentity = {
        "pid": pid, "start_time_ticks": ticks, "argv": list(argv)[:4096],
        "python": _get(w, "python", (str,), "writer."), "torch": torch_version,
        "hostname": _get(w, "hostname", (str,), "writer."),
    }
    seq = _get(doc, "seq", (int,))
    wall_raw = _get(doc, "wall_time_s", (int, float))
    interval_raw = _get(doc, "interval_s", (int, float))
    # compared before float(): a 401-digit integer has no float (OverflowError), a document built in memory may hold one
    if not (0 <= seq < 2**63) or not (0 <= wall_raw < 1e11) or not (0 < interval_raw <= 86400):
        raise BoardFormatError("seq, wall_time_s or interval_s out of range")
    wall, interval = float(wall_raw), float(interval_raw)
    threads: dict[int, str] = {}
    for tid, name in _get(doc, "threads", (dict,)).items():
        if not (tid.isascii() and tid.isdigit() and len(tid) < 12 and isinstance(name, str)):
            raise BoardFormatError(f"threads entry {_short(tid, 20)} is not TID -> name")
        threads[int(tid)] = name
    probes = _get(doc, "probes", (dict,))
    for name, payload in probes.items():
        if not isinstance(payload, dict):
            raise BoardFormatError(f"probe {_short(name)} payload is not an object")
        status = payload.get("status")
        if not isinstance(status, str) or status not in PROBE_STATUSES:
            raise BoardFormatError(f"probe {_short(name)} has status {_short(status, 20)}, not ok/na/error")
        if status != STATUS_OK and not isinstance(payload.get("reason"), str):
            raise BoardFormatError(f"probe {_short(name)} is {status} without a reason")
    app = _get(doc, "app", (dict,))
    session = doc.get("session", {})
    if not isinstance(session, dict):
        raise BoardFormatError("session has the wrong type")
    publish_interval = doc.get("publish_interval_s")
    if publish_interval is not None and (isinstance(publish_interval, bool) or not isinstance(publish_interval, (int, float))
                                         or not 0 < publish_interval <= 86400):
        raise BoardFormatError("publish_interval_s has the wrong type or is out of range")
    return {
        "schema": schema, "writer": writer, "seq": seq, "wall_time_s": wall, "interval_s": interval,
        "publish_interval_s": float(publish_interval) if publish_interval is not None else None,
        "final": doc.get("final") is True, "threads": threads, "probes": probes, "app": app, "session": session,
    }


def parse_document(data: bytes) -> BoardDocument:
    """Bytes of a board file to a validated document; BoardFormatError (one line) otherwise."""
    if len(data) > MAX_BOARD_BYTES:
        raise BoardFormatError(f"{len(data)} bytes, over the {MAX_BOARD_BYTES}-byte limit")
    if not data.strip():
        raise BoardFormatError("empty (truncated?)")
    try:
        doc = loads_strict(data, bounded_numbers=True)
    except UnicodeDecodeError:
        raise BoardFormatError("not UTF-8 text: corrupt") from None
    except ValueError as exc:
        raise BoardFormatError(f"not valid JSON (corrupt or truncated): {str(exc).splitlines()[0][:120]}") from None
    return validate_document(doc)
