"""An observation as a JSON document (schema ``dflash-diag.observation/1``) and back: what ``doctor
--save-observation`` writes, what a snapshot bundle carries (``observation.json``), what ``doctor --replay`` reads.

The codec is generic over the model's frozen dataclasses: it reads each field's type hint, so a field added to
the model later is written and read without an edit here (an older document, without the field, reads with the
field's default). The rules, by type:

- a dataclass is an object of its fields (every field without a default required; a key the class does not have
  is refused: the document is from another version or not ours);
- ``int``, ``str``, ``bool``, ``None`` are themselves; a ``float`` is a number, or ``"nan"`` / ``"inf"`` /
  ``"-inf"`` for the values JSON has no number for; an ``Enum`` is its value;
- ``tuple[X, ...]`` and ``list[X]`` are arrays, ``tuple[A, B]`` an array of exactly that length; a ``Mapping``
  is an object (an ``int`` key is written as its decimal text);
- a union (``Maybe[T]`` is ``T | NA``) is whichever of its members the value reads as, tried in order;
- ``Any`` (a probe's payload on the board) is any JSON value;
- the frames of the stacks repeat in every sample: each distinct :class:`~dflash_diag.model.Frame` is written once
  in ``tables.Frame`` and referred to by its index.

Reading takes a file from someone else: the bytes, the number of JSON values and the nesting are bounded before
anything is decoded (as ``snapshot.shape`` does for ``diff``), every value is checked against its field's type,
integers stay within 64 bits, and any mismatch is one :class:`ObservationFormatError` that names the field, never
a traceback.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from dflash_contract.board import loads_strict
from dflash_diag.model import Frame, Observation
from dflash_diag.model.job import JobObservation

OBSERVATION_SCHEMA = "dflash-diag.observation/1"
KINDS: dict[str, type] = {"process": Observation, "job": JobObservation}
INTERNED: tuple[type, ...] = (Frame,)  # written once each, in ``tables``, and referred to by index
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
MAX_JSON_TOKENS = 4_000_000  # doctor's 5 s window of a 20-thread trainer writes ~150,000
MAX_DEPTH = 64  # the board nests at most 32 (dflash_contract.board.MAX_BOARD_DEPTH), a few levels down
MAX_INT = 2**63 - 1
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class ObservationFormatError(ValueError):
    """The document is not an observation this version reads; the message says where and what."""


# --- writing ------------------------------------------------------------------------------------------------------

Text = Callable[[str], str]
Encode = Callable[[Any, "_Writer"], Any]


class _Writer:
    """One document being written: the string filter and the tables of interned values."""

    def __init__(self, text: Text | None) -> None:
        self.text: Text = text or (lambda s: s)
        self.tables: dict[str, list[Any]] = {}
        self.index: dict[Any, int] = {}


_ENCODERS: dict[Any, Encode] = {}


def _encoder(hint: Any) -> Encode:
    """How a value of type ``hint`` is written (built once per type, then reused for every value)."""
    found = _ENCODERS.get(hint)
    if found is None:
        found = _ENCODERS[hint] = _build_encoder(hint)
    return found


def _build_encoder(hint: Any) -> Encode:
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda v, w: _plain(v, w.text)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        by_type: dict[type, Encode] = {}  # the member a value of each Python type is written as

        def union(v: Any, w: _Writer) -> Any:
            f = by_type.get(type(v))
            if f is None:
                f = by_type[type(v)] = _encoder(_member_for(v, hint, members))
            return f(v, w)
        return union
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _interning_encoder(hint) if hint in INTERNED else _fields_encoder(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return lambda v, w: v.value
    if hint is float:  # an int stays an int (read back equal, and printed alike)
        return lambda v, w: v if isinstance(v, int) or math.isfinite(v) else repr(float(v))
    if hint is str:
        return lambda v, w: w.text(v)
    if hint in (int, bool, type(None)):
        return lambda v, w: v
    if origin in (tuple, list):
        args = typing.get_args(hint)
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            item = _encoder(args[0] if args else Any)
            return lambda v, w: [item(x, w) for x in v]
        items = [_encoder(a) for a in args]
        return lambda v, w: [f(x, w) for f, x in zip(items, v, strict=True)]
    if origin in (Mapping, dict, typing.Mapping, typing.MutableMapping):
        key_hint, value_hint = typing.get_args(hint) or (str, Any)
        value = _encoder(value_hint)
        if key_hint is int:
            return lambda v, w: {str(k): value(x, w) for k, x in v.items()}
        return lambda v, w: {w.text(k): value(x, w) for k, x in v.items()}
    raise TypeError(f"the observation codec cannot write a {hint!r}")


def _fields_encoder(cls: type) -> Encode:
    plan: list[tuple[str, Encode]] = []

    def encode(v: Any, w: _Writer) -> dict[str, Any]:
        if not plan:  # built on first use: a dataclass may refer to itself
            plan.extend((f.name, _encoder(_hints(cls)[f.name])) for f in dataclasses.fields(cls))
        return {name: f(getattr(v, name), w) for name, f in plan}

    return encode


def _interning_encoder(cls: type) -> Encode:
    fields = _fields_encoder(cls)

    def encode(v: Any, w: _Writer) -> int:
        key = (cls, v)
        index = w.index.get(key)
        if index is None:
            table = w.tables.setdefault(cls.__name__, [])
            index = w.index[key] = len(table)
            table.append(fields(v, w))
        return index

    return encode


def _plain(value: Any, text: Text) -> Any:
    """A probe payload (already JSON when it was read) as plain JSON values."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {text(str(k)): _plain(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, text) for v in value]
    raise TypeError(f"the observation codec cannot write a {type(value).__name__} in a payload")


def _member_for(value: Any, hint: Any, members: tuple[Any, ...]) -> Any:
    """The member of a union that ``value`` is an instance of."""
    for member in members:
        if member is type(None):
            if value is None:
                return member
            continue
        base = typing.get_origin(member) or member
        if base is Any or (isinstance(base, type) and isinstance(value, base)):
            return member
        if base is float and isinstance(value, int) and not isinstance(value, bool):
            return member
        if base in (Mapping, typing.Mapping) and isinstance(value, Mapping):
            return member
    raise TypeError(f"{type(value).__name__} is none of {hint!r}")


def observation_document(obs: Observation | JobObservation, *, tool_version: str,
                         text: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The JSON document of ``obs`` (``text``: applied to every string written, e.g. a bundle's scrubber)."""
    kind = next(name for name, cls in KINDS.items() if isinstance(obs, cls))
    writer = _Writer(text)
    body = _encoder(KINDS[kind])(obs, writer)
    return {"schema": OBSERVATION_SCHEMA, "tool": {"name": "dflash-diag", "version": tool_version}, "kind": kind,
            "tables": writer.tables, "observation": body}


# --- reading ------------------------------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
             int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


Decode = Callable[[Any, "_Reader"], Any]


class _Where(ObservationFormatError):
    """A mismatch on its way up: each container adds its part of the path; the top says it in full."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def at(self, part: str) -> _Where:
        self.path.append(part)
        return self

    def message(self, root: str) -> str:
        where = root + "".join(reversed(self.path))
        return f"{where} {self.what}" if not self.what.startswith(":") else f"{where}{self.what}"


class _Reader:
    """One document being read: its raw tables, decoded on first reference."""

    def __init__(self, tables: Mapping[str, Any]) -> None:
        self.raw_tables = tables
        self.tables: dict[str, list[Any]] = {}


_DECODERS: dict[Any, Decode] = {}


def _decoder(hint: Any) -> Decode:
    """How a value of type ``hint`` is read and checked (built once per type)."""
    found = _DECODERS.get(hint)
    if found is None:
        found = _DECODERS[hint] = _build_decoder(hint)
    return found


def _build_decoder(hint: Any) -> Decode:
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda d, r: d  # strict JSON, depth bounded: any value of it is a payload value
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _interned_decoder(hint) if hint in INTERNED else _fields_decoder(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = {m.value: m for m in hint}

        def enum_value(d: Any, r: _Reader) -> Any:
            if isinstance(d, dict | list) or d not in values:
                raise _Where(f"is {_kind(d)}, not one of {sorted(map(str, values))}")
            return values[d]
        return enum_value
    if hint is float:
        return lambda d, r: _float(d)
    if hint is bool:
        return lambda d, r: d if d is True or d is False else _wrong(d, "a boolean")
    if hint is int:
        return lambda d, r: _int(d)
    if hint is str:
        return lambda d, r: d if type(d) is str else _wrong(d, "a string")
    if hint is type(None):
        return lambda d, r: None if d is None else _wrong(d, "null")
    if origin in (tuple, list):
        return _sequence_decoder(hint, origin)
    if origin in (Mapping, dict, typing.Mapping, typing.MutableMapping):
        key_hint, value_hint = typing.get_args(hint) or (str, Any)
        value = _decoder(value_hint)

        def mapping(d: Any, r: _Reader) -> dict[Any, Any]:
            if type(d) is not dict:
                _wrong(d, "an object")
            out = {}
            for k, x in d.items():
                try:
                    out[_key(k) if key_hint is int else k] = value(x, r)
                except _Where as exc:
                    raise exc.at(f"[{k[:40]!r}]") from None
            return out
        return mapping
    raise TypeError(f"the observation codec cannot read a {hint!r}")


def _sequence_decoder(hint: Any, origin: Any) -> Decode:
    args = typing.get_args(hint)
    if origin is list or (len(args) == 2 and args[1] is Ellipsis):
        item = _decoder(args[0] if args else Any)

        def sequence(d: Any, r: _Reader) -> Any:
            if type(d) is not list:
                _wrong(d, "a list")
            out = []
            for i, x in enumerate(d):
                try:
                    out.append(item(x, r))
                except _Where as exc:
                    raise exc.at(f"[{i}]") from None
            return tuple(out) if origin is tuple else out
        return sequence
    items = [_decoder(a) for a in args]

    def fixed(d: Any, r: _Reader) -> tuple[Any, ...]:
        if type(d) is not list:
            _wrong(d, "a list")
        if len(d) != len(items):
            raise _Where(f"has {len(d)} items, expected {len(items)}")
        out = []
        for i, (f, x) in enumerate(zip(items, d, strict=True)):
            try:
                out.append(f(x, r))
            except _Where as exc:
                raise exc.at(f"[{i}]") from None
        return tuple(out)
    return fixed


def _fields_decoder(cls: type) -> Decode:
    plan: list[tuple[str, Decode, bool]] = []  # name, decoder, required
    names: set[str] = {f.name for f in dataclasses.fields(cls)}

    def decode(d: Any, r: _Reader) -> Any:
        if not plan:  # built on first use: a dataclass may refer to itself
            hints = _hints(cls)
            plan.extend((f.name, _decoder(hints[f.name]),
                         f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                        for f in dataclasses.fields(cls))
        if type(d) is not dict:
            _wrong(d, "an object")
        if not d.keys() <= names:
            unknown = sorted(set(d) - names)
            raise _Where(f"has {', '.join(repr(k)[:40] for k in unknown[:3])}, which a {cls.__name__} does not "
                         "have (a newer or a foreign document)")
        values = {}
        for name, f, required in plan:
            if name in d:
                try:
                    values[name] = f(d[name], r)
                except _Where as exc:
                    raise exc.at(f".{name}") from None
            elif required:
                raise _Where(f"has no {name!r}")
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:  # a __post_init__ that refuses the values
            raise _Where(f": {exc}") from None
    return decode


def _interned_decoder(cls: type) -> Decode:
    fields = _fields_decoder(cls)
    name = cls.__name__

    def decode(d: Any, r: _Reader) -> Any:
        index = _int(d)
        table = r.tables.get(name)
        if table is None:
            raw = r.raw_tables.get(name, [])
            if type(raw) is not list:
                raise ObservationFormatError(f"tables.{name} is {_kind(raw)}, expected a list")
            table = r.tables[name] = []
            for i, row in enumerate(raw):
                try:
                    table.append(fields(row, r))
                except _Where as exc:
                    raise ObservationFormatError(exc.message(f"tables.{name}[{i}]")) from None
        if not 0 <= index < len(table):
            raise _Where(f"refers to {name} {index}, beyond the {len(table)} in tables.{name}")
        return table[index]
    return decode


def _json_kinds(hint: Any) -> frozenset[type]:
    """The JSON value types a member of a union can be read from: only those members are tried."""
    origin = typing.get_origin(hint) or hint
    if hint is Any:
        return frozenset({dict, list, str, int, float, bool, type(None)})
    if dataclasses.is_dataclass(hint):
        return frozenset({int}) if hint in INTERNED else frozenset({dict})
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return frozenset(type(m.value) for m in hint)
    if hint is float:
        return frozenset({int, float, str})
    if origin in (tuple, list):
        return frozenset({list})
    if origin in (Mapping, dict, typing.Mapping, typing.MutableMapping):
        return frozenset({dict})
    return frozenset({hint})  # int, str, bool, NoneType


def _union_decoder(hint: Any) -> Decode:
    members = tuple(sorted(typing.get_args(hint), key=lambda m: m is not type(None)))  # null first: cheap and exact
    by_kind: dict[type, list[Decode]] = {}
    for member in members:
        for kind in _json_kinds(member):
            by_kind.setdefault(kind, []).append(_decoder(member))

    def decode(d: Any, r: _Reader) -> Any:
        candidates = by_kind.get(type(d), ())
        last: _Where | None = None
        for f in candidates:
            try:
                return f(d, r)
            except _Where as exc:
                last = exc
        if len(candidates) == 1 and last is not None:
            raise last
        raise _Where(f"is {_kind(d)} that reads as none of {_names(members)}")
    return decode


def _names(members: tuple[Any, ...]) -> str:
    return " or ".join("null" if m is type(None) else getattr(m, "__name__", None) or str(m) for m in members)


def _wrong(data: Any, expected: str) -> Any:
    raise _Where(f"is {_kind(data)}, expected {expected}")


def _int(data: Any) -> int:
    if type(data) is not int:
        _wrong(data, "an integer")
    if not -MAX_INT <= data <= MAX_INT:
        raise _Where("is an integer beyond 64 bits")
    return data  # type: ignore[no-any-return]


def _float(data: Any) -> float:
    kind = type(data)
    if kind is float:
        return data  # type: ignore[no-any-return]
    if kind is int:
        if not -MAX_INT <= data <= MAX_INT:
            raise _Where("is a number beyond 64 bits")
        return data  # type: ignore[no-any-return]  # an int stays an int: written from one, read back equal
    if kind is str and data in _NON_FINITE:
        return _NON_FINITE[data]
    return _wrong(data, "a number")  # type: ignore[no-any-return]


def _key(key: str) -> int:
    if not (key.lstrip("-").isdigit() and key.isascii() and len(key) <= 20):
        raise _Where(f"has the key {key[:40]!r}, expected an integer")
    return _int(int(key))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _depth_exceeds(doc: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        children: Any = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if children and depth >= max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_document(data: bytes) -> dict[str, Any]:
    """The JSON of an observation document, within the bounds (bytes, values, nesting), checked to be one."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ObservationFormatError(f"{len(data) >> 20} MiB, more than the {MAX_DOCUMENT_BYTES >> 20} MiB an "
                                     "observation may take")
    tokens = sum(data.count(ch) for ch in (b"{", b"[", b",", b":"))
    if tokens > MAX_JSON_TOKENS:
        raise ObservationFormatError(f"{tokens} JSON values and keys, more than the {MAX_JSON_TOKENS} an "
                                     "observation may hold")
    try:
        doc = loads_strict(data, max_depth=None)
    except UnicodeDecodeError:
        raise ObservationFormatError("not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise ObservationFormatError(f"not valid JSON ({str(exc).splitlines()[0][:80] if str(exc) else 'too deep'})") \
            from None
    if _depth_exceeds(doc, MAX_DEPTH):
        raise ObservationFormatError(f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(doc, dict) or doc.get("schema") != OBSERVATION_SCHEMA:
        schema = doc.get("schema") if isinstance(doc, dict) else None
        raise ObservationFormatError(f"not a dflash-diag observation (schema {str(schema)[:60]!r}; this version reads "
                                     f"{OBSERVATION_SCHEMA})" if schema else "not a dflash-diag observation (no schema)")
    return doc


def read_observation(data: bytes) -> Observation | JobObservation:
    """The observation a document holds; ObservationFormatError (one line, naming the field) otherwise."""
    doc = parse_document(data)
    unknown = sorted(set(doc) - {"schema", "tool", "kind", "tables", "observation"})
    if unknown:
        raise ObservationFormatError(f"the document has {', '.join(repr(k)[:40] for k in unknown[:3])}, which "
                                     f"{OBSERVATION_SCHEMA} does not")
    cls = KINDS.get(doc.get("kind"))  # type: ignore[arg-type]
    if cls is None:
        raise ObservationFormatError(f"kind is {str(doc.get('kind'))[:40]!r}, expected one of {sorted(KINDS)}")
    tables = doc.get("tables", {})
    if type(tables) is not dict:
        raise ObservationFormatError(f"tables is {_kind(tables)}, expected an object")
    try:
        return _decoder(cls)(doc.get("observation"), _Reader(tables))  # type: ignore[no-any-return]
    except _Where as exc:
        raise ObservationFormatError(exc.message("observation")) from None
    except RecursionError:
        raise ObservationFormatError("nested too deeply") from None


def encode_observation(obs: Observation | JobObservation, *, tool_version: str,
                       text: Callable[[str], str] | None = None) -> bytes:
    """The document's bytes (compact, UTF-8); ObservationFormatError when it would be too large to read back."""
    import json

    data = (json.dumps(observation_document(obs, tool_version=tool_version, text=text), allow_nan=False,
                       separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    tokens = sum(data.count(ch) for ch in (b"{", b"[", b",", b":"))
    if len(data) > MAX_DOCUMENT_BYTES or tokens > MAX_JSON_TOKENS:
        raise ObservationFormatError(f"the observation takes {len(data) >> 20} MiB ({tokens} JSON values), more than "
                                     f"can be read back ({MAX_DOCUMENT_BYTES >> 20} MiB, {MAX_JSON_TOKENS}): take a "
                                     "shorter window")
    return data


__all__ = ["MAX_DOCUMENT_BYTES", "OBSERVATION_SCHEMA", "ObservationFormatError", "encode_observation",
           "observation_document", "parse_document", "read_observation"]
