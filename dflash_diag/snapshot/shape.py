"""What ``diff`` takes from a ``snapshot.json`` that came from someone else: a bounded parse and a small explicit
schema, checked before any of it is used.

Bytes alone do not bound the cost of a JSON document: 60 MiB of ``{}`` decode into 20 million dicts (3 GB),
and a config of 3 million keys makes millions of ranked changes. So, in this order, each a one-line
:class:`~dflash_diag.errors.CommandError` with exit code 6 (bad input):

1. at most :data:`MAX_JSON_TOKENS` structural characters (``{ [ , :``, counted in the raw bytes, strings
   included: an upper bound on the number of values and keys, found at C speed before anything is decoded);
2. strict JSON: no NaN/Infinity, no number that overflows to infinity, no nesting deeper than
   :data:`MAX_DEPTH` (checked by an iterative walk, never by recursion);
3. the shape of every field ``diff`` reads (:func:`checked_view`): each one may be absent or null (older
   bundles lack some), but when present it has the type dflash-diag writes; each compared section has at
   most :data:`MAX_SECTION_ENTRIES` entries, every string at most :data:`MAX_STRING_CHARS` characters and
   all of them together at most :data:`MAX_VIEW_CHARS`.

Only the checked fields are kept (the view): the stacks, the board's other payloads and everything else
``diff`` never shows are dropped before the redactor and the renderer see the document. docs/bug-reports.md
states the limits; tests/diff/test_crafted_bundles.py plants every field with the wrong type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dflash_contract.board import (
    MAX_STRING_CHARS,
    AppKeys,
    CheckpointKeys,
    FastpathKeys,
    GilKeys,
    ProbeName,
    loads_strict,
)
from dflash_diag.errors import CommandError, ExitCode

MAX_JSON_TOKENS = 1_000_000  # a real snapshot.json of the reference trainer has ~5,000
MAX_DEPTH = 48  # the board nests at most 32 (dflash_contract.board.MAX_BOARD_DEPTH) two levels down
MAX_SECTION_ENTRIES = 10_000  # config keys (flattened), files, threads, findings, versions, ...
MAX_VIEW_CHARS = 4 * 1024 * 1024  # every string diff keeps, keys included

# The rates diff compares (snapshot.build._rates writes them), and the board probes it reads.
RATE_KEYS = (AppKeys.TOKENS_PER_S, AppKeys.TARGET_BATCHES_PER_S, AppKeys.DRAFTER_BATCHES_PER_S, AppKeys.STEP_MS, AppKeys.STEP)
SCALAR = (str, int, float, bool, type(None))


class ShapeError(ValueError):
    """The document is not shaped like a snapshot dflash-diag writes; the message names the field."""


def parse_bounded(data: bytes) -> Any:
    """``data`` decoded as strict JSON within the token and depth bounds; ShapeError names what is wrong."""
    tokens = sum(data.count(ch) for ch in (b"{", b"[", b",", b":"))
    if tokens > MAX_JSON_TOKENS:
        raise ShapeError(f"{tokens} JSON values and keys, more than the {MAX_JSON_TOKENS} a snapshot can hold")
    try:
        # The board's strict JSON; its depth pre-pass is a Python loop over every character: the walk below
        # checks the depth instead, once the token bound has made the document small.
        doc = loads_strict(data, max_depth=None)
    except UnicodeDecodeError:
        raise ShapeError("not UTF-8 text") from None
    except ValueError as exc:
        raise ShapeError(f"not valid JSON ({str(exc).splitlines()[0][:80]})") from None
    if _depth_exceeds(doc, MAX_DEPTH):
        raise ShapeError(f"nested deeper than {MAX_DEPTH} levels")
    return doc


def _depth_exceeds(doc: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


# --- the schema ---------------------------------------------------------------------------------------------


_KIND_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
                              type(None): "null", int: "a number", float: "a number"}


def _kind(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


class _Budget:
    """Counts the characters of every string kept, so the view stays small whatever the file holds."""

    def __init__(self) -> None:
        self.chars = 0

    def text(self, value: str, where: str) -> str:
        if len(value) > MAX_STRING_CHARS:
            raise ShapeError(f"{where} is a string of {len(value)} characters (at most {MAX_STRING_CHARS})")
        self.chars += len(value)
        if self.chars > MAX_VIEW_CHARS:
            raise ShapeError(f"more than {MAX_VIEW_CHARS >> 20} MiB of text in the fields diff compares")
        return value


def _typed(value: Any, kinds: tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kinds):
        wanted = " or ".join(dict.fromkeys(_KIND_NAMES[k] for k in kinds))
        raise ShapeError(f"{where} is {_kind(value)}, expected {wanted}")
    return value


def _scalar(value: Any, where: str, budget: _Budget) -> Any:
    """A string, number, boolean or null, or the N/A object dflash-diag writes for a value it could not read."""
    if isinstance(value, dict) and set(value) == {"na"} and isinstance(value["na"], str):
        return {"na": budget.text(value["na"], where)}
    if not isinstance(value, SCALAR):
        raise ShapeError(f"{where} is {_kind(value)}, expected a string, number, boolean, null or N/A")
    return budget.text(value, where) if isinstance(value, str) else value


def _number(value: Any, where: str) -> float | int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ShapeError(f"{where} is {_kind(value)}, expected a number or null")
    if isinstance(value, int) and abs(value) > 2**63:
        raise ShapeError(f"{where} is out of range")
    return value


def _object(value: Any, where: str, budget: _Budget, entry: Callable[[Any, str], Any] | None = None) -> dict[str, Any]:
    """An object (absent/null: empty) of at most MAX_SECTION_ENTRIES entries, each checked by ``entry``."""
    if value is None:
        return {}
    _typed(value, (dict,), where)
    if len(value) > MAX_SECTION_ENTRIES:
        raise ShapeError(f"{where} has {len(value)} entries (at most {MAX_SECTION_ENTRIES})")
    check = entry or (lambda v, w: _scalar(v, w, budget))
    return {budget.text(k, where): check(v, f"{where}.{k}"[:120]) for k, v in value.items()}


def _list(value: Any, where: str, budget: _Budget, item: Callable[[Any, str], Any]) -> list[Any]:
    if value is None:
        return []
    _typed(value, (list,), where)
    if len(value) > MAX_SECTION_ENTRIES:
        raise ShapeError(f"{where} has {len(value)} items (at most {MAX_SECTION_ENTRIES})")
    return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]


def _config(value: Any, where: str, budget: _Budget) -> dict[str, Any]:
    """The app's config: nested objects of scalars or lists of scalars, at most MAX_SECTION_ENTRIES leaves."""
    leaves = 0

    def walk(node: Any, path: str) -> Any:
        nonlocal leaves
        if isinstance(node, dict):
            return {budget.text(k, path): walk(v, f"{path}.{k}"[:120]) for k, v in node.items()}
        leaves += 1
        if leaves > MAX_SECTION_ENTRIES:
            raise ShapeError(f"{where} has more than {MAX_SECTION_ENTRIES} keys")
        if isinstance(node, list):
            if len(node) > MAX_SECTION_ENTRIES:
                raise ShapeError(f"{path} has {len(node)} items (at most {MAX_SECTION_ENTRIES})")
            return [_scalar(v, f"{path}[{i}]", budget) if not isinstance(v, dict | list) else walk(v, f"{path}[{i}]")
                    for i, v in enumerate(node)]
        return _scalar(node, path, budget)

    return walk(_typed(value, (dict,), where), where) if value is not None else {}


def _record(fields: Mapping[str, Callable[[Any, str], Any]]) -> Callable[[Any, str], dict[str, Any]]:
    """A checker for an object of which only ``fields`` are kept (each checked; absent ones stay absent)."""

    def check(value: Any, where: str) -> dict[str, Any]:
        _typed(value, (dict,), where)
        return {k: fields[k](value[k], f"{where}.{k}") for k in fields if k in value}

    return check


def checked_view(doc: Any) -> dict[str, Any]:
    """The fields of a snapshot document that ``diff`` reads, each checked (module docstring), nothing else."""
    if not isinstance(doc, dict):
        raise ShapeError("snapshot.json is not a JSON object")
    budget = _Budget()

    def text(v: Any, w: str) -> str | None:
        return budget.text(_typed(v, (str, type(None)), w), w) if v is not None else None

    def scalar(v: Any, w: str) -> Any:
        return _scalar(v, w, budget)

    def scalars(v: Any, w: str) -> dict[str, Any]:
        return _object(v, w, budget)

    def texts(v: Any, w: str) -> list[str | None]:
        return _list(v, w, budget, text)

    def numbers(v: Any, w: str) -> dict[str, Any]:
        return _object(v, w, budget, _number)

    process = _record({"argv": texts})
    finding = _record({"rule_id": text, "severity": text})
    thread = _record({"name": text, "stage": text, "helper": scalar})
    # The words the program uses for its stages (model.stage.StageNames): diff's rows name stages with them.
    pipeline = _record({"names": _record({"own_words": scalar, "queue": text, "stems": scalars})})
    stale = _record({"module": text})
    rates = _record({**dict.fromkeys(RATE_KEYS, _number),
                     "state_shares": lambda v, w: _object(v, w, budget, numbers)})
    code = _record({"files": lambda v, w: _object(v, w, budget, text), "changed_after_start": texts,
                    "stale_modules": lambda v, w: _list(v, w, budget, stale)})
    fastpath = _record({FastpathKeys.GDN_FAST_PATH: scalar, FastpathKeys.FLEX_ATTENTION: scalar,
                        FastpathKeys.GDN_KERNELS: scalars})
    probes = _record({ProbeName.FASTPATH: fastpath, ProbeName.CHECKPOINT: _record({CheckpointKeys.CALLS: numbers}),
                      ProbeName.GIL: _record({GilKeys.FREE_THREADED: scalar})})
    board = _record({"probes": probes})
    top: dict[str, Callable[[Any, str], Any]] = {
        "schema": text, "pid": _number, "created_utc": text, "process": process,
        "config": lambda v, w: _config(v, w, budget), "versions": scalars, "env_knobs": scalars,
        "findings": lambda v, w: _list(v, w, budget, finding), "threads": lambda v, w: _list(v, w, budget, thread),
        "rates": rates, "code": code, "board": lambda v, w: board(v, w) if v is not None else None,
        "pipeline": pipeline,
    }
    return {key: check(doc[key], key) for key, check in top.items() if key in doc}


def checked(data: bytes, source: str, schemas: tuple[str, ...], prefix: str) -> dict[str, Any]:
    """The checked view of a snapshot.json's bytes, or a one-line CommandError (exit 6) saying what is wrong."""
    try:
        doc = parse_bounded(data)
        if not isinstance(doc, dict):
            raise ShapeError("snapshot.json is not a JSON object")
        schema = doc.get("schema")
        if not isinstance(schema, str) or not schema.startswith(prefix):
            raise ShapeError(f"not a dflash-diag snapshot (no '{prefix}N' schema)")
        if schema not in schemas:
            raise ShapeError(f"snapshot schema {schema[:60]} is newer than this dflash-diag understands: upgrade it")
        return checked_view(doc)
    except ShapeError as exc:
        if str(exc).startswith(("not valid JSON", "not UTF-8")):
            # A file that is no JSON at all was never a bundle: say that first, then what it is not.
            raise CommandError(f"{source}: not a snapshot bundle (a `dflash-diag snapshot` .tar.gz, its directory or "
                               f"its snapshot.json): {exc}", ExitCode.BAD_INPUT) from None
        raise CommandError(f"{source}: {exc}", ExitCode.BAD_INPUT) from None
