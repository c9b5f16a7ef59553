"""Where a thread's time goes below its Python frames: the native (C/C++) code of a native profile. Pure.

A stack sample ends at the Python line that called into C: ``features (invoices.py:40)`` says which line, not
that the time goes to decimal's 120-digit arithmetic, to QNNPACK's SSE2 kernels or to a generic BLAS. The native
profile (``model.NativeProfile``) has the frames below that line; this module charges each of a thread's samples
to the C/C++ entry its Python line called (the first frame below it that is not the binding's plumbing: pybind11,
torch's dispatcher and autograd wrappers, the interpreter) and to the innermost frame (where the CPU was), and
groups entries by the source file or library they are in when no single entry holds enough of the time.

The profile has the samples of waiting threads too (``py-spy record --idle``). A sample where the thread waits (a
condition variable, a futex, a sleep, a poll) is not its work: shares of code are of the samples where the thread
works, as py-spy's own active samples were. One wait is told apart: the GIL's. A thread waiting for the GIL sleeps in
a condition wait right below the interpreter or the binding that releases it around a call (``take_gil``,
``PyEval_RestoreThread``, pybind11's ``gil_scoped_*``, torch's ``THPVariable_*`` wrappers returning to Python); its
Python-level sample shows only the call (py-spy's ``owns_gil`` misses most of these waits), so ``gil_waits`` counts
them from the native stacks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from dflash_diag.model import Frame, NativeProfile, NativeStack, Severity
from dflash_diag.model.analysis import PHASE_STEADY, Analysis
from dflash_diag.model.findings import SYMPTOM

MIN_SPOT_SHARE = 0.15  # an entry named on its own
MIN_UNIT_SHARE = 0.25  # a file or library named for the entries in it
UNIT_OVER_ENTRY = 1.5  # a group is named instead of its hottest entry when it holds this much more
MIN_SAMPLES = 10  # fewer native samples of the threads than this say nothing

# Frames that only pass a call on: the binding, torch's dispatcher and autograd wrappers, the interpreter.
_PLUMBING = re.compile(
    r"^(0x[0-9a-f]+$|pybind11::|c10::impl::|c10::Dispatcher|c10::function_ref|c10::KernelFunction|c10::Boxed|"
    r"c10::OperatorHandle|torch::jit::|std::|at::_ops::|at::wrapper_|at::\w+::wrapper_|"
    r"torch::autograd::|THPVariable_|THPEngine_|"
    r"at::TensorIteratorBase::|at::internal::invoke_parallel|at::parallel_for|GOMP_|cfunction_|method_vectorcall|"
    r"_?Py(Eval|Object|Function|CFunction|Vectorcall|Method|Call|Run|Frame|Thread|Number|Sequence|Iter|Type|Descr|"
    r"Cell|Gen|Coro|Unicode|Long|Float|Dict|List|Tuple|Bytes|Import|Module|Code)_|_?PyEval|"
    r"vectorcall|slot_tp_|call_function|_call_function|thread_run|start_thread|clone3?$|__libc_start)")
_PLUMBING_LIBRARIES = re.compile(r"^(libpython[\d.]*\.so|libc\.so|libpthread\.so|ld-linux)")
# Where a thread waits rather than works (its time there is not native work).
_WAITING = re.compile(
    r"(pthread_cond_(timed)?wait|sem_(timed)?wait|futex|take_gil|PyThread_acquire_lock|lock_PyThread_acquire_lock|"
    r"^(__)?(poll|ppoll|select|pselect6?|epoll_wait|epoll_pwait|nanosleep|clock_nanosleep|accept4?|recv|recvfrom|"
    r"wait4|waitpid|sigtimedwait|pause|usleep|sleep)$|^syscall$|time_sleep)")
# The condition wait a thread sleeps in while it waits for the GIL (CPython's take_gil; drop_gil's wait for the
# thread it handed the GIL to), and what calls it then: the interpreter, or a binding taking the GIL back after a
# call that released it (a Python frame right above it is the interpreter's eval loop, which py-spy shows as Python).
_CONDITION_WAIT = re.compile(r"^(pthread_cond_(timed|clock)?wait|take_gil|drop_gil)")
_GIL_MECHANISM = re.compile(r"(take_gil|drop_gil|PyEval_|PyGILState_Ensure|gil_scoped_(acquire|release))")
_LOCK_WAIT = re.compile(r"(PyThread_acquire_lock|lock_PyThread|acquire_timed|semlock|PyMutex|PyEvent|PySemaphore)")
# Python's bindings: a condition wait right below one of their functions is the GIL taken back after the call
# released it (``Py_END_ALLOW_THREADS``, inlined there): torch's THPVariable_* wrappers and libtorch_python, a C
# extension module (``_hashopenssl.c``, ``_regex.c``, ``foo.cpython-311-x86_64-linux-gnu.so``).
_GIL_BINDING = re.compile(r"^(torch::autograd::)?THP\w*")
_BINDING_LIBRARY = re.compile(r"(^libtorch_python\.so|\.cpython-[\w-]+\.so$|^_?\w+\.c$|^_?\w+\.c\.h$)")
# Libraries that hold too much to be named for their entries (an entry in them is named on its own).
_TOO_BROAD = re.compile(r"^(libtorch(_cpu|_cuda|_python)?\.so|libc10(_cuda)?\.so|libpython)")


@dataclass(frozen=True, slots=True)
class NativeSpot:
    """A C/C++ entry (or the file/library of several) and the share of the threads' samples in it."""

    what: str  # the entry's short name, or "<file>" for a group of entries
    where: str  # its library or source file
    share: float  # of all the threads' samples
    leaf: str  # where the CPU was most often under it (short name, or the library of an unnamed address)
    entries: tuple[str, ...] = ()  # for a file/library group: its largest entries

    def __str__(self) -> str:
        under = f" ({', '.join(self.entries)})" if self.entries else ""
        leaf = f", mostly in {self.leaf}" if self.leaf and self.leaf != self.what and not self.entries else ""
        where = f" [{self.where}]" if self.where and self.where != self.what else ""
        return f"{self.what}{where}{under} {100.0 * self.share:.0f}%{leaf}"


def thread_stacks(profile: NativeProfile | None, tids: Collection[int]) -> tuple[NativeStack, ...]:
    """The profile's stacks of the threads ``tids`` (kernel TIDs)."""
    if profile is None:
        return ()
    return tuple(s for s in profile.stacks if s.os_thread_id in tids)


def native_spots(stacks: Iterable[NativeStack], *, n: int = 2) -> tuple[NativeSpot, ...]:
    """The C/C++ code the stacks spend most time in, hottest first: entries of ``MIN_SPOT_SHARE`` or more, else the
    file or library (not libtorch's or the interpreter's: too broad) holding ``MIN_UNIT_SHARE`` of them."""
    total = 0
    entries: Counter[tuple[str, str]] = Counter()
    leaves: dict[tuple[str, str], Counter[str]] = {}
    for stack in stacks:
        if is_waiting(stack.frames):
            continue
        total += stack.count
        entry, leaf = _entry_and_leaf(stack.frames)
        if entry is None:
            continue
        key = (short_name(entry.name), library_name(entry.filename))
        entries[key] += stack.count
        leaves.setdefault(key, Counter())[leaf] += stack.count
    if total < MIN_SAMPLES:
        return ()
    spots = [NativeSpot(what=name, where=where, share=count / total, leaf=leaves[(name, where)].most_common(1)[0][0])
             for (name, where), count in entries.most_common() if count / total >= MIN_SPOT_SHARE][:n]
    units = _unit_spots(entries, leaves, total, n=n)
    # A file or library whose entries together hold much more than the hottest one (decimal's add, multiply,
    # divide and square root, each a fifth) says where the time goes better than any one of them.
    if units and (not spots or units[0].share >= UNIT_OVER_ENTRY * spots[0].share):
        return units
    return tuple(spots)


def _unit_spots(entries: Counter[tuple[str, str]], leaves: dict[tuple[str, str], Counter[str]], total: int, *,
                n: int) -> tuple[NativeSpot, ...]:
    units: Counter[str] = Counter()
    for (_, where), count in entries.items():
        if where and not _TOO_BROAD.match(where):
            units[where] += count
    out = []
    for unit, count in units.most_common(n):
        if count / total < MIN_UNIT_SHARE:
            break
        members = [name for (name, where), _ in entries.most_common() if where == unit][:3]
        leaf = Counter[str]()
        for (_entry, where), c in leaves.items():
            if where == unit:
                leaf.update(c)
        out.append(NativeSpot(what=unit, where=unit, share=count / total, leaf=leaf.most_common(1)[0][0],
                              entries=tuple(members)))
    return tuple(out)


def below_python(frames: tuple[Frame, ...]) -> list[Frame]:
    """The C/C++ frames below the innermost Python frame, innermost first."""
    below: list[Frame] = []
    for frame in frames:  # innermost first
        if not frame.native:
            break
        below.append(frame)
    return below


def _entry_and_leaf(frames: tuple[Frame, ...]) -> tuple[Frame | None, str]:
    """The first non-plumbing C/C++ frame below the innermost Python frame of a working sample (``is_waiting`` tells
    the others), and the innermost frame's short name; (None, "") when it has no C/C++ frame below its Python."""
    below = below_python(frames)
    if not below:
        return None, ""
    for frame in reversed(below):  # the outermost C frame first: the one the Python line called
        if not _plumbing(frame):
            return frame, _leaf_name(below[0])
    return None, ""


def _plumbing(frame: Frame) -> bool:
    return bool(_PLUMBING.match(frame.name) or _PLUMBING_LIBRARIES.match(library_name(frame.filename))
                or _PLUMBING.match(short_name(frame.name)))


def _leaf_name(frame: Frame) -> str:
    """The innermost frame's short name; an address or a frame py-spy could not name is said by its library (or as
    unnamed code, where py-spy could not tell the library either: "0x7f.. (?)")."""
    if not is_named(frame):
        library = library_name(frame.filename)
        return library if library not in ("", "?") else "code py-spy could not name"
    return short_name(frame.name)


def library_name(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


_TEMPLATE = re.compile(r"<[^<>]*>")
_ARGS = re.compile(r"\([^()]*\)")


def short_name(symbol: str) -> str:
    """A C++ symbol without its templates, argument lists and anonymous namespaces, at most its last three scopes:
    ``at::native::(anonymous namespace)::slow_conv2d_forward_out_cpu<float>(...)`` -> ``at::native::
    slow_conv2d_forward_out_cpu``."""
    name = symbol.replace("(anonymous namespace)::", "")
    for _ in range(8):  # nested templates, innermost first
        stripped = _TEMPLATE.sub("", name)
        if stripped == name:
            break
        name = stripped
    for _ in range(4):
        stripped = _ARGS.sub("", name)
        if stripped == name:
            break
        name = stripped
    name = name.split(" ")[-1] if " " in name and "operator" not in name else name
    scopes = [s for s in name.split("::") if s]
    return "::".join(scopes[-3:])[:120] if scopes else symbol[:120]


def share_in(stacks: Iterable[NativeStack], code: re.Pattern[str], *, waits: bool = False) -> tuple[float, int]:
    """(share of the stacks' working samples with a C/C++ frame whose name or file matches ``code``, working
    samples): the time a setting that slows that code is weighed by. ``waits``: of all the samples, waiting ones
    included (code that waits: a poll)."""
    total = hits = 0
    for stack in stacks:
        if not waits and is_waiting(stack.frames):
            continue
        total += stack.count
        if any(f.native and (code.search(f.name) or code.search(f.filename)) for f in stack.frames):
            hits += stack.count
    return (hits / total if total else 0.0), total


def wants_native_look(analysis: Analysis) -> bool:
    """Whether a live window's report names no cause, so native stacks may say where the time goes: its headline is
    a symptom below critical with no cause linked (a stage verdict, where the time goes) or only information linked
    (a cause below a warning), or there is none; the
    process still runs steadily (not warming up, stopped or hung) and has no native profile yet."""
    obs = analysis.observation
    if obs.native is not None or not obs.process_alive or not obs.stacks or analysis.phase != PHASE_STEADY:
        return False
    head = analysis.headline
    if head is None:
        return True
    if looks_below(analysis):
        return True  # the headline's cause leaves its time at a line's C call: the look says what that call runs
    if head.severity >= Severity.CRITICAL or (head.because and head.severity >= Severity.WARNING):
        return False  # a cause below a warning (information) is not one found: the look may say more
    lead = next((f for f in analysis.findings if f.rule_id == head.rule_id), None)
    return lead is not None and lead.kind == SYMPTOM


def looks_below(analysis: Analysis) -> bool:
    """The headline's finding, or a cause it names, leaves a thread's time at a program line's C call
    (``Finding.looks_below``), where only native stacks say what that call runs."""
    head = analysis.headline
    if head is None:
        return False
    named = {head.rule_id, *head.because}
    return any(f.looks_below for f in analysis.findings if f.rule_id in named)


def spots_text(spots: Iterable[NativeSpot]) -> str:
    return ", ".join(str(s) for s in spots)


def native_text(profile: NativeProfile | None, tids: Collection[int]) -> str:
    """"in native code: <spots>" for the threads ``tids`` (kernel TIDs), or "" when the profile says nothing."""
    spots = native_spots(thread_stacks(profile, tids))
    return f"in native code: {spots_text(spots)}" if spots else ""


# ATen's kernels and the math libraries under them run with the GIL released: a GIL holder's samples there are not
# what it holds the GIL for.
_GIL_FREE_LIBRARIES = ("libtorch_cpu", "libtorch_cuda", "libc10", "libmkl", "libgomp", "libiomp", "libcudnn",
                       "libcublas")


def holder_native_text(profile: NativeProfile | None, tids: Collection[int]) -> str:
    """"its native samples: load [_pickle.c] 100%, mostly in read" for a GIL holder's threads ``tids``: the C code
    under its Python line (an unpickler, a JSON scanner, an import's path search), leaving out torch's kernels and
    the math libraries (they release the GIL); "" when the profile says nothing else."""
    spots = [s for s in native_spots(thread_stacks(profile, tids)) if not s.where.startswith(_GIL_FREE_LIBRARIES)]
    return f"its native samples: {spots_text(spots)}" if spots else ""




@dataclass(frozen=True, slots=True)
class GilWaits:
    """How often a thread's native samples wait for the GIL, and where (what took the GIL back, hottest first)."""

    samples: int  # all the thread's samples, waiting ones included
    waiting: int  # those waiting for the GIL
    at: tuple[tuple[str, int], ...] = ()  # (what waited: the call returning to Python, or the interpreter; samples)

    @property
    def share(self) -> float:
        return self.waiting / self.samples if self.samples else 0.0

    @property
    def takers(self) -> str:
        """"THPVariable_linear, the interpreter": what took the GIL back, hottest first."""
        return ", ".join(name for name, _ in self.at)


def gil_waits(stacks: Iterable[NativeStack]) -> GilWaits:
    """The stacks' samples that wait for the GIL (``GilWaits``)."""
    total = waiting = 0
    at: Counter[str] = Counter()
    for stack in stacks:
        total += stack.count
        taker = _gil_taker(stack.frames)
        if taker is not None:
            waiting += stack.count
            at[taker] += stack.count
    return GilWaits(samples=total, waiting=waiting, at=tuple(at.most_common(3)))


def is_named(frame: Frame) -> bool:
    """py-spy could name the frame (not a bare address of a stripped library, not "?")."""
    return bool(frame.name) and not frame.name.startswith("0x") and frame.name != "?"


def _named(frames: tuple[Frame, ...]) -> list[Frame]:
    """The frames py-spy could name (an unnamed libc or libpython address is an internal step of the wait)."""
    return [f for f in frames if is_named(f)]


def _gil_taker(frames: tuple[Frame, ...]) -> str | None:
    """What waits for the GIL in this sample (the call that takes it back, or "the interpreter"), or None."""
    named = _named(frames)
    if len(named) < 2 or not named[0].native or not _CONDITION_WAIT.match(named[0].name):
        return None
    mechanism = False  # a frame of the GIL's own (take_gil, pybind11's gil_scoped_*, the interpreter's) seen
    for frame in named[1:]:
        library = library_name(frame.filename)
        if not frame.native:
            return "the interpreter"  # the eval loop switching threads, shown as the Python frame it runs
        if _GIL_MECHANISM.search(frame.name):
            mechanism = True
        elif _LOCK_WAIT.search(frame.name):
            return None  # a Python lock (a queue's, an event's): the thread waits for another thread, not the GIL
        elif _CONDITION_WAIT.match(frame.name) or library.startswith(("libpython", "libc.so", "libpthread")):
            continue  # the interpreter's and libc's own steps of the wait
        elif mechanism or _GIL_BINDING.match(frame.name) or _BINDING_LIBRARY.search(library):
            return short_name(frame.name)
        else:
            return None  # a condition wait of the library's own (a thread pool, a queue): not the GIL's
    return "the interpreter" if mechanism else None


def is_waiting(frames: tuple[Frame, ...]) -> bool:
    """Whether the sample waits (the GIL, a condition, a futex, a sleep, a poll) rather than works."""
    return any(_WAITING.search(f.name) for f in below_python(frames)) or _gil_taker(frames) is not None


__all__ = ["MIN_SAMPLES", "GilWaits", "NativeSpot", "below_python", "gil_waits", "is_named", "is_waiting", "library_name",
           "native_spots", "native_text", "share_in", "short_name", "spots_text", "thread_stacks", "wants_native_look"]
