"""What a process's stderr says, when it goes to a file we may read: thread deaths and torch's own warnings. Pure.

Python prints every uncaught exception of a ``threading.Thread`` as ``Exception in thread NAME:`` and a
traceback; torch and transformers print one-line warnings for the things the rules care about. The text is the
tail of the file (``sources.outside``); only the lines matched here are ever shown, and they are shortened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dflash_diag.model.evidence import is_library_file

# Anywhere in a line: two threads dying at once write their tracebacks interleaved, character by character, so a
# header may follow another traceback's carets ("    ^^^^^Exception in thread student-1:").
_HEADER = r"(?:^|(?<=[\s^~]))Exception in thread "
_NAME_END = r"(?: \([^)\n]*\))?:"  # an optional " (target)" after the name, then the colon
_DEATH = re.compile(_HEADER + r"([^:\n]+?)" + _NAME_END + r"(?=\s|$)")
# The header is three writes (CPython's thread excepthook: "Exception in thread ", the name, ":\n"), so another
# thread's traceback can also come between them: the header's start with no name after it ...
_HEADER_START = re.compile(_HEADER)
# ... and, lines later, the name alone, right before the traceback it heads.
_ORPHAN_NAME = re.compile(r"^([^\s:^~][^:\n]*?)" + _NAME_END + r"\s*$")
_TRACEBACK = "Traceback (most recent call last):"
# Caret/tilde markers (3.11+) and blanks that interleaving glues to the start of another line.
_MARKS = re.compile(r"^[\s^~]+")
_FRAME = re.compile(r'^\s+File "(.+)", line (\d+), in (.+)$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure|[A-Z]\w*))(?::\s?(.*))?$")
# Past a line that is no part of a traceback (interleaved text), only a name that says it is an exception counts.
_EXCEPTION_NAMED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure)(?::\s?(.*))?$")
# torch.utils.checkpoint, reentrant variant, when no input requires grad: the region's parameters get no gradient.
CHECKPOINT_NO_GRAD = "None of the inputs have requires_grad=True. Gradients will be None"
_RECOMPILE_LIMIT = re.compile(r"torch\._dynamo hit config\.(?:recompile_limit|cache_size_limit) \((\d+)\)")
_LIMIT_FUNCTION = re.compile(r"function: '([^']+)' \(([^)]+)\)")
_LIMIT_REASON = re.compile(r"last reason: (.+)")
# transformers >= 5: "`causal_conv1d_fn` is falling back to its reference PyTorch implementation because ..."
_FALLBACK = re.compile(r"`?([\w.]+)`? is falling back to (?:its|the) (?:reference )?PyTorch implementation(?: because (.+))?")
_CUDAGRAPH_SKIP = re.compile(r"skipping cudagraphs? due to (.+)")
MAX_TEXT = 200


@dataclass(frozen=True, slots=True)
class ThreadDeath:
    thread: str
    exception: str  # the exception's last line, "RuntimeError: shapes cannot be multiplied"
    where: str  # "file.py:12 in func" of the innermost traceback frame, "" when not printed


@dataclass(frozen=True, slots=True)
class RecompileLimit:
    limit: int
    function: str  # "f (file.py:9)" when printed
    reason: str


@dataclass(frozen=True, slots=True)
class StderrFacts:
    deaths: tuple[ThreadDeath, ...] = ()
    checkpoint_no_grad: int = 0  # times the reentrant-checkpoint "Gradients will be None" warning was printed
    checkpoint_no_grad_site: str = ""  # the warning's location line
    recompile_limits: tuple[RecompileLimit, ...] = ()
    fallbacks: tuple[tuple[str, str], ...] = ()  # (kernel, why) for each "falling back to ... PyTorch" line
    cudagraph_skips: tuple[str, ...] = ()


def parse_stderr(text: str | None) -> StderrFacts:
    if not text:
        return StderrFacts()
    lines = text.splitlines()
    deaths: list[ThreadDeath] = []
    limits: list[RecompileLimit] = []
    fallbacks: dict[str, str] = {}
    skips: dict[str, None] = {}
    no_grad = 0
    no_grad_site = ""
    split_headers = 0  # header starts whose name was written elsewhere (after another thread's output)
    for i, line in enumerate(lines):
        found = list(_DEATH.finditer(line))
        split_headers += max(0, len(_HEADER_START.findall(line)) - len(found))
        if found:
            for death in found:
                deaths.append(_death(death.group(1), lines[i + 1:i + 400]))
            continue
        orphan = _ORPHAN_NAME.match(line) if split_headers else None
        if orphan is not None and i + 1 < len(lines) and lines[i + 1].startswith(_TRACEBACK):
            # Only after a split header: "Saving failed:" before a logged traceback is not a thread's name.
            split_headers -= 1
            deaths.append(_death(orphan.group(1), lines[i + 1:i + 400]))
            continue
        if CHECKPOINT_NO_GRAD in line:
            no_grad += 1
            no_grad_site = no_grad_site or line.split(": UserWarning", 1)[0][-MAX_TEXT:]
            continue
        limit = _RECOMPILE_LIMIT.search(line)
        if limit is not None:
            limits.append(_limit(int(limit.group(1)), lines[i + 1:i + 6]))
            continue
        fallback = _FALLBACK.search(line)
        if fallback is not None:
            why = (fallback.group(2) or "").split(". ", 1)[0].strip().rstrip(".")  # the reason, not the advice
            fallbacks.setdefault(fallback.group(1), why[:MAX_TEXT])
            continue
        skip = _CUDAGRAPH_SKIP.search(line)
        if skip is not None:
            skips.setdefault(skip.group(1).strip()[:MAX_TEXT], None)
    return StderrFacts(deaths=tuple(deaths), checkpoint_no_grad=no_grad, checkpoint_no_grad_site=no_grad_site,
                       recompile_limits=tuple(limits), fallbacks=tuple(fallbacks.items()), cudagraph_skips=tuple(skips))


def _death(thread: str, following: list[str]) -> ThreadDeath:
    """The exception line and the innermost frames after a thread's header.

    Another thread's traceback may be interleaved with this one, even inside a line; a caret run glued in front
    of the exception line ("^RuntimeError: ...") is stripped. A line named like an exception (``...Error``) counts
    anywhere; any other ``Name: text`` only right after the frames (a program's own "Loss: 0.3" is not one)."""
    where = ""
    own = ""  # the innermost frame in the program's own code (where to look first)
    garbled = False
    for raw in following:
        frame = _FRAME.match(raw) or _FRAME.match("  " + _MARKS.sub("", raw))
        if frame is not None:
            where = f"{frame.group(1).rsplit('/', 1)[-1]}:{frame.group(2)} in {frame.group(3)}"
            if not is_library_file(frame.group(1)):
                own = where
            continue
        if _DEATH.search(raw):
            continue
        line = _MARKS.sub("", raw).strip()
        if raw.startswith((" ", "\t")) or not line or line.startswith("Traceback"):
            continue
        if _EXCEPTION_NAMED.match(line) or (where and not garbled and _EXCEPTION.match(line)):
            return ThreadDeath(thread=thread, exception=line[:MAX_TEXT], where=_where(own, where))
        garbled = True
    return ThreadDeath(thread=thread, exception="(exception text not found)", where=_where(own, where))


def _where(own: str, innermost: str) -> str:
    return innermost if not own or own == innermost else f"{own} (raised in {innermost})"


def _limit(limit: int, following: list[str]) -> RecompileLimit:
    function = reason = ""
    for line in following:
        if not function and (m := _LIMIT_FUNCTION.search(line)) is not None:
            function = f"{m.group(1)} ({m.group(2).rsplit('/', 1)[-1]})"
        elif not reason and (m := _LIMIT_REASON.search(line)) is not None:
            reason = m.group(1).strip()[:MAX_TEXT]
    return RecompileLimit(limit=limit, function=function, reason=reason)
