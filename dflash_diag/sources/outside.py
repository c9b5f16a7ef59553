"""Evidence from outside the stacks, for a process that was never prepared for diagnosis.

Most users attach to a run that is already going, without probes. Beside the stacks, the machine still shows:
- /proc: the process's run state (stopped, zombie, uninterruptible) and when it started;
- its stderr, when it goes to a regular file (``nohup``, ``> log 2>&1``): thread deaths ("Exception in thread
  ..."), torch's own warnings (reentrant checkpoint without grad inputs, recompile limit hit, kernel fallbacks);
- the source files of the sampled frames: changed after the process started? is the sampled function still at
  that line on disk (stale code)? which queue calls (put/get) does each thread's function make (who produces,
  who consumes)?

Everything read is bounded (file sizes, counts, the stderr tail) and only regular files are opened: a pipe or a
terminal on fd 2 is never read (reading would steal the program's output or block). Parsed files are cached by
mtime, so the live view can call :meth:`OutsideReader.enrich` on every refresh.
"""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dflash_contract import proc
from dflash_contract.code_knobs import CODE_KNOBS, KNOB_BY_CALL, KNOB_BY_NAME, SQL_ANY, SQL_PREFIX
from dflash_contract.redact import REDACTED
from dflash_contract.settings import ENV_BY_NAME
from dflash_diag.model import Observation, ProcessFacts, SourceFile, SourceLine, StackSample
from dflash_diag.model.evidence import ENV_LIBRARY, DeclaredDefault, KnobUse, is_library_file
from dflash_diag.sources.configs import (
    CONFIG_SUFFIXES,
    ConfigReader,
    config_paths,
    default_config_paths,
    is_relative_path,
)
from dflash_diag.sources.lines import MAX_CALL_TEXT, MAX_SNIPPET_CHARS, RAW_LINE_CHARS, RAW_SLACK, SourceFiles
from dflash_diag.sources.procfs import fd_links
from dflash_diag.sources.redaction import ProcessRedactor, redactor_for
from dflash_diag.sources.sched import argv_of

PROC = Path("/proc")
STDERR_TAIL_BYTES = 256 * 1024
MAX_FILES = 64  # distinct source files examined per observation
MAX_PEER_SCRIPTS = 4  # processes at the other end of waits whose scripts are read
CALLEE_HOPS = 2  # functions followed from a function whose return value a call uses (its callees, theirs)
MAX_CARRIED_DEPARTURES = 128  # (changed value, line) pairs per file
MAX_LOCATIONS = 4096  # distinct (file, line) pairs examined per observation
QUEUE_METHODS = frozenset({"put", "get", "put_nowait", "get_nowait"})
@dataclass(frozen=True, slots=True)
class _Def:
    start: int
    end: int
    qualname: str
    queue_calls: tuple[str, ...]
    unused_logits: tuple[int, ...] = ()  # line numbers (texts added per file)
    unused_outputs: tuple[int, ...] = ()  # ... of any module call's output never read
    decorators: tuple[str, ...] = ()  # dotted names, arguments dropped (``torch.jit.script``)


@dataclass(frozen=True, slots=True)
class _Parsed:
    lines: tuple[str, ...]
    defs: tuple[_Def, ...]  # sorted by start; nested defs come after their parent
    parsed: bool = True
    imports: tuple[str, ...] = ()  # dotted module names imported at module level
    late_imports: tuple[str, ...] = ()  # ... and inside a function (loaded when it first runs)
    withs: tuple[_With, ...] = ()  # with-blocks over a plain name or attribute (a lock, a condition), by line
    loops: tuple[_Loop, ...] = ()  # for/while loops, by line
    knobs: tuple[KnobUse, ...] = ()  # the catalogued settings the file passes (``dflash_contract.code_knobs``)
    passed: tuple[KnobUse, ...] = ()  # keyword arguments to an imported library's callable read from a config key
    defaults: tuple[DeclaredDefault, ...] = ()  # the configuration defaults the file declares (not yet compared)
    # Names the file reads as an attribute (``cfg.lr``), a string key (``cfg["lr"]``, ``cfg.get("lr")``) or through
    # ``getattr(cfg, "lr")``, each with its first line; at most MAX_NAMES_READ.
    names_read: tuple[tuple[str, int], ...] = ()
    # The calls whose receiver or arguments are computed from configuration (``_carries``), and what each function's
    # return value is computed from (``_returns``): joined across the program's files once the changed values are
    # known (``SourceFile.carries``).
    carries: tuple[_Carry, ...] = ()
    returns: tuple[_Carry, ...] = ()
    # The configuration files an option of the file's argument parser reads by default (``--config`` with
    # ``default=os.path.join("configs", "fleet.toml")``), as written: read where the command line names none.
    config_defaults: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Carry:
    """What one call's receiver and arguments (or one function's return value) are computed from: the
    configuration keys read on the way, and the functions called on the way (by their last name), whose own return
    values carry theirs."""

    line: int
    keys: tuple[str, ...]
    callees: tuple[str, ...]
    name: str = ""  # the function, for a return value


@dataclass(frozen=True, slots=True)
class _Loop:
    line: int
    end: int
    backward: bool  # its body calls backward(...) (``loss.backward()``, ``scaler.scale(l).backward()``...)
    step: bool  # ... and an optimizer's step(...) (not a scheduler's)


@dataclass(frozen=True, slots=True)
class _With:
    line: int  # the ``with`` statement's line: where the lock is taken
    body_start: int
    body_end: int
    items: tuple[str, ...]  # the context expressions that are plain names/attributes (``self._lock``)


class OutsideReader:
    """Reads the outside evidence of one process; keeps parsed source files cached by (path, mtime)."""

    def __init__(self, pid: int, *, proc_root: Path = PROC, max_cached_files: int = 256,
                 redactor: ProcessRedactor | None = None) -> None:
        self.pid = pid
        self._proc = proc_root / str(pid)
        self._files: SourceFiles[_Parsed] = SourceFiles(_parse, max_cached_files)
        self._uses_cuda: bool | None = None  # once loaded, the driver stays loaded: read /proc/PID/maps until then
        self._gpu_open: bool | None = None  # once a context exists it stays: read the descriptors until then
        # What is read here (stderr, source lines, paths) is the program's text: redacted before it is returned.
        self._redactor = redactor if redactor is not None else redactor_for(pid)
        self._tail: tuple[str, str] | None = None  # the last stderr tail read, and its redaction
        self._configs = ConfigReader()  # the configuration files on its command line, parsed once per mtime

    def enrich(self, obs: Observation) -> Observation:
        """``obs`` with ``process``, ``code`` and ``files`` filled in (what cannot be read is left out)."""
        # The children run the program's files too: what their lines do (a lock they wait for) is read the same way.
        # And the scripts of the processes a thread waits on (a server child): what their configuration does there.
        peers = tuple(dict.fromkeys(p.pid for w in obs.outside_waits for p in w.peers))[:MAX_PEER_SCRIPTS]
        code, files = self.code_facts((*obs.stacks, *obs.children), peers=peers)
        return replace(obs, process=self.process_facts(), code=code, files=files)

    # --- the process ---------------------------------------------------------------------------------

    def process_facts(self) -> ProcessFacts:
        stat = proc.read_stat(self.pid)
        boot_s = proc.boot_time_s()
        state = stat.state if stat is not None else ""
        start = boot_s + stat.start_time_ticks / proc.CLOCK_TICKS_PER_S if stat is not None and boot_s else None
        target, tail, size, mtime = self._stderr()
        if not self._uses_cuda:
            self._uses_cuda = _maps_cuda(self._proc / "maps")
        if self._uses_cuda and not self._gpu_open:
            self._gpu_open = gpu_device_open(self._proc / "fd")
        return ProcessFacts(state=state, start_wall_s=start, stderr_target=self._redactor.text(target),
                            stderr_tail=self._redacted_tail(tail), stderr_size_bytes=size, stderr_mtime_wall_s=mtime,
                            uses_cuda=self._uses_cuda, cpus_allowed=_cpus_allowed(self._proc / "status"),
                            gpu_device_open=self._gpu_open if self._uses_cuda else None)

    def _redacted_tail(self, tail: str | None) -> str | None:
        """The tail with its secrets redacted (exception messages carry credentialed URLs); the live view reads
        the same tail on every refresh, so an unchanged one is not redacted again."""
        if tail is None:
            return None
        if self._tail is None or self._tail[0] != tail:
            self._tail = (tail, self._redactor.lines(tail))
        return self._tail[1]

    def _stderr(self) -> tuple[str, str | None, int | None, float | None]:
        link = self._proc / "fd" / "2"
        try:
            target = os.readlink(link)
        except OSError:
            return "", None, None, None
        try:
            # O_NONBLOCK: a FIFO must never block us; fstat on the opened file then decides (no TOCTOU).
            fd = os.open(link, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return target, None, None, None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return target, None, None, None  # a pipe, a terminal, /dev/null: nothing we may read
            start = max(0, st.st_size - STDERR_TAIL_BYTES)
            data = os.pread(fd, STDERR_TAIL_BYTES, start)
        except OSError:
            return target, None, None, None
        finally:
            os.close(fd)
        text = data.decode("utf-8", errors="replace")
        if start > 0:
            text = text.split("\n", 1)[-1]  # drop the partial first line
        return target, text, st.st_size, st.st_mtime

    # --- source files --------------------------------------------------------------------------------

    def code_facts(self, stacks: Iterable[StackSample], peers: tuple[int, ...] = ()
                   ) -> tuple[tuple[SourceLine, ...], tuple[SourceFile, ...]]:
        """What the files on disk say about every sampled Python frame of the program's own code, the modules they
        import, and the scripts the processes ``peers`` run."""
        locations: dict[tuple[str, int], None] = {}
        for sample in stacks:
            for thread in sample.threads:
                for frame in thread.frames:
                    if frame.native or frame.line <= 0 or is_library_file(frame.filename) or REDACTED in frame.filename:
                        continue  # a path redacted by the collector cannot be opened: no claim about it
                    locations.setdefault((frame.filename, frame.line), None)
                    if len(locations) >= MAX_LOCATIONS:
                        break
        by_file: dict[str, list[int]] = {}
        for filename, line in locations:
            if filename in by_file or len(by_file) < MAX_FILES:
                by_file.setdefault(filename, []).append(line)
        code: list[SourceLine] = []
        files: list[SourceFile] = []
        for filename, lines in by_file.items():
            path = self._resolve(filename)
            parsed, mtime, exists = self._files.get(path)
            files.append(SourceFile(path=filename, exists=exists, mtime_wall_s=mtime,
                                    knobs=parsed.knobs if parsed is not None else (),
                                    passed=parsed.passed if parsed is not None else (),
                                    overridden=parsed.defaults if parsed is not None else ()))
            if parsed is None:
                continue  # unreadable or gone: no claim about its lines
            for line in sorted(lines):
                code.append(_source_line(filename, line, parsed))
        known = {f.path for f in files}
        files.extend(self._imported(by_file, known))
        files.extend(self._peer_scripts(peers, known))
        files = self._configured(files)
        redactor = self._redactor
        return tuple(map(redactor.source_line, code)), tuple(map(redactor.source_file, files))

    def _imported(self, sampled: dict[str, list[int]], known: set[str]) -> list[SourceFile]:
        """The program's own modules that sampled files import at module level: loaded at start, maybe edited
        since (a loss module edited under a running job is not on the stacks when the sample misses it)."""
        out: list[SourceFile] = []
        for filename in sampled:
            path = self._resolve(filename)
            parsed = self._files.cached(path)
            late = set(parsed.late_imports) if parsed is not None else set()
            for module in (*parsed.imports, *parsed.late_imports) if parsed is not None else ():
                found = _find_module(path, module)
                if found is None or found in known or is_library_file(found) or len(out) >= MAX_FILES:
                    continue
                known.add(found)
                imported, mtime, exists = self._files.get(found)
                if not exists or mtime is None:
                    continue
                by = filename.rsplit("/", 1)[-1] + (" inside a function" if module in late else "")
                out.append(SourceFile(path=found, exists=True, mtime_wall_s=mtime, imported_by=by,
                                      knobs=imported.knobs if imported is not None else (),
                                      passed=imported.passed if imported is not None else (),
                                      overridden=imported.defaults if imported is not None else ()))
        return out

    def _peer_scripts(self, pids: tuple[int, ...], known: set[str]) -> list[SourceFile]:
        """The Python script each process of ``pids`` runs (the first argument ending in .py of a Python command
        line, from its working directory), where it is a file of the program's own, not a library's."""
        out: list[SourceFile] = []
        proc_root = self._proc.parent
        for pid in pids:
            argv = argv_of(pid, proc_root)
            try:
                cwd = os.readlink(proc_root / str(pid) / "cwd")
            except OSError:
                continue
            if not argv or not os.path.basename(argv[0]).startswith("python"):
                continue
            script = _script_of(argv)
            if script is None:
                continue
            path = os.path.normpath(os.path.join(cwd, script))
            if path in known or is_library_file(path) or not os.path.isfile(path):
                continue
            known.add(path)
            parsed, mtime, exists = self._files.get(path)
            if not exists or parsed is None:
                continue
            out.append(SourceFile(path=path, exists=True, mtime_wall_s=mtime, imported_by=f"process {pid}",
                                  knobs=parsed.knobs, passed=parsed.passed, overridden=parsed.defaults, run_by=pid))
        return out

    def _configured(self, files: list[SourceFile]) -> list[SourceFile]:
        """The files with each setting read from a configuration key given the value the configuration files on
        the process's command line set it to (``sources.configs``), where one is found; the arguments passed to a
        library from a configuration key are kept only where their value is found; and the code's declared defaults
        (``SourceFile.overridden``, all of them until here) only where the configuration sets another value."""
        if not any((k.key and not k.value) or k.name == SQL_ANY for f in files for k in f.knobs) and \
                not any(f.passed or f.overridden for f in files):
            return files
        paths: tuple[str, ...] = ()
        try:
            argv, cwd = argv_of(self.pid, self._proc.parent), os.readlink(self._proc / "cwd")
            paths = config_paths(argv, cwd) or default_config_paths(argv, cwd, self._declared_configs(argv, cwd))
        except OSError:
            pass
        if not paths:
            return [replace(f, passed=(), overridden=()) for f in files]
        # A name declared with two different defaults (two sections' `seed`) cannot say which one the file set.
        declared: dict[str, set[str]] = {}
        for f in files:
            for d in f.overridden:
                declared.setdefault(d.name, set()).add(d.default)
        out = [replace(f, knobs=tuple(u for k in f.knobs for u in self._configured_uses(k, paths)),
                       passed=tuple(u for k in f.passed if (u := self._configured_use(k, paths)).configured_in),
                       overridden=tuple(o for d in f.overridden if len(declared[d.name]) == 1
                                        and (o := self._overridden(d, paths)) is not None))
               for f in files]
        departed = {d.name for f in out for d in f.overridden}
        if not departed:
            return out
        returns = self._returned_keys(out)
        return [replace(f, reads_departures=self._reads(f.path, departed),
                        carries=self._carried_departures(f.path, departed, returns)) for f in out]

    def _returned_keys(self, files: list[SourceFile]) -> dict[str, set[str]]:
        """Each function of the program's files (by name) with the configuration keys its return value is computed
        from, its callees' followed CALLEE_HOPS deep; a name defined twice has both's."""
        direct: dict[str, tuple[set[str], set[str]]] = {}
        for f in files:
            parsed = self._files.cached(self._resolve(f.path))
            for r in parsed.returns if parsed is not None else ():
                keys, callees = direct.setdefault(r.name, (set(), set()))
                keys.update(r.keys)
                callees.update(r.callees)
        out: dict[str, set[str]] = {}
        for name, (keys, callees) in direct.items():
            found, frontier = set(keys), set(callees)
            for _ in range(CALLEE_HOPS):
                frontier = {c for c in frontier if c in direct and c != name}
                found.update(k for c in frontier for k in direct[c][0])
                frontier = {n for c in frontier for n in direct[c][1]}
            out[name] = found
        return out

    def _carried_departures(self, filename: str, names: set[str],
                            returns: dict[str, set[str]]) -> tuple[tuple[str, int], ...]:
        """Of ``names``, those each call of the file carries (its receiver or arguments computed from it, there or in
        a function it calls that returns it), by line: at most MAX_CARRIED_DEPARTURES."""
        parsed = self._files.cached(self._resolve(filename))
        if parsed is None:
            return ()
        out: dict[tuple[str, int], None] = {}
        for carry in parsed.carries:
            keys = set(carry.keys).union(*(returns.get(c, set()) for c in carry.callees))
            for name in sorted(keys & names):
                out.setdefault((name, carry.line), None)
        return tuple(out)[:MAX_CARRIED_DEPARTURES]

    def _declared_configs(self, argv: tuple[str, ...], cwd: str) -> tuple[str, ...]:
        """The configuration files the script on the command line (``python train.py``) declares as an option's
        default (``_Parsed.config_defaults``)."""
        script = _script_of(argv)
        if script is None:
            return ()
        parsed, _, _ = self._files.get(os.path.normpath(os.path.join(cwd, script)))
        return parsed.config_defaults if parsed is not None else ()

    def _reads(self, filename: str, names: set[str]) -> tuple[tuple[str, int], ...]:
        """Of ``names``, those the file reads, with the first line reading each (``_Parsed.names_read``)."""
        parsed = self._files.cached(self._resolve(filename))
        if parsed is None:
            return ()
        return tuple((name, line) for name, line in parsed.names_read if name in names)

    def _overridden(self, declared: DeclaredDefault, paths: tuple[str, ...]) -> DeclaredDefault | None:
        """The declared default with the configuration's value, where the files set one that differs."""
        found = self._configs.lookup(paths, declared.name)
        if found is None or same_literal(found[0], declared.default):
            return None
        if is_relative_path(found[0]) and declared.default not in ("''", '""', "None"):
            return None  # one file for another places the run (its data, its output); a file where none was is a choice
        return replace(declared, configured=found[0], configured_in=found[1])

    def _configured_uses(self, use: KnobUse, paths: tuple[str, ...]) -> tuple[KnobUse, ...]:
        """The use with its configured value; a pragma statement whose name is computed, as each catalogued pragma
        the configuration files set (by its name)."""
        if use.name != SQL_ANY:
            return (self._configured_use(use, paths),)
        found = []
        for knob in CODE_KNOBS:
            if knob.name.startswith(SQL_PREFIX):
                named = self._configured_use(replace(use, name=knob.name, key=knob.name[len(SQL_PREFIX):]), paths)
                if named.configured_in:
                    found.append(named)
        return (use, *found)

    def _configured_use(self, use: KnobUse, paths: tuple[str, ...]) -> KnobUse:
        """The use with the value of the first of its keys the configuration files set (a traced argument's keys
        nearest first), and that key."""
        if not use.key or use.value:
            return use
        for key in (use.key, *use.keys):
            found = self._configs.lookup(paths, key)
            if found is not None:
                value, name = found
                return replace(use, key=key, keys=(), configured_in=name,
                               value=_sql_word(use.name, value) if use.name.startswith(SQL_PREFIX) else value)
        return use

    def _resolve(self, filename: str) -> str:
        if filename.startswith("/"):
            return filename
        try:
            return os.path.join(os.readlink(self._proc / "cwd"), filename)  # relative to the process's cwd
        except OSError:
            return filename


MAX_MAPS_BYTES = 16 * 1024 * 1024


_GPU_DEVICE = re.compile(r"^/dev/nvidia\d+$")
MAX_FDS_READ = 4096  # a process's descriptors looked at for a GPU's device file


def _script_of(argv: tuple[str, ...]) -> str | None:
    """The Python script a command line runs: its first argument ending in .py that is not an option."""
    return next((a for a in argv[1:] if a.endswith(".py") and not a.startswith("-")), None)


def gpu_device_open(fd_dir: Path) -> bool | None:
    """Whether the process holds a GPU's device file open (``/dev/nvidia0``: a CUDA context was created on it);
    None when its descriptors cannot be listed."""
    try:
        return any(_GPU_DEVICE.match(link) for _, link in fd_links(fd_dir, MAX_FDS_READ))
    except OSError:
        return None


def _maps_cuda(path: Path) -> bool | None:
    """Whether the CUDA driver (libcuda.so) is mapped into the process; None when /proc/PID/maps is unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_MAPS_BYTES)
    except OSError:
        return None
    return b"/libcuda.so" in data


def _parse(path: str, source: str) -> _Parsed:
    lines = tuple(source.splitlines())
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _Parsed(lines=lines, defs=(), parsed=False)  # the text still answers line lookups
    defs: list[_Def] = []
    _collect_defs(tree, "", defs)
    defs.sort(key=lambda d: (d.start, -d.end))
    return _Parsed(lines=lines, defs=tuple(defs), imports=_module_imports(tree), late_imports=_late_imports(tree),
                   withs=_lock_withs(tree), loops=_loops(tree), defaults=_declared_defaults(tree, lines),
                   names_read=_names_read(tree), config_defaults=_config_defaults(tree),
                   **_setting_uses(tree))


MAX_NAMES_READ = 2048  # per file


def _names_read(tree: ast.AST) -> tuple[tuple[str, int], ...]:
    """The names the file reads as attributes or string keys, each with its first line (``_Parsed.names_read``)."""
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        if len(first) >= MAX_NAMES_READ:
            break
        name = ""
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = node.attr
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, str):
            name = node.slice.value
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            name = node.args[1].value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
        line = getattr(node, "lineno", 0)  # every node matched above is an expression: it has one
        if name and (name not in first or line < first[name]):
            first[name] = line
    return tuple(first.items())


MAX_CONFIG_DEFAULTS = 4


def _config_defaults(tree: ast.AST) -> tuple[str, ...]:
    """The string defaults of the file's ``add_argument`` calls that name a configuration file (by its suffix): a
    literal, ``os.path.join`` of literals, or a module-level name assigned one of those."""
    module = {t.id: node.value for node in getattr(tree, "body", ()) if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)}
    out: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        value = next((k.value for k in node.keywords if k.arg == "default"), None)
        if isinstance(value, ast.Name):
            value = module.get(value.id)
        text = _path_literal(value) if value is not None else None
        if text and text.lower().endswith(CONFIG_SUFFIXES) and text not in out:
            out.append(text)
    return tuple(out[:MAX_CONFIG_DEFAULTS])


def _path_literal(value: ast.AST) -> str | None:
    """``"configs/a.toml"`` or ``os.path.join("configs", "a.toml")`` as the path text; None for anything else."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if isinstance(value, ast.Call) and _dotted(value.func, whole=True) in ("os.path.join", "path.join", "join") and \
            value.args and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in value.args):
        return os.path.join(*(str(a.value) for a in value.args if isinstance(a, ast.Constant)))
    return None


MAX_DEFAULTS = 256  # per file
_NOTE_CHARS = 80


def _declared_defaults(tree: ast.AST, lines: tuple[str, ...]) -> tuple[DeclaredDefault, ...]:
    """The defaults the file declares for configuration values: a class's annotated field with a literal default
    (a dataclass, a pydantic model, a NamedTuple: ``max_pacing_mbit: int = 0``), an argparse option's ``default=``
    (``--batch-size`` as ``batch_size``, or its ``dest``) and a lookup's fallback (``cfg.get("key", 32)``); with
    the comment on the line. Credentials' names are left out; a default that is not a short literal is not one."""
    out: list[DeclaredDefault] = []
    for node in ast.walk(tree):
        if len(out) >= MAX_DEFAULTS:
            break
        found: list[tuple[str, ast.AST, int]] = []
        if isinstance(node, ast.ClassDef):
            found += [(item.target.id, item.value, item.lineno) for item in node.body
                      if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if node.func.attr == "add_argument" and "default" in keywords:
                option = _option_dest(node, keywords)
                if option:
                    found.append((option, keywords["default"], node.lineno))
            elif node.func.attr == "get" and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and \
                    isinstance(node.args[0].value, str):
                found.append((node.args[0].value, node.args[1], node.lineno))
        for name, value, line in found:
            default = _literal_text(value)
            if default is not None and _SHOWN_LITERAL.match(name) and not _SECRET_NAME.search(name):
                out.append(DeclaredDefault(name=name, default=default, line=line, note=_line_comment(lines, line)))
    return tuple(out)


def _option_dest(call: ast.Call, keywords: dict[str | None, ast.AST]) -> str:
    """An argparse option's attribute name: its ``dest``, else its first long flag with dashes as underscores."""
    dest = keywords.get("dest")
    if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
        return dest.value
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = next((f for f in flags if f.startswith("--")), None)
    return long[2:].replace("-", "_") if long else ""


def _literal_text(value: ast.AST) -> str | None:
    """A short literal as Python writes it (``0``, ``'greedy'``, ``True``, ``-1``, ``None``); None otherwise."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant) \
            and isinstance(value.operand.value, int | float):
        return f"-{value.operand.value!r}"
    if not isinstance(value, ast.Constant) or isinstance(value.value, bytes):
        return None
    text = repr(value.value)
    return text if len(text) <= 42 and (not isinstance(value.value, str) or not value.value
                                        or _SHOWN_LITERAL.match(value.value)) else None


def _line_comment(lines: tuple[str, ...], line: int) -> str:
    """The comment ending a source line (its tokens' comment, so a ``#`` inside a string is not one), shortened; ""
    where none."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if "#" not in text:
        return ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text.strip() + "\n").readline):
            if token.type == tokenize.COMMENT:
                return token.string.lstrip("#").strip()[:_NOTE_CHARS]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return ""
    return ""


def same_literal(a: str, b: str) -> bool:
    """Two literals as Python writes them are the same value: ``0.001`` and ``1e-3``, ``1`` and ``1.0``, ``True``
    and ``True``; a bool is not a number here (a profile's ``true`` for a field declared ``1`` is a change)."""
    if a == b:
        return True
    try:
        x, y = ast.literal_eval(a), ast.literal_eval(b)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    if isinstance(x, bool) or isinstance(y, bool):
        return False
    return isinstance(x, int | float) and isinstance(y, int | float) and float(x) == float(y)


def _setting_uses(tree: ast.AST) -> dict[str, Any]:
    """The catalogued settings the file passes and the arguments it passes to a library from configuration, over
    one walk of its scopes."""
    scoped = list(_scoped_nodes(tree))
    attrs = _self_assignments(scoped)
    aliases = _library_aliases(tree)
    return {"knobs": _knob_uses(scoped, attrs), "passed": _passed_uses(tree, scoped, attrs),
            "carries": _carries(scoped, attrs, aliases), "returns": _returns(tree, attrs, aliases)}


MAX_KNOB_USES = 32  # per file
_Assigned = dict[str, ast.AST]  # a function's plain names -> the value last assigned
_SelfAssigned = dict[str, tuple[ast.AST, _Assigned]]  # self's attributes -> the value, its function's names
_SHOWN_LITERAL = re.compile(r"^[\w.+-]{1,40}$")


def _knob_uses(scoped: list[tuple[ast.AST, _Assigned]], attrs: _SelfAssigned) -> tuple[KnobUse, ...]:
    """Where the file passes a catalogued setting: a call's keyword argument (to a callable the catalogue names
    for it) or positional argument (where the catalogue names the callable and the argument's place), or a key of a
    dict literal (a configuration dict) where the catalogue ties the name to no call. A keyword's value computed
    from configuration in the function (``optimize=opt``) is traced to its keys (``_traced_keys``)."""
    out: list[KnobUse] = []
    for node, local in scoped:
        if len(out) >= MAX_KNOB_USES:
            break
        if isinstance(node, ast.Call):
            call = _dotted(node.func)
            pragma = _pragma_use(node, call)
            if pragma is not None:
                out.append(pragma)
            positional = _positional_use(node, call)
            if positional is not None:
                out.append(positional)
            for keyword in node.keywords:
                knob = KNOB_BY_NAME.get(keyword.arg or "")
                if knob is not None and (not knob.calls or call.rsplit(".", 1)[-1] in knob.calls):
                    use = _knob_use(node.lineno, call or "(call)", knob.name, keyword.value)
                    out.append(_traced_use(use, keyword.value, local, attrs, {}))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    knob = KNOB_BY_NAME.get(key.value)
                    if knob is not None and not knob.calls:
                        out.append(_knob_use(key.lineno, "{...}", knob.name, value))
    return tuple(sorted(out, key=lambda k: k.line))


def _scoped_nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, _Assigned]]:
    """Every node of the file with the plain-name assignments it may read: the module's (a script's ``opt =
    cfg["path"]``, a global), under a function's own: the module's own nodes first, then each function's."""
    module_nodes = _own_nodes(tree)
    module = _assignments(module_nodes)
    for node in module_nodes:
        yield node, module
    for scope in ast.walk(tree):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes = _own_nodes(scope)
            local = {**module, **_assignments(nodes)}
            for node in nodes:
                yield node, local


def _traced_use(use: KnobUse, value: ast.AST, local: _Assigned, attrs: _SelfAssigned,
                aliases: dict[str, str]) -> KnobUse:
    """``use`` with the keys its argument, a name or ``self``'s attribute the code assigned, is computed from, where
    it is neither a literal nor a key read in place."""
    if use.key or use.value or not isinstance(value, ast.Name | ast.Attribute):
        return use
    keys = _traced_keys(value, dict(local), dict(attrs), aliases)  # copies: a trace pops what it followed
    return replace(use, key=keys[0], keys=tuple(keys[1:]), via=_dotted(value)[:40]) if keys else use


MAX_PASSED_USES = 64  # per file
# Argument and key names never read out of a configuration file, whatever their value: credentials.
_SECRET_NAME = re.compile(r"(?i)pass|secret|token|auth|cred|cookie|salt|sign|private|api_?key|access_?key")


def _library_aliases(tree: ast.AST) -> dict[str, str]:
    """The names the file binds to imported modules and their members, each with its top module (``np`` ->
    ``numpy``, ``models`` -> ``tokenizers`` for ``from tokenizers import models``); relative imports (the program's
    own package) left out."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = node.module.split(".")[0]
    return out


def _passed_uses(tree: ast.AST, scoped: list[tuple[ast.AST, _Assigned]], attrs: _SelfAssigned) -> tuple[KnobUse, ...]:
    """The arguments the file passes to an imported library's callable from a configuration key
    (``models.BPE(dropout=cfg["bpe_dropout"])``, ``zlib.compressobj(cfg.level)``), or from a name the code computed
    from one (``np.einsum(..., optimize=opt)`` after ``opt = PATHS[cfg.contraction_path]`` in the function, or
    ``self.path`` assigned so in another method: ``_traced_keys``): the keyword ("" for a positional argument), the
    key and the library; outside the catalogue (its settings are ``_knob_uses'``), and never a credential's name.
    Their values are looked up in the configuration files later; a literal in the code is not read."""
    aliases = _library_aliases(tree)
    out: list[KnobUse] = []
    for node, local in scoped:
        if len(out) >= MAX_PASSED_USES:
            break
        exported = _env_export(node, aliases)
        if exported is not None:  # os.environ["NAME"] = <configuration>: a setting for whatever reads NAME
            name, value = exported
            use = _traced_use(_knob_use(node.lineno, "os.environ", name, value), value, local, attrs, aliases)
            if use.key and not use.value and not _SECRET_NAME.search(use.key) and not _SECRET_NAME.search(name) \
                    and name not in ENV_BY_NAME:  # the catalogue's variables are read as settings with their effect
                out.append(replace(use, library=ENV_LIBRARY))
            continue
        if not isinstance(node, ast.Call) or not (node.args or node.keywords):
            continue
        call = _dotted(node.func, whole=True)
        library = aliases.get(call.split(".", 1)[0]) if call else None
        if library is None:
            continue
        arguments = [("", arg) for arg in node.args if not isinstance(arg, ast.Starred)]  # "": positional
        arguments += [(k.arg, k.value) for k in node.keywords if k.arg]
        for name, value in arguments:
            if name in KNOB_BY_NAME or _SECRET_NAME.search(name) or _module_member(value, aliases):
                continue
            use = _knob_use(node.lineno, call, name, value)
            if name:  # a keyword's name says what it sets; a positional name computed in the code is most often data
                use = _traced_use(use, value, local, attrs, aliases)
            if use.key and not use.value and not _SECRET_NAME.search(use.key):
                out.append(replace(use, library=library))
    return tuple(sorted(out, key=lambda k: k.line))


MAX_TRACED_KEYS = 4  # configuration keys one argument is traced to
MAX_TRACE_HOPS = 3  # assignments followed from the argument (a local, self's attribute, a local of that method)
MAX_TRACE_NODES = 64  # expression nodes looked at per hop


def _assignments(nodes: list[ast.AST]) -> _Assigned:
    """A function's own assignments to a plain name, each name with what it is computed from: the value written
    (``opt = cfg.path``; ``geo, opt = a, b`` pairs each name with its part), what an augmented assignment or a store
    into it adds (``flags |= regex.POSIX``, ``opts["parse_float"] = Decimal``) and the condition of an ``if`` or
    ``while`` under which any of those is written (``if cfg.exact_decimals:``): the last written first, several as
    one tuple the trace walks whole."""
    values: dict[str, list[ast.AST]] = {}
    for node in nodes:
        for name, value in _stores(node):
            values.setdefault(name, []).append(value)
    for node in nodes:
        if isinstance(node, ast.If | ast.While):
            for stmt in (*node.body, *node.orelse):
                for name in {n for sub in ast.walk(stmt) for n, _ in _stores(sub)}:
                    values.setdefault(name, []).append(node.test)
    return {name: vs[-1] if len(vs) == 1 else ast.Tuple(elts=vs[::-1], ctx=ast.Load()) for name, vs in values.items()}


def _stores(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) for each plain name ``node`` assigns, augments or stores into (a subscript or an attribute of
    it, not of ``self``: ``self``'s attributes are ``_self_assignments'``)."""
    if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) or node.value is None:
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    out = []
    for target in targets:
        for stored, value in _pairs(target, node.value):
            while isinstance(stored, ast.Subscript | ast.Attribute) and not _is_self(stored):
                stored = stored.value
            if isinstance(stored, ast.Name) and stored.id != "self":
                out.append((stored.id, value))
    return out


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """Each assigned name or attribute with the value it gets: ``a, b = x, y`` pairs them; ``model, gen =
    build(cfg)`` gives each name the whole call (what it is computed from, not which part)."""
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(target.elts) == len(value.elts):
            return list(zip(target.elts, value.elts, strict=True))
        return [(t.value if isinstance(t, ast.Starred) else t, value) for t in target.elts]
    return [(target, value)]


def _self_assignments(scoped: list[tuple[ast.AST, _Assigned]]) -> _SelfAssigned:
    """``self.<attr> = <value>`` anywhere in the file's functions: the value, with the names its function assigned
    (the locals it may read)."""
    out: _SelfAssigned = {}
    for node, local in scoped:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for attr, value in _pairs(target, node.value):
                    if isinstance(attr, ast.Attribute) and isinstance(attr.value, ast.Name) and \
                            attr.value.id == "self":
                        out[attr.attr] = (value, local)
    return out


def _traced_keys(value: ast.AST, local: _Assigned, attrs: _SelfAssigned, aliases: dict[str, str], hops: int = 0,
                 *, limit: int = MAX_TRACED_KEYS, nodes: int = MAX_TRACE_NODES,
                 callees: list[str] | None = None) -> list[str]:
    """The configuration keys an argument's value is computed from, nearest first: a name's assignment in the
    function, ``self.x``'s in the class's methods, and in each the keys read (``cfg["k"]``, ``cfg.get("k")``,
    ``cfg.section.k``) through subscripts, conditions, comparisons and calls' arguments; a module's constant, a
    literal and a credential's name are not keys. At most ``limit`` keys from ``nodes`` expression nodes a hop;
    the functions called on the way are added to ``callees`` where given."""
    keys: list[str] = []
    todo: deque[ast.AST] = deque([value])
    looked = 0
    while todo and len(keys) < limit and looked < nodes:
        node = todo.popleft()
        looked += 1
        if isinstance(node, ast.Name):
            if hops < MAX_TRACE_HOPS and node.id in local and node.id not in aliases:
                keys += _traced_keys(local.pop(node.id), local, attrs, aliases, hops + 1, limit=limit,
                                     nodes=nodes, callees=callees)  # popped: no cycle
        elif isinstance(node, ast.Attribute):
            if _module_member(node, aliases):
                continue
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in attrs:
                if hops < MAX_TRACE_HOPS:
                    assigned, method_locals = attrs.pop(node.attr)
                    keys += _traced_keys(assigned, dict(method_locals), attrs, aliases, hops + 1, limit=limit,
                                         nodes=nodes, callees=callees)
            elif not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                keys.append(node.attr)
        elif isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys.append(node.slice.value)
            else:
                todo.append(node.slice)  # PATHS[cfg.path]: the key is the index, the table the code's own
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                keys.append(node.args[0].value)
            else:
                if callees is not None and (called := _dotted(node.func)):
                    callees.append(called.rsplit(".", 1)[-1])
                todo.extend([*node.args, *(k.value for k in node.keywords)])
                if isinstance(node.func, ast.Subscript | ast.Call):  # SELECTORS[cfg.selector](): the table's key
                    todo.append(node.func)
        elif isinstance(node, ast.Tuple | ast.List):  # return model, gen: each part
            todo.extend(node.elts)
        elif isinstance(node, ast.Dict):  # {"strict": cfg.strict}: the values
            todo.extend(v for v in node.values if v is not None)
        elif isinstance(node, ast.Starred):
            todo.append(node.value)
        elif isinstance(node, ast.IfExp):  # the values it chooses between, then what chooses
            todo.extend((node.body, node.orelse, node.test))
        elif isinstance(node, ast.Compare | ast.BoolOp | ast.BinOp | ast.UnaryOp):
            todo.extend(ast.iter_child_nodes(node))
    return [k for k in dict.fromkeys(keys) if _SHOWN_LITERAL.match(k) and not _SECRET_NAME.search(k)][:limit]


MAX_CARRIES = 256  # calls per file traced to what their receiver and arguments are computed from
MAX_CARRIED_KEYS = 16  # keys one call (or one return value) is traced to
MAX_CARRY_NODES = 256  # expression nodes looked at per hop of such a trace
MAX_CALLEES = 8


def _carried(roots: Sequence[ast.AST], local: _Assigned, attrs: _SelfAssigned, aliases: dict[str, str],
             line: int, name: str = "") -> _Carry | None:
    keys: list[str] = []
    callees: list[str] = []
    for root in roots:
        keys += _traced_keys(root, dict(local), dict(attrs), aliases, limit=MAX_CARRIED_KEYS, nodes=MAX_CARRY_NODES,
                             callees=callees)
    keys = list(dict.fromkeys(keys))[:MAX_CARRIED_KEYS]
    # A library's function by the same name as one of the program's is taken for it: the join (``_returned_keys``)
    # knows the program's functions only.
    callees = list(dict.fromkeys(callees))[:MAX_CALLEES]
    return _Carry(line=line, keys=tuple(keys), callees=tuple(callees), name=name) if keys or callees else None


def _carries(scoped: list[tuple[ast.AST, _Assigned]], attrs: _SelfAssigned,
             aliases: dict[str, str]) -> tuple[_Carry, ...]:
    """What each call's receiver and arguments are computed from (``model.generate(..., generation_config=gen)``
    after ``model = GPT2LMHeadModel(GPT2Config(use_cache=t.use_cache))``): a value the configuration changed runs
    on that line though no argument names it. The first MAX_CARRIES calls with any."""
    out: list[_Carry] = []
    for node, local in scoped:
        if len(out) >= MAX_CARRIES:
            break
        if isinstance(node, ast.If | ast.While):
            out += _guarded(node, local, attrs, aliases)[:MAX_CARRIES - len(out)]
            continue
        if not isinstance(node, ast.Call):
            continue
        roots = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(node.func, ast.Attribute):  # the object whose method runs: built from configuration maybe
            roots.append(node.func.value)
        carry = _carried(roots, local, attrs, aliases, node.lineno)
        if carry is not None:
            out.append(carry)
    return tuple(out)


def _guarded(node: ast.If | ast.While, local: _Assigned, attrs: _SelfAssigned,
             aliases: dict[str, str]) -> list[_Carry]:
    """The calls an ``if``/``while`` runs only as its condition decides (``if cfg.use_index: ...``, and its
    ``else``), each carrying what the condition is computed from: the value chose that code."""
    test = _carried([node.test], local, attrs, aliases, node.lineno)
    if test is None:
        return []
    body = [n for stmt in (*node.body, *node.orelse) for n in _own_nodes(ast.Module(body=[stmt], type_ignores=[]))]
    return [replace(test, line=n.lineno) for n in body if isinstance(n, ast.Call)]


def _returns(tree: ast.AST, attrs: _SelfAssigned, aliases: dict[str, str]) -> tuple[_Carry, ...]:
    """What each of the file's functions returns is computed from (``build_teacher`` returns a model built with
    ``use_cache``): a call of it elsewhere, in any of the program's files, carries the same."""
    module = _assignments(_own_nodes(tree))
    out: list[_Carry] = []
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) or len(out) >= MAX_CARRIES:
            continue
        nodes = _own_nodes(scope)
        local = {**module, **_assignments(nodes)}
        roots: list[ast.AST] = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]
        carry = _carried(roots, local, attrs, aliases, scope.lineno, scope.name) if roots else None
        if carry is not None:
            out.append(carry)
    return tuple(out)


def _env_export(node: ast.AST, aliases: dict[str, str]) -> tuple[str, ast.AST] | None:
    """(the variable's name, the value) where ``node`` exports one into the process's environment:
    ``os.environ["NAME"] = value`` or ``os.environ.setdefault("NAME", value)``; None otherwise."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Subscript) and _is_environ(target.value, aliases) and \
                isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
            return target.slice.value, node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault" and \
            _is_environ(node.func.value, aliases) and len(node.args) == 2 and \
            isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value, node.args[1]
    return None


def _is_environ(node: ast.AST, aliases: dict[str, str]) -> bool:
    """``os.environ`` (``import os``), or ``environ`` after ``from os import environ``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and aliases.get(node.value.id) == "os"
    return isinstance(node, ast.Name) and node.id == "environ" and aliases.get("environ") == "os"


def _module_member(value: ast.AST, aliases: dict[str, str]) -> bool:
    """``np.float32``, ``subprocess.PIPE``: a constant of an imported module, not a configuration's value."""
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name) and value.id in aliases


def _positional_use(node: ast.Call, call: str) -> KnobUse | None:
    """A catalogued setting passed as the call's positional argument (``sys.set_coroutine_origin_tracking_depth(
    depth)``): its value, or the configuration key it is read from."""
    knob = KNOB_BY_CALL.get(call.rsplit(".", 1)[-1])
    if knob is None or knob.position is None or len(node.args) <= knob.position:
        return None
    arg = node.args[knob.position]
    if isinstance(arg, ast.Starred):
        return None
    return _knob_use(node.lineno, call or "(call)", knob.name, arg)


_PRAGMA = re.compile(r"^\s*PRAGMA\s+(\w{1,40}|\x00)\s*=\s*(.*?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_SQL_BOOLEAN = {"1": "ON", "TRUE": "ON", "YES": "ON", "0": "OFF", "FALSE": "OFF", "NO": "OFF"}
_PLACEHOLDER = "\x00"  # stands for an f-string's computed part while the SQL text is matched


def _pragma_use(node: ast.Call, call: str) -> KnobUse | None:
    """A catalogued SQLite pragma set by SQL text: the first argument of ``execute``/``executescript``, a string
    ``PRAGMA name = value`` (its value where literal) or an f-string whose value part is computed (the configuration
    key it is read from, as for a keyword argument)."""
    if not node.args or call.rsplit(".", 1)[-1] not in ("execute", "executescript"):
        return None
    arg = node.args[0]
    parts: list[ast.AST] = []
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        text = arg.value
    elif isinstance(arg, ast.JoinedStr):
        pieces = []
        for v in arg.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                pieces.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                pieces.append(_PLACEHOLDER)
                parts.append(v.value)
        text = "".join(pieces)
    else:
        return None
    match = _PRAGMA.match(text[:200])
    if match is None:
        return None
    if match[1] == _PLACEHOLDER:  # the name is computed: the configuration may say which pragmas it sets
        return KnobUse(line=node.lineno, call=call or "(call)", name=SQL_ANY)
    name = f"{SQL_PREFIX}{match[1].lower()}"
    if name not in KNOB_BY_NAME:
        return None
    value = match[2].strip("'\"")
    if _PLACEHOLDER not in value:
        return KnobUse(line=node.lineno, call=call or "(call)", name=name,
                       value=_sql_word(name, value) if _SHOWN_LITERAL.match(value) else "")
    if value == _PLACEHOLDER and len(parts) == 1:
        return _knob_use(node.lineno, call or "(call)", name, parts[0])
    return KnobUse(line=node.lineno, call=call or "(call)", name=name)


def _sql_word(name: str, value: str) -> str:
    """A pragma's value as SQLite reads it, whether from SQL text or a configuration file: a word in any case (quotes
    dropped); for foreign_keys, 1/0 (true/false, yes/no) are ON/OFF."""
    word = value.strip("'\"").upper()
    return _SQL_BOOLEAN.get(word, word) if name == f"{SQL_PREFIX}foreign_keys" else word


def _dotted(node: ast.AST, *, whole: bool = False) -> str:
    """``sqlite3.connect`` for a plain name or attribute chain; for a chain on anything else (``make().connect``) its
    attributes (``connect``), or "" with ``whole``; "" for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ".".join(reversed(parts))[:MAX_CALL_TEXT] if parts and not whole else ""
    return ".".join([node.id, *reversed(parts)])[:MAX_CALL_TEXT]


def _knob_use(line: int, call: str, name: str, value: ast.AST) -> KnobUse:
    """The use, with its value where it is a literal (a short one: a string the catalogue's values look like, a
    number, a constant) and the configuration key it is read from otherwise (``cfg["k"]``, ``int(cfg["k"])``,
    ``cfg.get("k", ...)``, ``cfg.k``)."""
    while isinstance(value, ast.Call) and len(value.args) == 1 and isinstance(value.func, ast.Name):
        value = value.args[0]  # int(...), str(...), bool(...): the value inside is the setting
    if isinstance(value, ast.Constant):
        text = repr(value.value)
        return KnobUse(line=line, call=call, name=name, value=text if _SHOWN_LITERAL.match(text.strip("'\"")) else "")
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant):
        return KnobUse(line=line, call=call, name=name, value=f"-{value.operand.value!r}"[:40])
    key = ""
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, str):
        key = value.slice.value
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get" and \
            value.args and isinstance(value.args[0], ast.Constant) and isinstance(value.args[0].value, str):
        key = value.args[0].value
    elif isinstance(value, ast.Attribute):
        key = value.attr
    return KnobUse(line=line, call=call, name=name, key=key if _SHOWN_LITERAL.match(key) else "")


_SCHEDULER = re.compile(r"sched|lr_", re.IGNORECASE)


def _loops(tree: ast.AST) -> tuple[_Loop, ...]:
    """Every for/while loop, with whether its body (not nested defs) calls backward() and an optimizer's step()."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.For | ast.AsyncFor | ast.While):
            continue
        backward = step = False
        for child in _own_nodes(node):
            if not isinstance(child, ast.Call) or not isinstance(child.func, ast.Attribute):
                continue
            if child.func.attr == "backward":
                backward = True
            elif child.func.attr == "step":
                try:
                    receiver = ast.unparse(child.func.value)[:RAW_SLACK * MAX_CALL_TEXT]
                except (ValueError, RecursionError):
                    continue
                step = step or not _SCHEDULER.search(receiver)
        out.append(_Loop(line=node.lineno, end=node.end_lineno or node.lineno, backward=backward, step=step))
    return tuple(sorted(out, key=lambda loop: loop.line))


def _module_imports(tree: ast.Module) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.setdefault(alias.name, None)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.setdefault(node.module, None)
    return tuple(names)


MAX_LATE_IMPORTS = 32


def _late_imports(tree: ast.Module) -> tuple[str, ...]:
    """The program's modules imported inside its functions (``def main(): from feed import RecordFeed``), not at
    module level: loaded when the function first runs."""
    top = set(_module_imports(tree))
    names: dict[str, None] = {}
    for node in ast.walk(tree):
        if len(names) >= MAX_LATE_IMPORTS:
            break
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module not in top:
            names.setdefault(node.module, None)
        elif isinstance(node, ast.Import):
            names.update((a.name, None) for a in node.names if a.name not in top)
    return tuple(names)


def _find_module(importer: str, module: str) -> str | None:
    """``module``'s file in the importer's directory or one of its parents (the program's own package roots)."""
    parts = module.split(".")
    directory = os.path.dirname(importer)
    for _ in range(6):
        for candidate in (os.path.join(directory, *parts) + ".py", os.path.join(directory, *parts, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return None


def _collect_defs(node: ast.AST, prefix: str, out: list[_Def]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            qualname = f"{prefix}{child.name}"
            start = min([child.lineno] + [d.lineno for d in child.decorator_list])
            out.append(_Def(start=start, end=child.end_lineno or child.lineno, qualname=qualname,
                            queue_calls=_queue_calls(child), unused_logits=_unused_logits(child),
                            unused_outputs=_unused_outputs(child), decorators=_decorators(child)))
            _collect_defs(child, f"{qualname}.<locals>.", out)
        elif isinstance(child, ast.ClassDef):
            _collect_defs(child, f"{prefix}{child.name}.", out)
        else:
            _collect_defs(child, prefix, out)


MAX_DECORATORS = 4


def _decorators(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """``@torch.jit.script``, ``@torch.compile(mode=...)``, ``@njit(cache=True)`` -> their dotted names; a decorator
    that is no plain name or attribute chain (a subscript, a lambda) is left out."""
    names = (_dotted(node.func if isinstance(node, ast.Call) else node, whole=True)
             for node in func.decorator_list[:MAX_DECORATORS])
    return tuple(name for name in names if name)


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body: a nested def or class is another function's code (a thread target
    defined inside ``main`` is not something ``main`` calls)."""
    out: list[ast.AST] = []
    todo = deque(ast.iter_child_nodes(func))  # breadth first, in source order, as ast.walk
    while todo:
        node = todo.popleft()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _queue_calls(func: ast.AST) -> tuple[str, ...]:
    """`receiver.put` / `receiver.get` calls that look like queue calls (a dict's ``get(key)`` does not)."""
    found: dict[str, None] = {}
    for node in _own_nodes(func):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method = node.func.attr
        if method not in QUEUE_METHODS:
            continue
        if method in ("get", "get_nowait") and not _queue_get_args(node):
            continue
        if method in ("put", "put_nowait") and not node.args:
            continue
        try:
            receiver = ast.unparse(node.func.value)[:RAW_SLACK * MAX_CALL_TEXT]
        except (ValueError, RecursionError):
            continue
        found.setdefault(f"{receiver}.{method}", None)
    return tuple(found)


_VOCAB_HEAD = re.compile(r"lm_head|unembed|output_proj|vocab_proj|logits", re.IGNORECASE)


def _unused_logits(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, ...]:
    """Lines assigning a vocabulary projection's output to names the function never reads."""
    loaded = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    lines = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        callee = node.value.func
        name = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        if not _VOCAB_HEAD.search(name):
            continue
        targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if targets and not any(t in loaded for t in targets):
            lines.append(node.lineno)
    return tuple(lines)


def _unused_outputs(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, ...]:
    """Lines assigning the output of a call on an attribute (``out = self.decoder(h)``, ``r = model.head(x)``: how a
    module is called) to plain names the function never reads again. A name spelled ``_``/``_x`` is a discard the
    author meant; a vocabulary projection is ``_unused_logits``' own."""
    loaded = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    # A ``global``/``nonlocal`` name is read elsewhere: assigning it is the function's output.
    loaded |= {name for n in ast.walk(func) if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
    lines = []
    for node in _own_nodes(func):  # a nested def's assignments are its own (its names count as reads here)
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        callee = node.value.func
        if not isinstance(callee, ast.Attribute) or _VOCAB_HEAD.search(callee.attr):
            continue
        targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if (targets and len(targets) == len(node.targets) and not any(t.startswith("_") for t in targets)
                and not any(t in loaded for t in targets)):
            lines.append(node.lineno)
    return tuple(lines)


def _lock_withs(tree: ast.AST) -> tuple[_With, ...]:
    """``with X:`` blocks whose X is a name or an attribute: what locks and conditions look like in code. A call
    (``with open(p)``, ``with torch.no_grad()``) builds a fresh object nobody else can hold: not a lock."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With | ast.AsyncWith) or not node.body:
            continue
        names = []
        for item in node.items:
            if isinstance(item.context_expr, ast.Name | ast.Attribute):
                try:
                    names.append(ast.unparse(item.context_expr)[:RAW_SLACK * MAX_CALL_TEXT])
                except (ValueError, RecursionError):
                    continue
        if names:
            out.append(_With(line=node.lineno, body_start=node.body[0].lineno,
                             body_end=node.end_lineno or node.body[-1].lineno, items=tuple(names)))
    return tuple(sorted(out, key=lambda w: w.line))


_ACQUIRE_CALL = re.compile(r"([A-Za-z_][\w.]*)\.acquire\(")


def lock_identity(expression: str, qualname: str | None) -> str:
    """A lock's name across threads: ``self._lock`` in ``Registry.record`` is ``Registry._lock`` (two instances of
    one class are one name: the graph errs towards linking them); any other expression stands as written."""
    if expression.startswith(("self.", "cls.")) and qualname:
        owner = qualname.split(".<locals>.")[-1].rsplit(".", 1)[0] if "." in qualname else ""
        if owner and owner != qualname:
            return f"{owner}.{expression.split('.', 1)[1]}"
    return expression


def _locks_at(line: int, text: str | None, parsed: _Parsed, qualname: str | None) -> tuple[tuple[str, ...], str | None]:
    holds: dict[str, None] = {}
    acquires: str | None = None
    for w in parsed.withs:
        if w.line > line:
            break
        if w.line == line:
            acquires = lock_identity(w.items[0], qualname)
        elif w.body_start <= line <= w.body_end:
            for item in w.items:
                holds.setdefault(lock_identity(item, qualname), None)
    if acquires is None and text:
        match = _ACQUIRE_CALL.search(text)
        if match is not None:
            acquires = lock_identity(match.group(1), qualname)
    return tuple(holds), acquires


def _queue_get_args(call: ast.Call) -> bool:
    """Queue.get(block=True, timeout=None): no key argument, unlike dict.get(key)."""
    if any(k.arg not in ("block", "timeout") for k in call.keywords):
        return False
    if not call.args:
        return True
    first = call.args[0]
    return len(call.args) <= 2 and isinstance(first, ast.Constant) and isinstance(first.value, bool)


def _source_line(filename: str, line: int, parsed: _Parsed) -> SourceLine:
    # raw, bounded: the redactor cuts every text of a SourceLine once it is redacted (lines.RAW_SLACK)
    text = parsed.lines[line - 1].strip()[:RAW_LINE_CHARS] if 0 < line <= len(parsed.lines) else None
    inner: _Def | None = None
    for d in parsed.defs:
        if d.start <= line <= d.end and (inner is None or d.start >= inner.start):
            inner = d
    qualname = inner.qualname if inner else None
    holds, acquires = _locks_at(line, text, parsed, qualname)
    loop = _loop_at(line, parsed, inner)
    return SourceLine(filename=filename, line=line, function=qualname, text=text, holds=holds, acquires=acquires,
                      queue_calls=inner.queue_calls if inner else (), parsed=parsed.parsed,
                      unused_logits=_texts(inner.unused_logits, parsed) if inner else (),
                      unused_outputs=_texts(inner.unused_outputs, parsed) if inner else (),
                      loop_line=loop.line if loop else None, loop_backward=loop.backward if loop else False,
                      loop_step=loop.step if loop else False, decorators=inner.decorators if inner else ())


def _texts(lines: tuple[int, ...], parsed: _Parsed) -> tuple[tuple[int, str], ...]:
    return tuple((n, parsed.lines[n - 1].strip()[:RAW_SLACK * MAX_SNIPPET_CHARS]) for n in lines if 0 < n <= len(parsed.lines))


def _loop_at(line: int, parsed: _Parsed, inner: _Def | None) -> _Loop | None:
    """The innermost loop around ``line`` inside its own function (a loop of an enclosing function is another's)."""
    found: _Loop | None = None
    for loop in parsed.loops:
        if loop.line > line:
            break
        if loop.line <= line <= loop.end and (inner is None or inner.start <= loop.line <= inner.end):
            found = loop  # sorted by line: a later one that still holds the line is nested deeper
    return found


def _cpus_allowed(status: Path) -> int | None:
    """How many CPUs the process may run on: ``Cpus_allowed_list: 0-3,8`` is 5; None when unreadable."""
    try:
        with open(status, encoding="ascii", errors="replace") as fh:
            text = fh.read(16384)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            count = 0
            for part in line.split(":", 1)[1].strip().split(","):
                lo, _, hi = part.strip().partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    return None
                count += int(hi) - int(lo) + 1 if hi else 1
            return count or None
    return None
