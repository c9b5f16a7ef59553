"""Where a stage spends its time, in the program's own code: the top functions (file:line, share). Pure.

A stage verdict without a cause must still say where the limiting stage's time goes. Each sample of the
stage's threads is charged to its innermost frame in the program's own code (not torch, not the standard
library: ``Linear.forward`` is not something the user can change, the line that calls it is). Samples where
the thread waits on the queue or sleeps are not the stage's work and are left out of the ranking, but the
share is of all the stage's samples, so the numbers say how much of the stage's time the function takes.

A stage can also be slow without working: its threads wait outside the queue (a socket, a file, a lock, a
sleep, another process). ``wait_spots`` ranks those samples the same way, so the verdict can say where.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from dflash_diag.model import Frame, NativeStack, ThreadSample, ThreadState
from dflash_diag.model.evidence import (
    ENV_LIBRARY,
    SourceFile,
    installed_dir,
    is_framework_dir,
    is_library_file,
    library_relative,
)
from dflash_diag.model.sched import EnvRead, SettingReading

NOT_WORK = frozenset({ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET, ThreadState.IDLE})


@dataclass(frozen=True, slots=True)
class HotSpot:
    function: str
    filename: str
    line: int  # the function's hottest line
    share: float  # of all the stage's samples
    line_share: float  # of all the stage's samples, at that line

    @property
    def site(self) -> str:
        return f"{self.filename.rsplit('/', 1)[-1]}:{self.line}"

    def __str__(self) -> str:
        return f"{self.function} ({self.site}) {100.0 * self.share:.0f}%"


def charge_frame(thread: ThreadSample) -> Frame | None:
    """The frame a sample is charged to: the innermost program frame, else the innermost Python frame."""
    python = [f for f in thread.frames if not f.native]
    own = next((f for f in python if not is_library_file(f.filename)), None)
    return own if own is not None else (python[0] if python else None)


def hot_functions(rows: Iterable[tuple[ThreadSample, ThreadState]], *, n: int = 3,
                  min_share: float = 0.05) -> tuple[HotSpot, ...]:
    """The ``n`` functions the samples spend most time in (at least ``min_share`` each), hottest first."""
    return _ranked(rows, lambda state: state not in NOT_WORK, n=n, min_share=min_share)


def wait_spots(rows: Iterable[tuple[ThreadSample, ThreadState]], *, n: int = 3,
               min_share: float = 0.05) -> tuple[HotSpot, ...]:
    """Where the samples wait outside the queue (idle: I/O, locks, sleeps), by the program's own frame."""
    return _ranked(rows, lambda state: state is ThreadState.IDLE, n=n, min_share=min_share)


QUEUE_WAITS = frozenset({ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET})


def time_spent(rows: Iterable[tuple[ThreadSample, ThreadState]], *, n: int = 50,
               min_share: float = 0.0) -> tuple[HotSpot, ...]:
    """Every function the samples spend time in, working or waiting outside the queue (a lock, a sleep, I/O), by
    the program's own frame: what one thread does that another of its stage does not. Time blocked on the
    pipeline's queue is left out: waiting for the other stage is not a thread's own slowness."""
    return _ranked(rows, lambda state: state not in QUEUE_WAITS, n=n, min_share=min_share)


def _ranked(rows: Iterable[tuple[ThreadSample, ThreadState]], counted: Callable[[ThreadState], bool], *,
            n: int, min_share: float) -> tuple[HotSpot, ...]:
    total = 0
    by_function: Counter[tuple[str, str]] = Counter()
    by_line: Counter[tuple[str, str, int]] = Counter()
    for thread, state in rows:
        total += 1
        if not counted(state):
            continue
        frame = charge_frame(thread)
        if frame is None:
            continue
        by_function[(frame.filename, frame.name)] += 1
        by_line[(frame.filename, frame.name, frame.line)] += 1
    if total == 0:
        return ()
    spots = []
    for (filename, name), count in by_function.most_common():
        if count / total < min_share or len(spots) >= n:
            break
        line, line_count = max(((ln, c) for (f, fn, ln), c in by_line.items() if f == filename and fn == name),
                               key=lambda lc: lc[1])
        spots.append(HotSpot(function=name, filename=filename, line=line, share=count / total,
                             line_share=line_count / total))
    return tuple(spots)


def spots_text(spots: Sequence[HotSpot]) -> str:
    return ", ".join(str(s) for s in spots)


# A library directory is named for a thread when its code is the innermost library code of this share of samples.
LIBRARY_SHARE = 0.4

def library_dirs(rows: Iterable[tuple[ThreadSample, ThreadState]], *, n: int = 2) -> tuple[tuple[str, float], ...]:
    """The installed packages' directories the rows' samples run in (each sample's innermost installed frame), with
    their share of the samples, hottest first; torch's own are left out (it is the framework, not a choice)."""
    counts: Counter[str] = Counter()
    total = 0
    for thread, _state in rows:
        total += 1
        where = _innermost_installed(thread)
        if where is not None and not is_framework_dir(where):
            counts[where] += 1
    return tuple((d, c / total) for d, c in counts.most_common(n)) if total else ()


def _innermost_installed(thread: ThreadSample) -> str | None:
    """The installed directory of the sample's innermost installed frame: where :func:`library_dirs` counts it."""
    return next((where for f in thread.frames if (where := installed_dir(f.filename)) is not None), None)


# The package's entry point is said when one function is the program's call into it in this share of its samples.
ENTRY_SHARE = 0.5


def library_entry(rows: Iterable[tuple[ThreadSample, ThreadState]], directory: str) -> tuple[str, float] | None:
    """The call the program makes into the installed package that ``directory`` belongs to, over the samples whose
    innermost installed code is in ``directory`` (as :func:`library_dirs` counts them): the outermost frame of that
    package in each, when one function is ``ENTRY_SHARE`` of them: (function, share). What the package does there
    is spread over its internals (a template compiler's visitors); the API the program called names the cost
    (``Environment.get_template`` against ``Template.render``)."""
    package = directory.split("/", 1)[0]
    counts: Counter[str] = Counter()
    total = 0
    for thread, _state in rows:
        if _innermost_installed(thread) != directory:
            continue
        total += 1
        outer = next((f for f in reversed(thread.frames) if not f.native
                      and (installed_dir(f.filename) or "").split("/", 1)[0] == package), None)
        if outer is not None:
            counts[outer.name] += 1
    if not total or not counts:
        return None
    function, count = counts.most_common(1)[0]
    return (function, count / total) if count / total >= ENTRY_SHARE else None


def library_call(rows: Iterable[tuple[ThreadSample, ThreadState]]) -> tuple[str, str, float] | None:
    """The library function the rows' working samples run in below the program's own code, when one holds
    ``LIBRARY_SHARE`` of all the rows: (function, its file as imported, share). The program's line that calls it is
    its own hot spot; the function is what that line costs (``random.random`` bound to ``SystemRandom.random``, a
    system call per draw). Only Python frames count (a C function shows as the program's line); torch's own and the
    tool's probes are left out (the framework: what it does is the rules' to judge)."""
    counts: Counter[tuple[str, str]] = Counter()
    total = 0
    for thread, state in rows:
        total += 1
        if state in NOT_WORK:
            continue
        python = [f for f in thread.frames if not f.native]
        if not python or not is_library_file(python[0].filename):
            continue
        if not any(not is_library_file(f.filename) for f in python):
            continue  # no program frame above it: the thread is the library's, not a call the program makes
        where = library_relative(python[0].filename)
        if where is None or is_framework_dir(where):
            continue
        counts[(python[0].name, where)] += 1
    if not total or not counts:
        return None
    (function, where), count = counts.most_common(1)[0]
    return (function, where, count / total) if count / total >= LIBRARY_SHARE else None


def library_file(rows: Iterable[tuple[ThreadSample, ThreadState]]) -> tuple[str, float] | None:
    """The library file (standard library or installed, as imported: ``json/encoder.py``) the rows' working samples
    run in, by each sample's innermost Python frame, when one holds ``LIBRARY_SHARE`` of all the rows: (file, share).
    Where no single function does: an encoder's nested generators split its time over several functions of one
    file, and a generator's frames are often all a sample shows (no program frame above it)."""
    counts: Counter[str] = Counter()
    total = 0
    for thread, state in rows:
        total += 1
        python = [f for f in thread.frames if not f.native]
        if state in NOT_WORK or not python or not is_library_file(python[0].filename):
            continue
        where = library_relative(python[0].filename)
        if where is not None and not is_framework_dir(where):
            counts[where] += 1
    if not total or not counts:
        return None
    where, count = counts.most_common(1)[0]
    return (where, count / total) if count / total >= LIBRARY_SHARE else None


# Waits of the threading module at the end of a call path are the wait itself, not where the path leads.
_PATH_TAIL_WAITS = frozenset({"threading.py"})


def library_path(rows: Iterable[tuple[ThreadSample, ThreadState]]) -> tuple[tuple[Frame, ...], float] | None:
    """The chain of library calls the rows' samples share below the program's own code, outermost first, as far
    down as ``LIBRARY_SHARE`` of all the rows still run through it: (frames, share of the rows). None when it is
    shorter than two calls (the program's line already shows its own call), or ends in torch's code (the
    framework: its ops are the rules' to judge) or outside the standard library and installed packages; a
    threading wait at its end is cut off (the wait itself, not where the path leads). Waits count (a handshake's
    socket read is the call's cost) but not the pipeline's queue: what one line costs can sit several libraries
    deep, spread over functions no single one of which holds the share (``Queue.get`` unpickling each tensor
    through a resource-sharer connection). Only Python frames: a C function shows as the line that calls it."""
    chains: list[list[Frame]] = []
    total = 0
    for thread, state in rows:
        total += 1
        if state in QUEUE_WAITS:
            continue
        python = [f for f in thread.frames if not f.native]
        own_at = next((i for i, f in enumerate(python) if not is_library_file(f.filename)), None)
        if own_at:  # None: no program frame (a library's own thread); 0: the program's own code on top
            chains.append(python[:own_at][::-1])
    path: list[Frame] = []
    share = 0.0
    while chains:
        depth = len(path)
        counts = Counter((c[depth].filename, c[depth].name) for c in chains if len(c) > depth)
        if not counts:
            break
        key, count = counts.most_common(1)[0]
        if count / total < LIBRARY_SHARE:
            break
        chains = [c for c in chains if len(c) > depth and (c[depth].filename, c[depth].name) == key]
        path.append(chains[0][depth])
        share = count / total
    while path and path[-1].short_filename in _PATH_TAIL_WAITS:
        path.pop()
    if len(path) < 2:
        return None
    deepest = library_relative(path[-1].filename)  # None: the probes' own code, a generated or frozen module
    if deepest is None or is_framework_dir(deepest):
        return None
    return tuple(path), share


def path_text(path: Sequence[Frame]) -> str:
    """"Queue.get (multiprocessing/queues.py) > rebuild_storage_fd (torch/multiprocessing/reductions.py) > Client >
    ... > Connection._recv (multiprocessing/connection.py)": the call that enters each file, its file once, and
    the deepest call."""
    groups = [list(group) for _, group in groupby(path, key=lambda f: f.filename)]
    parts = []
    for i, group in enumerate(groups):
        where = library_relative(group[0].filename) or group[0].short_filename
        names = group[0].name
        if i == len(groups) - 1 and len(group) > 1:
            names += (" > " if len(group) == 2 else " > ... > ") + group[-1].name
        parts.append(f"{names} ({where})")
    return " > ".join(parts)


def library_place(rows: Iterable[tuple[ThreadSample, ThreadState]], *, of: str = "its samples") -> str:
    """"inside sympy/core (70% of its samples)" when one installed package holds ``LIBRARY_SHARE``; else "inside
    SystemRandom.random (random.py, 55% of its samples)" when one library function does; else "inside
    json/encoder.py (80% of its samples)" when one library file does; else "through Queue.get (...) > ... (45% of
    its samples)" when one chain of library calls does (:func:`library_path`); else "". ``of`` names what the rows
    are ("its working samples" when the caller left its waits out)."""
    rows = list(rows)
    dirs = [(d, share) for d, share in library_dirs(rows, n=1) if share >= LIBRARY_SHARE]
    if dirs:
        entry = library_entry(rows, dirs[0][0])
        through = f", entered through {entry[0]} ({100.0 * entry[1]:.0f}% of them)" if entry else ""
        return f"inside {dirs[0][0]} ({100.0 * dirs[0][1]:.0f}% of {of}){through}"
    call = library_call(rows)
    if call:
        return f"inside {call[0]} ({call[1]}, {100.0 * call[2]:.0f}% of {of})"
    file = library_file(rows)
    if file:
        return f"inside {file[0]} ({100.0 * file[1]:.0f}% of {of})"
    path = library_path(rows)
    return f"through {path_text(path[0])} ({100.0 * path[1]:.0f}% of {of})" if path else ""


def library_text(rows: Iterable[tuple[ThreadSample, ThreadState]], *, of: str = "its samples") -> str:
    """", most of it inside sympy/core (70% of its samples)", after a hot spot: :func:`library_place`, or ""."""
    place = library_place(rows, of=of)
    return f", most of it {place}" if place else ""


def work_library_text(rows: Iterable[tuple[ThreadSample, ThreadState]]) -> str:
    """:func:`library_text` out of the samples the thread works in, said so: a pool worker idle between jobs half
    the window would hide a library that is most of its work."""
    rows = list(rows)
    working = [row for row in rows if row[1] not in NOT_WORK]
    return library_text(working, of="its working samples") if working else library_text(rows)


READ_DIR_SHARE = 0.1  # an installed directory whose settings read are said: this share of the samples run in it


def _busy_dirs(rows: Iterable[tuple[ThreadSample, ThreadState]]) -> set[str]:
    """The installed directories the rows' samples run in, each in ``READ_DIR_SHARE`` of them or more: where a
    setting that code reads is said."""
    return {d for d, share in library_dirs(rows, n=3) if share >= READ_DIR_SHARE}


def reads_text(reads: Sequence[EnvRead], rows: Iterable[tuple[ThreadSample, ThreadState]]) -> str:
    """"; sympy/core/cache.py there reads SYMPY_CACHE_SIZE=16 from the environment" for the process's environment
    variables named by the installed code the rows' samples run in (``Observation.env_reads``), or ""."""
    if not reads:
        return ""
    dirs = _busy_dirs(rows)
    said = [f"{r.reader} there reads {r.name}={r.value}" for r in reads if r.reader.rsplit("/", 1)[0] in dirs]
    return f"; {', '.join(said[:3])} from the environment" if said else ""


def changes_text(changes: Sequence[SettingReading], rows: Iterable[tuple[ThreadSample, ThreadState]]) -> str:
    """"; there SortedList.DEFAULT_LOAD_FACTOR is 16 at run time (1000 in sortedcontainers/sortedlist.py)" for the
    library constants the program changed (``analysis.settings.library_changes``: ``detail`` is the file) in the
    code the rows' samples run in: an installed directory with ``READ_DIR_SHARE`` of them, or the library function
    they spend most in. "" otherwise: a changed constant of code that does not run is only listed."""
    if not changes:
        return ""
    rows = list(rows)
    dirs = _busy_dirs(rows)
    call = library_call(rows)
    said = [f"{c.name} is {c.value} at run time ({c.default} in {c.detail})" for c in changes
            if c.detail.rsplit("/", 1)[0] in dirs or (call is not None and c.detail == call[1])]
    return f"; there {', '.join(said[:3])}" if said else ""


# A library is where the rows run when this share of their working samples has a frame of it (Python or native).
PASSED_LIBRARY_SHARE = 0.1
PASSED_SHOWN = 3
_LIBRARY_STEM = re.compile(r"^(lib)?_*([A-Za-z][A-Za-z0-9_]*)")


def native_library_top(filename: str) -> str:
    """The module name a native library's file stands for: an installed package's extension by its package
    (``numpy/_core/_multiarray_umath...so`` -> ``numpy``, as py-spy names it relative to site-packages); else by
    the file's stem (``libsqlite3.so.0.8.6``, ``_sqlite3.cpython-311-...so`` -> ``sqlite3``); "" for none."""
    if "/" in filename and not filename.startswith("/"):
        return filename.split("/", 1)[0].lower()
    match = _LIBRARY_STEM.match(filename.rsplit("/", 1)[-1])
    return match[2].lower() if match else ""


def _python_library_top(filename: str) -> str | None:
    """The top module of a library's Python file (the standard library's or an installed package's: ``json``,
    ``httpx``, ``queue``); None for the program's own files and torch's."""
    rel = library_relative(filename)
    if rel is None or rel.startswith("<") or is_framework_dir(rel):
        return None
    return rel.split("/", 1)[0].removesuffix(".py")


def running_libraries(rows: Sequence[tuple[ThreadSample, ThreadState]], stacks: Iterable[NativeStack]) -> set[str]:
    """The top modules of the installed packages (Python frames) and native libraries (doctor's native look of the
    rows' threads) that ``PASSED_LIBRARY_SHARE`` of the rows' samples are in, working or waiting inside the
    library's call (a batch encoded by the library's own pool: the calling thread waits in it); a wait on the
    program's queue is no library's."""
    working = [t for t, state in rows if state not in (ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET)]
    python, native = library_shares(working, stacks)
    found = {lib for lib, share in (*python.items(), *native.items()) if lib and share >= PASSED_LIBRARY_SHARE}
    return found - FRAMEWORK_LIBRARIES


def library_shares(samples: Sequence[ThreadSample], stacks: Iterable[NativeStack]
                   ) -> tuple[dict[str, float], dict[str, float]]:
    """Each library's share of ``samples`` with a Python frame in it (by its top module), and of the native
    ``stacks``' samples with a native frame in it (``native_library_top``; "" for a frame of no library)."""
    counts: Counter[str] = Counter()
    for sample in samples:
        counts.update({top for f in sample.frames if not f.native and (top := _python_library_top(f.filename))})
    python = {lib: n / len(samples) for lib, n in counts.items()} if samples else {}
    native_stacks = list(stacks)
    total = sum(s.count for s in native_stacks)
    counts = Counter()
    for stack in native_stacks:
        for lib in {native_library_top(f.filename) for f in stack.frames if f.native}:
            counts[lib] += stack.count
    native = {lib: n / total for lib, n in counts.items()} if total else {}
    return python, native


# torch's own libraries and the interpreter's: the framework and the language, whose settings the catalogues judge.
FRAMEWORK_LIBRARIES = frozenset({"torch", "torch_cpu", "torch_python", "torch_cuda", "c10", "python3", "c", "pthread",
                                 "stdc", "gomp", "iomp5", "mkl_rt", "openblas", "m", "ld"})


def _runs_in(library: str, running: set[str]) -> bool:
    """``library`` (an import's top module) is one of ``running``: by name, or a native library named after it
    (``pydantic`` for ``pydantic_core``)."""
    return library.lower() in running or (len(library) >= 4 and any(r.startswith(library.lower()) for r in running))


_OFF_VALUES = frozenset({"0", "0.0", "false", "", "none", "off", "no", "never", "disabled"})


def is_off_value(value: str) -> bool:
    """A literal as Python writes it that turns an option off: 0, False, '', 'none', 'off', 'no', 'never'..."""
    return value.strip("'\"").lower() in _OFF_VALUES


def declared_default_text(files: Sequence[SourceFile], key: str) -> str:
    """"; the code's default 'greedy' at settings.py:28" where the program's code declares a default for ``key``
    that the run's configuration sets otherwise (``SourceFile.overridden``); "" elsewhere."""
    for file in files:
        for d in file.overridden:
            if d.name == key:
                return f"; the code's default {d.default} at {file.path.rsplit('/', 1)[-1]}:{d.line}"
    return ""


DEPARTURES_SHOWN = 2
# Keys that name or place a run rather than set how it runs (a profile's name, a seed, a path): a profile always
# changes them, and beside a stage's time they are noise. They stay listed among the settings.
_LABEL_KEY = re.compile(r"^(name|title|label|tags?|id|seed|description|desc|comment|notes?|version|project|"
                        r"experiment|group|user|run)$|_(name|id|seed|dir|url|uri)$", re.IGNORECASE)


def is_label_key(name: str) -> bool:
    """A configuration key that names or places a run (``name``, ``seed``, ``data_dir``), not how it runs."""
    return bool(_LABEL_KEY.search(name))


def departures_text(files: Sequence[SourceFile], rows: Sequence[tuple[ThreadSample, ThreadState]]) -> str:
    """"; this code reads a value the run's configuration sets away from the code's default: `contraction_path` =
    'none' in run.toml (the code's default 'greedy' at settings.py:28), read at featurize.py:29" for the values the
    program's files declare a default for and the configuration sets otherwise (``SourceFile.overridden``) that a
    file the rows' samples are in reads (``SourceFile.reads_departures``), an option turned off first, at most
    DEPARTURES_SHOWN; "" where none. What the value does is not known here: said beside the time, never as a cause.
    A key already said as an argument passed to a library (``passed_text``) is not said twice."""
    hot = {fr.filename for t, _ in rows for fr in t.frames if not fr.native}
    said = read_departures(files, [f for f in files if f.path in hot and not f.run_by])
    return f"; this code reads {said}" if said else turned_off_text(files)


def turned_off_text(files: Sequence[SourceFile]) -> str:
    """"; the run's configuration turns off what the code has on: `discriminator` = '' in run.toml (the code's
    default 'kind' at survey_config.py:8: field that tags each record)" for the declared defaults that are on and
    that the configuration sets to an off value (0, False, '', 'none', 'off'...): a cache, a planner, an index or a
    tag switched off is the commonest way a profile slows the code, wherever the code reading it runs. At most
    DEPARTURES_SHOWN; "" where none."""
    passed = {u.key for f in files for u in f.passed}  # said as a library's argument already
    off = [(f, d) for f in files for d in f.overridden
           if is_off_value(d.configured) and not is_off_value(d.default) and d.name not in passed]
    if not off:
        return ""
    texts = [f"`{d.name}` = {d.configured} in {d.configured_in} (the code's default {d.default} at "
             f"{f.path.rsplit('/', 1)[-1]}:{d.line}" + (f": {d.note}" if d.note else "") + ")"
             for f, d in off[:DEPARTURES_SHOWN]]
    return "; the run's configuration turns off what the code has on: " + "; ".join(texts)


def read_departures(files: Sequence[SourceFile], readers: Sequence[SourceFile]) -> str:
    """"a value the run's configuration sets away from the code's default: ..., read at tileserver.py:40" for the
    changed values (``SourceFile.overridden`` of any of ``files``) that ``readers`` read; "" where none."""
    departed = {d.name: (f, d) for f in files for d in f.overridden}
    if not departed:
        return ""
    passed = {u.key for f in files for u in f.passed}
    found: dict[str, tuple[SourceFile, int]] = {}
    for file in readers:
        for name, line in file.reads_departures:
            if name in departed and name not in passed and not is_label_key(name):
                found.setdefault(name, (file, line))
    if not found:
        return ""
    ordered = sorted(found, key=lambda n: not is_off_value(departed[n][1].configured))[:DEPARTURES_SHOWN]
    texts = []
    for name in ordered:
        declared_in, d = departed[name]
        reader, line = found[name]
        texts.append(f"`{name}` = {d.configured} in {d.configured_in} (the code's default {d.default} at "
                     f"{declared_in.path.rsplit('/', 1)[-1]}:{d.line}), read at {reader.path.rsplit('/', 1)[-1]}:{line}")
    many = len(texts) > 1
    return (f"{'values' if many else 'a value'} the run's configuration sets away from the code's "
            f"default{'s' if many else ''}: " + "; ".join(texts))


def program_env_text(names: Sequence[str], files: Sequence[SourceFile],
                     rows: Sequence[tuple[ThreadSample, ThreadState]], stacks: Iterable[NativeStack]) -> str:
    """"; the program set POLARS_MAX_THREADS in its own environment at run time (from `polars_threads` = 1 in
    run.toml), a variable named after polars, which holds this time" for the variables outside the catalogue the
    program set since it started (``OsFacts.env_set_by_program``) whose name's first word names a library the rows'
    samples run in; the value only where the program's code exports it from a configuration key the files on its
    command line set (``SourceFile.passed``, library ENV_LIBRARY). What the variable does is not known here: said as
    what the process runs with, never as a cause."""
    if not names:
        return ""
    running = running_libraries(rows, stacks)
    exported = {u.name: u for f in files for u in f.passed if u.library == ENV_LIBRARY and u.configured_in}
    said = []
    for name in names:
        word = name.split("_", 1)[0].lower()
        library = next((r for r in sorted(running) if len(word) >= 3 and (r.startswith(word) or word in r)), None)
        if library is None:
            continue
        use = exported.get(name)
        source = f" (from `{use.key}` = {use.value} in {use.configured_in}" \
                 f"{declared_default_text(files, use.key)})" if use is not None else ""
        said.append(f"{name}{source}, a variable named after {library}, which holds this time")
    return f"; the program set in its own environment at run time {'; '.join(said[:2])}" if said else ""


def passed_text(files: Sequence[SourceFile], rows: Sequence[tuple[ThreadSample, ThreadState]],
                stacks: Iterable[NativeStack]) -> str:
    """"; the program passes to tokenizers from its configuration: models.BPE(dropout=0.3 (`bpe_dropout` in
    run.toml)) at subwords.py:21" for the arguments the program's files pass, from a configuration key the files on
    its command line set, to a library the rows' working samples run in (``SourceFile.passed``), or "". A setting of
    that library whose effect is not known here: said as what the process runs with, never as a cause."""
    uses = [(f, u) for f in files if not f.run_by for u in f.passed]  # another process's script: not these rows'
    if not uses:
        return ""
    running = running_libraries(rows, stacks)
    said: dict[str, list[str]] = {}
    # An argument passed on a line the rows' samples stand on first (the call their time is in), then an option
    # turned off (0, False, '', 'none', 'off'): a cache, a planner or a tag switched off is the commonest way a
    # configuration slows a library; the order is a reading aid, never a verdict.
    sampled = Counter((fr.filename, fr.line) for t, _ in rows for fr in t.frames if not fr.native)
    for file, use in sorted(uses, key=lambda fu: (-sampled[(fu[0].path, fu[1].line)], not is_off_value(fu[1].value))):
        if _runs_in(use.library, running):
            if use.via:  # computed from the key: the name passed, then the key's value
                argument = f"{use.name}={use.via}" if use.name else use.via
                source = f"`{use.key}` = {use.value} in {use.configured_in}"
            else:
                argument = f"{use.name}={use.value}" if use.name else use.value  # "": a positional argument
                source = f"`{use.key}` in {use.configured_in}"
            source += declared_default_text(files, use.key)
            said.setdefault(use.library, []).append(
                f"{use.call}({argument} ({source})) at {file.path.rsplit('/', 1)[-1]}:{use.line}")
    return "".join(f"; the program passes to {lib} from its configuration: {', '.join(texts[:PASSED_SHOWN])}"
                   for lib, texts in list(said.items())[:2])
