"""Library settings the program changed at run time: a module's or a class's constant whose value now differs from
the one its source file assigns (``SortedList.DEFAULT_LOAD_FACTOR = 16`` where sortedlist.py says 1000,
``regex.DEFAULT_VERSION`` set to ``VERSION1``).

A library's tunables are often plain module or class attributes, named in capitals, that a program may assign at
start-up; nothing in a stack shows them, and they are not in the environment. This reader reads the source of each
loaded library module once, line by line (the standard library's and the installed packages'; not torch's, whose flags the
settings probe reads by name, and not the program's own), keeps the constants its top level and its classes assign
exactly once (``NAME = 1000``, ``NAME = OTHER_NAME`` of the same module), and compares them with the live values
at every publish: a dictionary lookup each, with no attribute access that could run the program's code.

Bounded: at most ``max_modules`` modules read, each at most ``max_source_bytes``, and no more than
``budget_s`` of reading per publish (the rest waits for the next one); at most ``max_changes`` rows reported.
Never raises: a module that cannot be read is skipped.
"""

from __future__ import annotations

import ast
import enum
import os
import re
import sys
import sysconfig
import time
import types
from dataclasses import dataclass
from typing import Any

from dflash_contract.redact import is_secret_name

_SIMPLE = (int, float, str, bytes, bool, type(None))
_VALUE_CHARS = 40
# the framework's own (the settings probe reads its flags by name) and the tool's
_SKIPPED_TOP = frozenset({"torch", "torchgen", "functorch", "triton", "probes", "dflash_diag", "dflash_contract",
                          "_pytest", "pytest", "pip", "setuptools", "pkg_resources", "_distutils_hack"})
_MISSING = object()


@dataclass(frozen=True, kw_only=True)
class Config:
    max_modules: int = 4000  # library modules read over the whole run
    max_source_bytes: int = 200_000  # a larger source file is skipped (one file's reading must fit the budget)
    budget_s: float = 0.01  # reading per publish (the GIL is held meanwhile); the rest waits for the next
    max_changes: int = 16  # rows reported


@dataclass(frozen=True, slots=True)
class _Constant:
    owner: str  # "" for the module, else the class's name
    name: str
    value: Any  # as the source assigns it


def library_dirs() -> tuple[str, ...]:
    """Where the standard library and installed packages live (their modules are libraries, not the program)."""
    paths = sysconfig.get_paths()
    found = [paths[k] for k in ("stdlib", "purelib", "platlib") if k in paths]
    found += [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]
    # each as given and resolved, so a module's file is placed by its prefix alone (no system call per module)
    dirs = {os.path.join(f(p), "") for p in found for f in (os.path.abspath, os.path.realpath)}
    return tuple(sorted(dirs, key=len, reverse=True))


# One line of a source file that matters here: a top-level ``class``, any other top-level statement (which ends a
# class body), or an assignment of a literal to a name in capitals (at the top level or in a class's body).
_LINE = re.compile(
    r"^(?:class[ \t]+(?P<cls>\w+)"
    r"|(?P<indent>[ \t]*)(?P<name>_?[A-Z][A-Z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*(?P<value>[^=\n#][^\n#]*?)[ \t]*(?:#[^\n]*)?$"
    r"|(?P<other>[^ \t\n#]))",
    re.MULTILINE)
_GLOBAL = re.compile(r"(?m)^[ \t]+global[ \t]+([\w, \t]+)")
_NONLOCAL = re.compile(r"(?m)^[ \t]+nonlocal[ \t]+([\w, \t]+)")
# an assignment to the name, anywhere in the file (``X = ``, ``X += ``, ``self.X = ``, ``cls.X = ``); a pattern per
# candidate that begins with the name itself, so the regex engine skips to each occurrence (a generic pattern tried
# at every position of a 100 kB file took milliseconds)
_ASSIGN_TAIL = r"[ \t]*(?:[-+*/%&|^@]|//|\*\*|>>|<<)?=(?!=)"


def _assignments(source: str, name: str) -> int:
    return sum(1 for m in re.finditer(re.escape(name) + _ASSIGN_TAIL, source)
               if m.start() == 0 or not (source[m.start() - 1].isalnum() or source[m.start() - 1] == "_"))


def constants_of(source: str) -> list[_Constant]:
    """The constants a module's source assigns once, read line by line (no parse: a library's source is read in
    a fraction of a millisecond, so every loaded module can be read): at its top level and in its top-level classes'
    bodies, named in capitals, to a literal (``NAME = 1000``, ``-2``, ``"fast"``, ``None``, ``True``) or to another
    such constant of the module (``ALIAS = NAME``). A name assigned more than once anywhere in the file (a counter, a
    conditional default, a method's own assignment) or rebound by a function (``global NAME``) is state, not a
    setting, and left out."""
    rebound = {n.strip() for pattern, word in ((_GLOBAL, "global"), (_NONLOCAL, "nonlocal")) if word in source
               for m in pattern.finditer(source) for n in m.group(1).split(",")}
    found: dict[tuple[str, str], list[str]] = {}
    owner, body_indent = "", None
    for m in _LINE.finditer(source):
        if m.group("cls") is not None:
            owner, body_indent = m.group("cls"), None
            continue
        if m.group("other") is not None:
            owner, body_indent = "", None
            continue
        name, indent = m.group("name"), m.group("indent")
        if not indent:
            owner, body_indent = "", None
            found.setdefault(("", name), []).append(m.group("value"))
        elif owner:
            if body_indent is None:
                body_indent = indent
            if indent == body_indent:
                found.setdefault((owner, name), []).append(m.group("value"))
    module_level: dict[str, Any] = {}
    out: list[_Constant] = []
    pending: list[tuple[str, str, str]] = []
    for (owner_name, name), values in found.items():
        if len(values) != 1 or name in rebound or _assignments(source, name) != 1:
            continue
        literal = _literal(values[0])
        if literal is _MISSING:
            pending.append((owner_name, name, values[0]))
            continue
        out.append(_Constant(owner_name, name, literal))
        if not owner_name:
            module_level[name] = literal
    for owner_name, name, text in pending:  # NAME = OTHER_NAME: the value of another constant of the module
        if text in module_level:
            out.append(_Constant(owner_name, name, module_level[text]))
    return out


def _running_files(max_depth: int = 64) -> set[str]:
    """The source files of every frame on every thread's stack now."""
    files: set[str] = set()
    for frame in sys._current_frames().values():
        depth = 0
        while frame is not None and depth < max_depth:
            files.add(frame.f_code.co_filename)
            frame, depth = frame.f_back, depth + 1
    return files


def _literal(text: str) -> Any:
    """A literal's value, or ``_MISSING`` for anything else (a call, a name, a container: not a plain setting)."""
    if not text or text[0] in "[{(" or len(text) > 200:
        return _MISSING
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _MISSING
    return value if isinstance(value, _SIMPLE) else _MISSING


def _same(now: Any, then: Any) -> bool:
    if type(now) is not type(then):
        # an enum member or an int subclass standing for the literal (``RegexFlag.V0 == 0``) is the same setting
        try:
            return isinstance(now, (int, float, str, bytes)) and bool(now == then)
        except Exception:
            return True
    return bool(now == then)


def _class_space(owner: Any) -> Any:
    """A plain class's own attributes; None for an enum (its body's assignments become members, not settings) and
    for anything that is not a class."""
    if not isinstance(owner, type) or isinstance(owner, enum.EnumMeta):
        return None
    return owner.__dict__


# A string constant is shown only as a short word or number (a path, a URL, a key would say more than a setting's
# value should in a report a user may share).
_SHOWN_TEXT = re.compile(r"[A-Za-z0-9_.:+-]{1,32}")


def shown(value: Any, name: str = "") -> str:
    """The value as a report shows it: a number, a bool, None or a short word; ``<set>`` for other text and for
    any value of a name that may hold a secret (``API_TOKEN``); a type name for anything else."""
    if name and is_secret_name(name):
        return "<set>"
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.decode("ascii", "replace")
        return repr(value) if _SHOWN_TEXT.fullmatch(text) else "<set>"
    text = repr(value) if isinstance(value, _SIMPLE) else f"<{type(value).__name__}>"
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 3] + "..."


class LibrarySettings:
    """The constants of the loaded library modules, read once each, compared with their live values."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self._dirs = library_dirs()
        self._seen: set[str] = set()
        self._program: set[str] = set()  # the program's own modules (not libraries)
        self._relative_of: dict[str, str | None] = {}  # a module file -> its path as imported
        self.modules_read = 0  # library modules read
        self._modules_at_last_scan = -1
        self._scan_complete = False  # the last scan reached the end of sys.modules
        self._watched: list[tuple[str, str, list[_Constant]]] = []  # (module name, file as imported, constants)
        self.read_s = 0.0  # reading time, over the run

    def _relative(self, filename: str) -> str | None:
        if filename in self._relative_of:
            return self._relative_of[filename]
        found = None
        for d in self._dirs:
            if filename.startswith(d):
                found = filename[len(d):]
                break
        if len(self._relative_of) < 4 * self.config.max_modules:
            self._relative_of[filename] = found
        return found

    def scan(self) -> None:
        """Read the library modules loaded since the last call, within this publish's budget: first those the
        program's own modules import from, then those whose code a thread runs right now, then the rest in import
        order. Once all are read, a publish costs a length check until something new is imported."""
        if len(sys.modules) == self._modules_at_last_scan and self._scan_complete:
            return  # nothing imported since every module was read: a publish costs one length check
        start = time.perf_counter()
        modules = list(sys.modules.items())
        self._modules_at_last_scan = len(modules)
        self._scan_complete = False
        used = self._used_by_program(modules)
        running = _running_files()
        ordered = sorted(modules, key=lambda nm: (nm[0] not in used, getattr(nm[1], "__file__", None) not in running))
        read_before = self.modules_read
        importing = False
        for name, module in ordered:
            if (self.modules_read > read_before and time.perf_counter() - start > self.config.budget_s) or \
                    self.modules_read >= self.config.max_modules:
                break
            if name in self._seen:
                continue
            if name.partition(".")[0] in _SKIPPED_TOP:
                continue
            if getattr(getattr(module, "__spec__", None), "_initializing", False):
                importing = True  # half-executed: read at a later publish
                continue
            self._seen.add(name)
            self._watch(name, module)
        else:
            self._scan_complete = not importing and self.modules_read < self.config.max_modules
        self.read_s += time.perf_counter() - start

    def _used_by_program(self, modules: list[tuple[str, Any]], max_names: int = 2000) -> set[str]:
        """The library modules the program's own modules hold in their namespaces (a module imported, a class or a
        function imported from one): the libraries it calls and configures, read first. (The frames running when
        the board thread holds the GIL are where the other threads let it go, a biased sample of where they work.)"""
        used: set[str] = set()
        for name, module in modules:
            filename = getattr(module, "__file__", None)
            if (name in self._seen and name not in self._program) or not isinstance(filename, str) or \
                    not filename.endswith(".py") or self._relative(filename) is not None or \
                    name.partition(".")[0] in _SKIPPED_TOP:
                continue
            self._seen.add(name)
            self._program.add(name)
            for value in list(getattr(module, "__dict__", {}).values())[:max_names]:
                if isinstance(value, types.ModuleType):
                    used.add(value.__name__)
                elif isinstance(value, (type, types.FunctionType)):
                    owner = value.__dict__.get("__module__") if isinstance(value, type) else value.__module__
                    if isinstance(owner, str):
                        used.add(owner)
        return used

    def _watch(self, name: str, module: Any) -> None:
        try:
            filename = getattr(module, "__file__", None)
            if not isinstance(filename, str) or not filename.endswith(".py"):
                return
            relative = self._relative(filename)
            if relative is None or os.path.getsize(filename) > self.config.max_source_bytes:
                return
            with open(filename, encoding="utf-8", errors="replace") as f:
                constants = constants_of(f.read())
            self.modules_read += 1
        except (OSError, ValueError, MemoryError):
            return
        if constants:
            self._watched.append((name, relative, constants))

    def changed(self) -> list[list[str]]:
        """[[file, "Owner.NAME", value now, value in the source]] for each constant whose live value differs."""
        out: list[list[str]] = []
        for name, relative, constants in self._watched:
            module = sys.modules.get(name)
            if module is None:
                continue
            space = getattr(module, "__dict__", {})
            for c in constants:
                holder = space if not c.owner else _class_space(space.get(c.owner))
                if holder is None:
                    continue
                now = holder.get(c.name, _MISSING)
                if now is _MISSING or _same(now, c.value):
                    continue
                if c.value is None and not isinstance(now, _SIMPLE):
                    continue  # a placeholder filled in at run time (a lazily made object), not a setting
                out.append([relative, f"{c.owner}.{c.name}" if c.owner else c.name, shown(now, c.name),
                            shown(c.value, c.name)])
                if len(out) >= self.config.max_changes:
                    return out
        return out
