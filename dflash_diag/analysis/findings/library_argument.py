"""The library code a limiting thread's time is in, asked for by an argument the program passes from its
configuration.

- ``library-argument-at-hot-code``: the program passes a library's callable a keyword argument read from its
  configuration (``DDP(model, forward_sync_buffers=cfg.ddp.sync_buffers)``: ``SourceFile.passed``), with a value
  that asks for something (not off, not a size), and LIBRARY_CODE_SHARE or more of the samples of a thread whose
  speed is the program's (or one on the wait-for graph's limiting path, one filling a queue such a thread waits on,
  the GIL holder it waits for) stand in a function of that library whose name carries every word of the argument's
  name that says what it does (``DistributedDataParallel._sync_buffers``: sync, buffers).

What is seen is exactly that: the time is in the library code the argument names, and the run's configuration sets
the argument. The program declares no default to compare with (a dict-backed profile), and the library's own
default may be the same value: what the argument costs is not measured, so the finding is information, never a
warning, and says so. It is the stage's "because" only where no measured cause is found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.changed_value import is_quantity
from dflash_diag.analysis.findings.setting_code import weighed_threads
from dflash_diag.analysis.hotspots import is_label_key, is_off_value
from dflash_diag.model import Finding, Frame, Severity, ThreadStats
from dflash_diag.model.evidence import ENV_LIBRARY, KnobUse, SourceFile, is_library_file
from dflash_diag.model.stage import PIPELINE_STAGES

RULES = (RuleSpec("library-argument-at-hot-code", sampled=True, explains=("where-time-goes",)),)

# Of the thread's samples in the library function the argument names: the largest single place its time goes.
LIBRARY_CODE_SHARE = 0.3
# An argument's name says what it does in two words or more once these are dropped: words that say when or whether
# (forward, enable), how a function is called, or nothing on their own. A one-word argument (``fused``) names a
# whole code path whose time is the work itself, not a cost it adds.
_GENERIC = frozenset({"a", "an", "the", "of", "to", "in", "on", "at", "for", "with", "as", "by", "is", "do", "use",
                      "enable", "enabled", "disable", "disabled", "allow", "forward", "backward", "pre", "post", "run",
                      "call", "impl", "default", "mode", "flag", "step", "fn", "func", "init", "every", "each"})
MIN_WORDS = 2
# Every claim ends so: what is seen is where the time is, not what the argument costs.
NOT_MEASURED = "; what the argument costs is not measured"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> frozenset[str]:
    """The words of an identifier that say what it does: ``forward_sync_buffers`` -> {sync, buffers}."""
    return frozenset(w for w in _CAMEL.sub("_", name).lower().split("_") if w and w not in _GENERIC)


def _function_words(frame: Frame) -> frozenset[str]:
    """The words of a frame's function (its last dotted part: ``DistributedDataParallel._sync_buffers``)."""
    return frozenset(w for w in _CAMEL.sub("_", frame.name.rsplit(".", 1)[-1]).lower().split("_") if w)


def _asking(files: tuple[SourceFile, ...]) -> list[tuple[SourceFile, KnobUse, frozenset[str]]]:
    """The keyword arguments the program's own files pass a library from the run's configuration, with a value that
    asks for something, and the words of their names (MIN_WORDS or more)."""
    out = []
    for file in files:
        if file.run_by:
            continue  # another process's script: not these threads'
        for use in file.passed:
            words = _words(use.name)
            if (use.name and use.configured_in and use.library != ENV_LIBRARY and len(words) >= MIN_WORDS
                    and not is_off_value(use.value) and not is_quantity(use.value) and not is_label_key(use.key)):
                out.append((file, use, words))
    return out


def _in_named_code(ctx: Context, thread: ThreadStats, words: frozenset[str]) -> tuple[float, Frame | None]:
    """The share of the thread's samples standing in a library function whose name carries all of ``words``, and
    that function's frame (the one seen most)."""
    rows = [t for t, _ in ctx.stats_rows(thread)]
    if not rows:
        return 0.0, None
    seen: dict[tuple[str, str], tuple[int, Frame]] = {}
    hits = 0
    for sample in rows:
        frame = next((fr for fr in sample.frames if not fr.native and is_library_file(fr.filename)
                      and words <= _function_words(fr)), None)
        if frame is None:
            continue
        hits += 1
        key = (frame.filename, frame.name)
        n, first = seen.get(key, (0, frame))
        seen[key] = (n + 1, first)
    if not seen:
        return 0.0, None
    return hits / len(rows), max(seen.values(), key=lambda v: v[0])[1]


def check(ctx: Context) -> Iterator[Finding]:
    asking = _asking(ctx.obs.files)
    if not asking:
        return
    best: tuple[float, ThreadStats, str, Frame, SourceFile, KnobUse] | None = None
    for thread, why in weighed_threads(ctx):
        for file, use, words in asking:
            share, frame = _in_named_code(ctx, thread, words)
            if frame is not None and share >= LIBRARY_CODE_SHARE and (best is None or share > best[0]):
                best = (share, thread, why, frame, file, use)
    if best is None:
        return
    share, thread, why, frame, file, use = best
    function = f"{use.library}'s `{frame.name}` ({frame.filename.rsplit('/', 1)[-1]}:{frame.line})"
    argument = f"`{use.name}={use.value}`"
    source = (f"`{use.key}` in {use.configured_in}, passed at {file.path.rsplit('/', 1)[-1]}:{use.line}"
              if use.line else f"`{use.key}` in {use.configured_in}")
    yield Finding(
        rule_id="library-argument-at-hot-code", severity=Severity.INFO,
        claim=(f"{thread.name} spends {pct(share)} of its samples in {function}, the code the program's {argument} "
               f"argument asks for (from {source}){why}{NOT_MEASURED}"),
        evidence=(("the argument", f"{argument} from {source}"),
                  ("time in the code it names", f"{pct(share)} of {thread.name}'s samples in {frame.name}")),
        remedy=(f"Try the run with {use.name} off (or at the library's default) and compare steps a second: where "
                "the time in that code goes away and nothing else needs it, keep it off."),
        impact=share, stages=(thread.stage,) if thread.stage in PIPELINE_STAGES else ())
