"""compile: torch.compile compiles, recompiles (with reasons, per function and thread), graph breaks,
recompile-limit hits (after which the frame silently runs eager) and compile time.

Sources, none of which needs TORCH_LOGS (read in the torch 2.11 to 2.13 sources):
- ``torch._dynamo.utils.get_compilation_metrics()`` polled at publish: one row per frame compile, with
  ``recompile_reason`` and ``fail_reason`` (a 64-row deque: rows are folded in as they appear).
- artifact taps on ``recompiles`` and ``graph_breaks`` (probes/_torchlog.py): run in the compiling
  thread, so they say which thread recompiled and where a graph broke.
- a filter on ``torch._dynamo.convert_frame`` for the "hit config.recompile_limit" warning (passed on).
- ``counters["graph_break"]`` and ``counters["unimplemented"]``: data-dependent branches only land in the
  latter, so both are read.
- a compile-start callback that notes the compiling thread and, because dynamo's config is thread-local
  from torch 2.12, the ``recompile_limit`` that thread sees.
Nothing runs on the training path except when torch itself compiles.
"""

from __future__ import annotations

import logging
import re
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import CompileKeys, PayloadKeys, ProbeName
from dflash_contract.board.keys import UNKNOWN_COMPILE_THREAD
from probes._common import MAX_RECENT, HookGuard, JsonDict, loaded_module, thread_name, torch_if_imported
from probes._torchlog import ArtifactTap, arm_taps, register_compile_start, unregister_compile_start

_LIMIT_GB_TYPE = "Dynamo recompile limit exceeded"
_RECOMPILING = re.compile(r"Recompiling function (?P<fn>\S+) in (?P<file>.+?):(?P<line>\d+)")
_LIMIT_HIT = re.compile(
    r"hit config\.(?P<kind>\w+) \((?P<limit>\d+)\)\s+function: '(?P<fn>[^']*)' \((?P<file>.+?):(?P<line>\d+)\)\s+last reason: (?P<reason>.*?)(\n|$)",
    re.S,
)
_GRAPH_BREAK = re.compile(r"Graph break in user code at (?P<site>\S+)\s*\nGraph Break Reason: (?P<reason>[^\n]*)")


@dataclass(frozen=True, kw_only=True)
class Config:
    max_functions: int = 64
    max_threads: int = 64


class _Row:
    """A CompilationMetrics row read defensively: fields come and go across torch versions."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name, None)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text and text.strip() else "?"


class CompileProbe:
    name = "compile"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.guard = HookGuard()
        self._recent_recompiles: deque[JsonDict] = deque(maxlen=MAX_RECENT)
        self._recent_graph_breaks: deque[JsonDict] = deque(maxlen=MAX_RECENT)
        self._limit_hits: deque[JsonDict] = deque(maxlen=MAX_RECENT)
        self._thread_of_compile: OrderedDict[str, str] = OrderedDict()
        self._recompile_limit: dict[str, Any] = {}
        self._by_thread: dict[str, dict[str, int]] = {}
        self._by_function: dict[str, dict[str, Any]] = {}
        self._seen_rows: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._compiles = 0
        self._recompiles = 0
        self._failed = 0
        self._limit_rows = 0
        self._compile_time_s = 0.0
        self._callback_registered = False
        self._taps = [
            ArtifactTap("torch._dynamo.guards.__recompiles", "recompiles", self._on_recompile, self.guard),
            ArtifactTap("torch._dynamo.symbolic_convert.__graph_breaks", "graph_breaks", self._on_graph_break, self.guard),
            ArtifactTap("torch._dynamo.convert_frame", None, self._on_convert_frame, self.guard),
        ]
        self._note_limit_of_thread()  # the thread that started the probes (usually MainThread)
        self._arm()

    # --- hooks: run inside the program's threads; they must never raise ---------------------------

    def _on_recompile(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        m = _RECOMPILING.search(msg)
        lines = [ln.strip().lstrip("- ").strip() for ln in msg.splitlines()[2:] if ln.strip()]
        thread = thread_name()
        entry = {
            CompileKeys.FUNCTION: m.group("fn") if m else "?",
            CompileKeys.FILE: f"{m.group('file')}:{m.group('line')}" if m else "?",
            CompileKeys.THREAD: thread,
            PayloadKeys.REASON: "; ".join(lines)[:500] if lines else _first_line(msg),
            CompileKeys.WALL_TIME_S: record.created,
        }
        self._recent_recompiles.append(entry)
        self._thread_counter(thread)[CompileKeys.RECOMPILES] += 1
        self._note_limit_of_thread()

    def _on_graph_break(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        m = _GRAPH_BREAK.search(msg)
        self._recent_graph_breaks.append(
            {
                CompileKeys.SITE: m.group("site") if m else "?",
                PayloadKeys.REASON: (m.group("reason") if m else _first_line(msg))[:300],
                CompileKeys.THREAD: thread_name(),
                CompileKeys.WALL_TIME_S: record.created,
            }
        )

    def _on_convert_frame(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            return
        msg = record.getMessage()
        m = _LIMIT_HIT.search(msg)
        if m is None:
            return
        thread = thread_name()
        self._limit_hits.append(
            {
                CompileKeys.FUNCTION: m.group("fn"),
                CompileKeys.FILE: f"{m.group('file')}:{m.group('line')}",
                CompileKeys.LIMIT_TYPE: m.group("kind"),
                CompileKeys.LIMIT: int(m.group("limit")),
                PayloadKeys.REASON: m.group("reason").strip()[:300],
                CompileKeys.THREAD: thread,
                CompileKeys.FALLBACK: "eager: this frame now runs uncompiled",
                CompileKeys.WALL_TIME_S: record.created,
            }
        )
        self._note_limit_of_thread()

    def _on_compile_start(self, args: Any) -> None:
        try:
            if getattr(args.callback_trigger, "name", "") != "DYNAMO":
                return
            thread = thread_name()
            self._thread_of_compile[str(args.compile_id)] = thread
            while len(self._thread_of_compile) > 1024:
                self._thread_of_compile.popitem(last=False)
            self._note_limit_of_thread()
        except Exception as exc:
            self.guard.failed(exc)

    def _note_limit_of_thread(self) -> None:
        config = getattr(loaded_module("torch._dynamo"), "config", None)
        if config is None or len(self._recompile_limit) >= self.config.max_threads:
            return
        limit = getattr(config, "recompile_limit", None)
        if limit is None:
            limit = getattr(config, "cache_size_limit", None)
        self._recompile_limit[thread_name()] = limit

    def _thread_counter(self, thread: str) -> dict[str, int]:
        entry = self._by_thread.get(thread)
        if entry is None:
            if len(self._by_thread) >= self.config.max_threads:
                thread = "(other threads)"
                entry = self._by_thread.setdefault(thread, {CompileKeys.COMPILES: 0, CompileKeys.RECOMPILES: 0})
            else:
                entry = self._by_thread[thread] = {CompileKeys.COMPILES: 0, CompileKeys.RECOMPILES: 0}
        return entry

    # --- publish-time work ----------------------------------------------------------------------

    def _arm(self) -> None:
        arm_taps(self._taps, self.guard)
        if not self._callback_registered:
            self._callback_registered = register_compile_start(self._on_compile_start, self.guard)

    def _fold_metrics(self) -> None:
        getter = getattr(loaded_module("torch._dynamo.utils"), "get_compilation_metrics", None)
        if getter is None:
            return
        for row in list(getter()):
            key = (getattr(row, "compile_id", None), getattr(row, "start_time_us", None), getattr(row, "co_name", None))
            if key in self._seen_rows:
                continue
            self._seen_rows[key] = None
            while len(self._seen_rows) > 512:
                self._seen_rows.popitem(last=False)
            self._fold_row(row)

    def _fold_row(self, raw: Any) -> None:
        row = _Row(raw)
        fail_reason = str(row.fail_reason or "")
        self._compile_time_s += float(row.entire_frame_compile_time_s or 0.0)
        if fail_reason.startswith(_LIMIT_GB_TYPE):
            self._limit_rows += 1
            return
        if row.fail_type:
            self._failed += 1
        else:
            self._compiles += 1
        thread = self._thread_of_compile.get(str(row.compile_id), UNKNOWN_COMPILE_THREAD)
        self._thread_counter(thread)[CompileKeys.COMPILES] += 1
        fn = row.co_name or "?"
        if fn not in self._by_function and len(self._by_function) >= self.config.max_functions:
            fn = "(other functions)"
        stats = self._by_function.setdefault(
            fn, {CompileKeys.COMPILES: 0, CompileKeys.RECOMPILES: 0, CompileKeys.FILE: row.co_filename, CompileKeys.LAST_REASON: None}
        )
        stats[CompileKeys.COMPILES] += 1
        if row.recompile_reason:
            self._recompiles += 1
            stats[CompileKeys.RECOMPILES] += 1
            stats[CompileKeys.LAST_REASON] = str(row.recompile_reason)[:300]

    def snapshot(self, now_s: float) -> JsonDict:
        self._arm()
        if loaded_module("torch._dynamo") is None:
            return {PayloadKeys.STATUS: "ok", CompileKeys.DYNAMO_LOADED: False, CompileKeys.COMPILES: 0, CompileKeys.RECOMPILES: 0, CompileKeys.GRAPH_BREAKS: 0,
                    CompileKeys.RECOMPILE_LIMIT_HITS: 0, CompileKeys.COMPILE_TIME_S: 0.0, CompileKeys.COMPILING_NOW: False,
                    PayloadKeys.HOOK_ERRORS: self.guard.errors}
        self._fold_metrics()
        counters = getattr(loaded_module("torch._dynamo.utils"), "counters", {})
        reasons: dict[str, int] = {}
        for group in ("graph_break", "unimplemented"):
            for key, n in list(counters.get(group, {}).items()):
                first = _first_line(str(key))
                if first == _LIMIT_GB_TYPE:
                    continue
                reasons[first] = reasons.get(first, 0) + int(n)
        limit_counter = sum(
            int(n) for k, n in list(counters.get("unimplemented", {}).items()) if str(k).startswith(_LIMIT_GB_TYPE)
        )
        compiler = getattr(torch_if_imported(), "compiler", None)
        compiling_now = bool(compiler.is_compiling()) if compiler is not None else False
        return {
            PayloadKeys.STATUS: "ok",
            CompileKeys.DYNAMO_LOADED: True,
            CompileKeys.COMPILES: self._compiles,
            CompileKeys.RECOMPILES: self._recompiles,
            CompileKeys.FAILED_COMPILES: self._failed,
            CompileKeys.GRAPH_BREAKS: sum(reasons.values()),
            CompileKeys.RECOMPILE_LIMIT_HITS: max(limit_counter, self._limit_rows, len(self._limit_hits)),
            CompileKeys.COMPILE_TIME_S: self._compile_time_s,
            CompileKeys.COMPILING_NOW: compiling_now,
            CompileKeys.RECOMPILE_LIMIT: dict(self._recompile_limit),
            CompileKeys.RECENT_RECOMPILES: list(self._recent_recompiles),
            CompileKeys.RECENT_GRAPH_BREAKS: list(self._recent_graph_breaks),
            CompileKeys.GRAPH_BREAK_REASONS: dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:MAX_RECENT]),
            CompileKeys.LIMIT_HITS: list(self._limit_hits),
            CompileKeys.BY_THREAD: {k: dict(v) for k, v in list(self._by_thread.items())},
            CompileKeys.BY_FUNCTION: {k: dict(v) for k, v in list(self._by_function.items())},
            PayloadKeys.HOOK_ERRORS: self.guard.errors,
            PayloadKeys.LAST_HOOK_ERROR: self.guard.last_error,
            CompileKeys.POLLED_AT_S: time.time(),
        }

    def close(self) -> None:
        for tap in self._taps:
            tap.disarm()
        if self._callback_registered:
            unregister_compile_start(self._on_compile_start)
            self._callback_registered = False


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.COMPILE
PROBE = CompileProbe
