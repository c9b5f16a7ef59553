"""What the process and its files show from outside, beside the stacks: the process's run state and start time,
its stderr (when it goes to a readable file), and what the source files on disk say about the sampled frames.

Read by ``sources.outside``; judged by ``analysis`` (stale code, thread deaths, torch warnings, queue roles).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

# Installed libraries and the interpreter's own modules are not the program's code: never "stale", never hot code
# the user can change, never a stage's entry point.
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/",
                    # code torch generates at run time (inductor's output modules, triton's launchers)
                    "/torchinductor_", "/.triton/", "/triton/cache/")
_PYLIB = re.compile(r"python3\.\d+t?")


def _probes_dir() -> str | None:
    """This distribution's ``probes`` package, beside ``dflash_diag`` (not whatever ``probes`` a user's path holds):
    its frames are the tool's own, never the program's hot code, even in a source checkout."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidate = os.path.join(root, "probes")
    return os.path.join(candidate, "") if os.path.isfile(os.path.join(candidate, "_attach_boot.py")) else None


_PROBES_DIR = _probes_dir()
# The probes' module files, wherever the observed process had them: an observation replayed on another machine (a
# user's bundle, a CI fixture recorded in another checkout) holds the probes' frames under the path they had there,
# and they are the tool's own there too (a recorded job read the collectives probe's wrapper as the ranks' code).
# A program's own package named ``probes`` with a module of one of these names would be read as the tool's.
_PROBE_FILES = frozenset(
    name for name in (os.listdir(_PROBES_DIR) if _PROBES_DIR is not None else ()) if name.endswith(".py"))


# A pure function of the path, asked for every frame of every sample by most readers (about 40% of an analysis's
# time before it was cached); the paths of one window are a few hundred.
@functools.lru_cache(maxsize=8192)
def is_library_file(filename: str) -> bool:
    """True for the standard library, installed packages, code torch generates, the probes' own code, and
    pseudo-files (``<frozen ...>``, ``<string>``), by path."""
    if not filename or filename.startswith("<"):
        return True
    if any(m in filename for m in _LIBRARY_MARKERS):
        return True
    if _PROBES_DIR is not None and filename.startswith(_PROBES_DIR):
        return True
    parts = filename.split("/")
    if len(parts) >= 2 and parts[-2] == "probes" and parts[-1] in _PROBE_FILES:
        return True
    return _stdlib_at(parts) is not None


def _stdlib_at(parts: list[str]) -> int | None:
    """The index of the standard library's directory (``.../lib/python3.11``) in a path's parts, or None."""
    return next((i for i, p in enumerate(parts)
                 if i > 0 and _PYLIB.fullmatch(p) is not None and parts[i - 1] in ("lib", "lib64")), None)

_INSTALLED = ("/site-packages/", "/dist-packages/")


def site_relative(filename: str) -> str | None:
    """An installed package's file relative to site-packages (``sympy/core/cache.py``); None for any other file."""
    for marker in _INSTALLED:
        at = filename.rfind(marker)
        if at >= 0:
            return filename[at + len(marker):]
    return None


def library_relative(filename: str) -> str | None:
    """A library file's path as its import names it: relative to site-packages (``sortedcontainers/sortedlist.py``)
    or to the standard library's directory (``random.py``, ``json/encoder.py``); None for any other file."""
    rel = site_relative(filename)
    if rel is not None:
        return rel
    parts = filename.split("/")
    at = _stdlib_at(parts)
    return "/".join(parts[at + 1:]) if at is not None and at < len(parts) - 1 else None


def installed_dir(filename: str) -> str | None:
    """The directory of an installed package's file, relative to site-packages (``sympy/core``,
    ``google/protobuf/internal``); None for any other file, and for a module that sits in site-packages itself."""
    rel = site_relative(filename)
    return rel.rsplit("/", 1)[0] if rel is not None and "/" in rel else None


def is_framework_dir(directory: str) -> bool:
    """An installed directory (relative to site-packages) of torch's own: the framework, not a choice of the
    program's; its settings are the settings catalogue's."""
    return directory.startswith("torch")


# /proc/<pid>/stat state letters (proc(5)) a diagnosis cares about.
STATE_NAMES = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible sleep (disk or driver I/O)",
    "T": "stopped (SIGSTOP/SIGTSTP)",
    "t": "stopped by a debugger (tracing stop)",
    "Z": "zombie (exited, not reaped by its parent)",
    "X": "dead",
    "I": "idle",
}


@dataclass(frozen=True, slots=True)
class SourceLine:
    """One sampled frame's location as the file on disk has it *now*."""

    filename: str
    line: int
    function: str | None  # qualified name of the innermost def holding the line on disk; None: none / unreadable
    text: str | None  # the line's text on disk (stripped); None: beyond the end of the file or unreadable
    # `receiver.method` of the queue calls (put/get and their _nowait forms) in that function's body on disk,
    # e.g. ("self.hs_queue.put",): tells producers from consumers even when they never block.
    queue_calls: tuple[str, ...] = ()
    parsed: bool = True  # False: the file on disk does not parse, so ``function`` says nothing
    # Lines of that function that compute a vocabulary projection (a call on an attribute named like
    # ``lm_head``/``unembed``/``output_projection``) into a name the function never reads again: pure waste.
    unused_logits: tuple[tuple[int, str], ...] = ()  # (line, its text)
    # Lines of that function that assign any call on an attribute (a module called: ``out = self.decoder(h)``) to
    # names the function never reads again, vocabulary projections aside: work whose result nothing reads.
    unused_outputs: tuple[tuple[int, str], ...] = ()  # (line, its text)
    # Locks, as the code on disk names them (``Registry._lock`` for ``self._lock`` in a method of Registry): the
    # ``with`` blocks around the line hold them (``holds``); the line itself takes one (``acquires``: a ``with X:``
    # or ``X.acquire()`` on it). A thread parked at an ``acquires`` line waits for that lock (analysis.waits).
    holds: tuple[str, ...] = ()
    acquires: str | None = None
    # The innermost ``for``/``while`` loop around the line in its function (its line; None: no loop), and whether
    # that loop's body calls ``backward(...)`` and an optimizer's ``step(...)``: a call in a loop that runs backward
    # but not the step runs once per micro-batch of a gradient accumulation (``collectives_rate``).
    loop_line: int | None = None
    loop_backward: bool = False
    loop_step: bool = False
    # The decorators of that function, as dotted names without their arguments (``torch.jit.script``,
    # ``torch.compile``, ``njit``): what the program asked to be done to it (compiled, scripted, cached), which a
    # process-wide setting can turn off.
    decorators: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    exists: bool
    mtime_wall_s: float | None  # None when it cannot be read
    # "": a file of a sampled frame; else the sampled file that imports it at module level (so the process
    # loaded it at start, even though no sample landed in it), or "train.py inside a function" (loaded when that
    # function first ran).
    imported_by: str = ""
    # Where the file passes a setting of the catalogue (``dflash_contract.code_knobs``), as it reads on disk now.
    knobs: tuple[KnobUse, ...] = ()
    # Keyword arguments the file passes to an imported library's callable from a configuration key that the
    # configuration files on the process's command line set (``KnobUse.library``: the library's top module), outside
    # the catalogue: a setting of the library whose effect nothing here knows, said where that library's code runs.
    passed: tuple[KnobUse, ...] = ()
    # The defaults the file declares for configuration values (a dataclass's or a model's field, an argparse option,
    # ``cfg.get("key", default)``) that the configuration files on the process's command line set to another value:
    # what this run's profile changed from what the code would do. Only those changed are kept.
    overridden: tuple[DeclaredDefault, ...] = ()
    # Of the values any of the program's files declares a default for and the run's configuration sets otherwise,
    # those this file reads (an attribute, a key, ``getattr``), with the first line reading each: the code a thread's
    # time goes to may be where a changed value acts.
    reads_departures: tuple[tuple[str, int], ...] = ()
    # Of the same changed values, those the file's calls carry though no argument names them: the call's object or an
    # argument is computed from the value in the function, in ``self``'s attributes, or in a function of the
    # program's it calls that returns it (``model.generate(...)`` on a model built with ``use_cache`` from the
    # configuration), or a call an ``if``/``while`` on the value chose to run, with each such call's line.
    carries: tuple[tuple[str, int], ...] = ()
    # The PID of another process at the other end of a wait (a child the process waits on) whose command line runs
    # this file (``python tileserver.py``); 0 for the process's own files.
    run_by: int = 0


@dataclass(frozen=True, slots=True)
class DeclaredDefault:
    """A default the program's code declares for a configuration value, ``max_pacing_mbit: int = 0  # 0: no cap``
    at line 22, and the value the run's configuration file gives it instead."""

    name: str  # the field, option or key ("max_pacing_mbit")
    default: str  # as Python writes it ("0", "'greedy'", "True")
    line: int
    note: str = ""  # the comment on the declaration's line, shortened ("0: no cap on the connection's pacing rate")
    configured: str = ""  # the configuration's value as Python writes it; "" where not read (or the same)
    configured_in: str = ""  # the configuration file's name


@dataclass(frozen=True, slots=True)
class KnobUse:
    """A catalogued keyword argument (or configuration-dict key) the program's file passes: ``cached_statements``
    at line 15 in ``sqlite3.connect(...)``, its value where it is a literal, else the configuration key it is read
    from (``cfg["statement_cache"]``: "statement_cache")."""

    line: int
    call: str  # the callee as written, shortened ("sqlite3.connect", "ConfigDict"); "{...}" for a dict literal
    name: str
    value: str = ""  # the literal as Python writes it ("0", "'python-re'"); "" where not a literal
    key: str = ""  # the configuration key the value is read from; "" where not read from one
    # Where ``value`` came from the configuration file on the process's command line that sets ``key`` (its name):
    # "estuary_live.toml"; "" where the value is the code's literal or unknown.
    configured_in: str = ""
    # The top module of the imported library whose callable takes it ("tokenizers" for ``models.BPE`` after ``from
    # tokenizers import models``); "" where not known (a catalogued setting needs none).
    library: str = ""
    # Where the argument is a name the code computed from configuration (``optimize=opt`` after ``opt =
    # PATHS[cfg.contraction_path]``): the argument as written ("opt"), and the further keys its assignments read,
    # tried in order where ``key`` is not in the configuration files. "" and () where passed as read.
    via: str = ""
    keys: tuple[str, ...] = ()


# KnobUse.library of a variable the program exports into its own environment (``os.environ["NAME"] = cfg[...]``):
# read by whatever reads NAME.
ENV_LIBRARY = "(environment)"


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """The process as /proc shows it at the end of the window."""

    state: str  # the main thread's /proc state letter ("" when unknown)
    start_wall_s: float | None  # when the process started (boot time + start ticks)
    stderr_target: str  # where fd 2 points: a path, "pipe:[123]", "/dev/pts/1"; "" when unknown
    # The last bytes of stderr when it is a regular file we may read (bounded; never a pipe or a terminal).
    stderr_tail: str | None
    stderr_size_bytes: int | None = None
    stderr_mtime_wall_s: float | None = None  # when the program last wrote to it
    uses_cuda: bool | None = None  # the CUDA driver library is mapped into the process (/proc/PID/maps)
    cpus_allowed: int | None = None  # CPUs the process may run on (/proc/PID/status Cpus_allowed_list)
    # A GPU's device file is open (/dev/nvidia0...: a CUDA context exists). A CUDA build of torch maps the driver
    # library at import, whether or not the program ever uses a GPU: the mapping alone says nothing. None when not
    # read (older recordings).
    gpu_device_open: bool | None = None

    @property
    def cuda_in_use(self) -> bool | None:
        """The process runs CUDA: the driver mapped and, where it was read, a GPU's device file open."""
        if self.uses_cuda is not True or self.gpu_device_open is None:
            return self.uses_cuda
        return self.gpu_device_open

    @property
    def state_name(self) -> str:
        return STATE_NAMES.get(self.state, self.state or "unknown")
