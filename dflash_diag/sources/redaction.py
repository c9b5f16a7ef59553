"""The one redactor (``dflash_contract.redact``) bound to one inspected process: what the sources read from a
process is redacted before it leaves the sources layer.

The inspected program chooses much of the text the tool shows: its thread names, function and file names, the
source lines of its frames, the queue and thread names on its board, the exceptions it prints to stderr. Every
output (``doctor`` and ``top`` text and JSON, ``record``'s trace and profile, the bundle, the live screen) is made
from what the sources return, so that text is redacted here, once, where it enters: by the rules, and by every
secret value found in the process's own argv and environment (6 characters or more: a database password reused as
a thread name goes too). docs/security.md lists what each output holds.

Only the sources keep raw text, and only to open files: the collector reads a frame's source line through the
frame's real path before the sample is redacted. A path that holds a secret is shown redacted, so the outside
reader cannot open it afterwards (no stale-code facts for that file).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dflash_contract import proc
from dflash_contract.redact import (
    MIN_SCRUB_CHARS,
    redact_argv,
    redact_lines,
    redact_text,
    redact_tree,
    scrub_text,
    scrub_tree,
    secret_values,
)
from dflash_diag.errors import AttachError
from dflash_diag.model import Frame, ProcessFacts, SourceFile, SourceLine, StackSample, ThreadSample
from dflash_diag.sources.lines import MAX_CALL_TEXT, MAX_LINE_CHARS, MAX_SNIPPET_CHARS

MEMO_ENTRIES = 65536  # distinct short strings remembered (names repeat in every sample); cleared when full
CACHED_PROCESSES = 16


class ProcessRedactor:
    """The redaction rules plus one process's known secret values, for every kind of thing the sources return.

    Short strings (names, paths, lines) are remembered: a thread's frames are the same in most samples. Safe to
    share between threads (the memo is a dict: single reads and writes are atomic; a race costs a recomputation).
    """

    __slots__ = ("_secrets", "_memo")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SCRUB_CHARS}, key=len, reverse=True))
        self._memo: dict[str, str] = {}

    def __repr__(self) -> str:  # never the values themselves
        return f"ProcessRedactor({len(self._secrets)} known secret values)"

    @property
    def known_values(self) -> int:
        return len(self._secrets)

    # --- text --------------------------------------------------------------------------------------------

    def text(self, value: str) -> str:
        """One line of text (a name, a path, a source line): the rules, then the known values."""
        hit = self._memo.get(value)
        if hit is None:
            hit = scrub_text(redact_text(value), self._secrets)
            if len(self._memo) >= MEMO_ENTRIES:
                self._memo.clear()
            self._memo[value] = hit
        return hit

    def maybe_text(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def cut(self, value: str, limit: int) -> str:
        """The first ``limit`` characters of ``value`` once redacted: redact, then cut (cut first, a secret just
        past the cut loses what the rules recognise it by, and its first part survives)."""
        return self.text(value)[:limit]

    def lines(self, value: str) -> str:
        """Multi-line text (a stderr tail): every line by the rules, PEM keys across lines, then the known values."""
        return scrub_text(redact_lines(value), self._secrets)

    def argv(self, argv: Sequence[str]) -> tuple[str, ...]:
        return tuple(scrub_text(a, self._secrets) for a in redact_argv(argv))

    def tree(self, value: Any) -> Any:
        """A JSON-like tree (a board section): the rules as a tree (secret-named keys), then the known values."""
        return scrub_tree(redact_tree(value), self._secrets)

    # --- what the sources return -------------------------------------------------------------------------

    def frame(self, frame: Frame) -> Frame:
        name, filename, module = self.text(frame.name), self.text(frame.filename), self.maybe_text(frame.module)
        if name == frame.name and filename == frame.filename and module == frame.module:
            return frame  # most frames: no new object
        return replace(frame, name=name, filename=filename, module=module)

    def thread(self, thread: ThreadSample) -> ThreadSample:
        name = self.maybe_text(thread.name)
        frames = tuple(self.frame(f) for f in thread.frames)
        if name == thread.name and all(a is b for a, b in zip(frames, thread.frames, strict=True)):
            return thread
        return replace(thread, name=name, frames=frames)

    def stack(self, sample: StackSample) -> StackSample:
        threads = tuple(self.thread(t) for t in sample.threads)
        if all(a is b for a, b in zip(threads, sample.threads, strict=True)):
            return sample
        return replace(sample, threads=threads)

    def source_lines(self, lines: Mapping[str, str]) -> dict[str, str]:
        """``{"file:line": text}`` with the file part redacted as the frames' file names are (the keys must match)."""
        out: dict[str, str] = {}
        for key, text in lines.items():
            filename, sep, line = key.rpartition(":")
            out[f"{self.text(filename)}{sep}{line}" if sep else self.text(key)] = self.cut(text, MAX_LINE_CHARS)
        return out

    def process_facts(self, facts: ProcessFacts) -> ProcessFacts:
        tail = facts.stderr_tail
        return replace(facts, stderr_target=self.text(facts.stderr_target),
                       stderr_tail=None if tail is None else self.lines(tail))

    def source_line(self, line: SourceLine) -> SourceLine:
        return replace(
            line,
            filename=self.text(line.filename),
            function=self.maybe_text(line.function),
            text=None if line.text is None else self.cut(line.text, MAX_LINE_CHARS),
            queue_calls=tuple(self.cut(c, MAX_CALL_TEXT + len('.get_nowait')) for c in line.queue_calls),
            unused_logits=tuple((n, self.cut(t, MAX_SNIPPET_CHARS)) for n, t in line.unused_logits),
            unused_outputs=tuple((n, self.cut(t, MAX_SNIPPET_CHARS)) for n, t in line.unused_outputs),
            holds=tuple(self.cut(h, MAX_CALL_TEXT) for h in line.holds),
            acquires=None if line.acquires is None else self.cut(line.acquires, MAX_CALL_TEXT),
            decorators=tuple(self.cut(d, MAX_CALL_TEXT) for d in line.decorators),
        )

    def source_file(self, file: SourceFile) -> SourceFile:
        knobs, passed = (tuple(replace(k, call=self.text(k.call), name=self.text(k.name), value=self.text(k.value),
                                       key=self.text(k.key), configured_in=self.text(k.configured_in),
                                       via=self.text(k.via), keys=tuple(map(self.text, k.keys)))
                               for k in uses) for uses in (file.knobs, file.passed))
        overridden = tuple(replace(d, name=self.text(d.name), default=self.text(d.default), note=self.text(d.note),
                                   configured=self.text(d.configured), configured_in=self.text(d.configured_in))
                           for d in file.overridden)
        return replace(file, path=self.text(file.path), imported_by=self.text(file.imported_by), knobs=knobs,
                       passed=passed, overridden=overridden,
                       reads_departures=tuple((self.text(n), line) for n, line in file.reads_departures),
                       carries=tuple((self.text(n), line) for n, line in file.carries))


# --- one redactor per live process ---------------------------------------------------------------------------

_cache: OrderedDict[tuple[int, int], ProcessRedactor] = OrderedDict()
_cache_lock = threading.Lock()


def known_secrets(pid: int) -> frozenset[str]:
    """The secret values in a process's argv and environment (nothing when they cannot be read)."""
    from dflash_diag.sources import procfs

    try:
        argv = procfs.read_cmdline(pid)
        env = procfs.read_environ(pid)
    except (AttachError, OSError):
        return frozenset()
    return secret_values(env if isinstance(env, dict) else {}, argv)


def redactor_for(pid: int) -> ProcessRedactor:
    """The redactor of process ``pid``: its argv and environment are read once per process (PID and start time),
    and every source that reads from it (stacks, board, stderr, source files) shares the redactor and its memo."""
    ticks = proc.start_time_ticks(pid)
    if ticks is None:  # gone (or never there): the rules still apply
        return ProcessRedactor()
    key = (pid, ticks)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    redactor = ProcessRedactor(known_secrets(pid))
    with _cache_lock:
        redactor = _cache.setdefault(key, redactor)
        while len(_cache) > CACHED_PROCESSES:
            _cache.popitem(last=False)
    return redactor
