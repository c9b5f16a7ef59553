"""codedrift: modules whose source changed on disk after this process imported them (edited but never
reloaded: the running code is not the code you are reading).

- Import times: a ``sys.meta_path`` entry that never finds anything records when each module was first
  looked up. Every import mechanism consults the meta path for a module not yet loaded (``import``
  statements, ``__import__``, ``importlib.import_module``), and only then, so it costs one call per new
  module and nothing for repeated imports. ``install_import_hook()`` is called as early as possible (the
  ``dflash-diag run`` bootstrap does it before the program's first import).
- A stat snapshot ``(mtime_ns, size)`` of every loaded module with an absolute ``.py`` file, taken when
  the module is first seen; a later check re-stats (~4 ms for ~900 files).
- Verdicts: "mtime>import" (changed after the import began), "changed" (stat differs from the first
  snapshot), "content" (same stat, different sha1: project files only), "deleted", or
  "mtime>process_start" for modules imported before the hook, whose file is newer than the process (may
  be a false positive for a lazily imported module edited after start but before its import).
- Hashing only covers files outside site-packages/dist-packages and the stdlib (small, and the ones people edit).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import sysconfig
import time
from dataclasses import dataclass
from typing import Any

from dflash_contract import proc
from dflash_contract.board import CodedriftKeys, PayloadKeys, ProbeName
from probes._common import MAX_RECENT, JsonDict

_IMPORT_NS: dict[str, int] = {}
# /proc/stat's btime is whole seconds: the computed process start can be up to 1 s early.
_START_SLACK_NS = 1_500_000_000
_GENERATED = re.compile(r"/torchinductor_|/\.triton/|/triton/cache/")
_HOOK_STATE = {CodedriftKeys.INSTALLED: False, CodedriftKeys.ACTIVE: True}


class _ImportClock:
    """A meta-path finder that finds nothing: it notes the first lookup of each module, then steps aside."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if _HOOK_STATE[CodedriftKeys.ACTIVE] and name not in _IMPORT_NS:
            _IMPORT_NS[name] = time.time_ns()
        return None


def install_import_hook() -> None:
    """Record import start times from now on (idempotent; call as early as possible)."""
    if _ImportClock not in sys.meta_path:
        # First, so that no other finder answers before the clock has seen the name.
        sys.meta_path.insert(0, _ImportClock)
    _HOOK_STATE[CodedriftKeys.INSTALLED] = True
    _HOOK_STATE[CodedriftKeys.ACTIVE] = True


def import_hook_installed() -> bool:
    return _ImportClock in sys.meta_path


def uninstall_import_hook() -> None:
    """Take the import clock off sys.meta_path (`dflash-diag detach`); the import times noted so far stay."""
    while _ImportClock in sys.meta_path:
        sys.meta_path.remove(_ImportClock)
    _HOOK_STATE[CodedriftKeys.INSTALLED] = False
    _HOOK_STATE[CodedriftKeys.ACTIVE] = False


@dataclass(frozen=True, kw_only=True)
class Config:
    check_interval_s: float = 5.0  # between checks the last verdict is reused
    library_slices: int = 6  # site-packages/stdlib files are re-stat'ed 1/6 per check (each every 30 s)
    hash_max_files: int = 500
    hash_max_bytes: int = 1 << 20


def _process_start_ns() -> int:
    start_s = proc.start_wall_s()  # /proc/self/stat field 22 plus boot time: the contract's one parser
    return int(start_s * 10**9) if start_s is not None else 0


def _library_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(r.rstrip("/") + "/" for r in roots if r))


class _File:
    __slots__ = ("module", "mtime_ns", "size", "sha1", "first_seen_ns")

    def __init__(self, module: str, mtime_ns: int, size: int, sha1: str | None, first_seen_ns: int) -> None:
        self.module, self.mtime_ns, self.size, self.sha1, self.first_seen_ns = module, mtime_ns, size, sha1, first_seen_ns


def _sha1(path: str, limit: int) -> str | None:
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as f:
            return hashlib.sha1(f.read(), usedforsecurity=False).hexdigest()
    except OSError:
        return None


class CodedriftProbe:
    name = "codedrift"

    def __init__(self, config: Config) -> None:
        self.config = config
        install_import_hook()
        self._start_ns = _process_start_ns()
        self._lib_roots = _library_roots()
        self._files: dict[str, _File] = {}
        self._hashed = 0
        self._round = 0
        self._stale_library: dict[str, JsonDict] = {}
        self._project_cache: dict[str, bool] = {}
        self._paths: dict[str, tuple[Any, str | None]] = {}  # module name -> (module object, file or None)
        self._last_check_s = -float("inf")
        self._last: JsonDict = {}
        self._first_check_ns = time.time_ns()
        self.check(self._first_check_ns)

    def _is_project_file(self, path: str) -> bool:
        cached = self._project_cache.get(path)
        if cached is None:
            cached = not path.startswith(self._lib_roots) and "site-packages" not in path and "dist-packages" not in path
            if len(self._project_cache) < 50_000:
                self._project_cache[path] = cached
        return cached

    def check(self, now_ns: int | None = None) -> JsonDict:
        t0 = time.perf_counter()
        now_ns = time.time_ns() if now_ns is None else now_ns
        stale: list[JsonDict] = []
        checked = 0
        if len(self._paths) > 2 * len(sys.modules) + 100:
            self._paths.clear()  # bounded: forget modules that left sys.modules
        slices = max(1, self.config.library_slices)
        this_slice = self._round % slices
        self._round += 1
        for index, (name, mod) in enumerate(list(sys.modules.items())):
            path = self._path_of(name, mod)
            if path is None:
                continue
            if path in self._files and index % slices != this_slice and not self._is_project_file(path):
                # Library files (rarely edited) are re-checked in rotation: each one every `slices` checks.
                known_stale = self._stale_library.get(path)
                if known_stale is not None:
                    stale.append(known_stale)
                continue
            checked += 1
            verdict = self._check_one(name, path, now_ns)
            if not self._is_project_file(path):
                if verdict is None:
                    self._stale_library.pop(path, None)
                else:
                    self._stale_library[path] = verdict
            if verdict is not None:
                stale.append(verdict)
        self._last = {
            PayloadKeys.STATUS: "ok",
            CodedriftKeys.CHECKED_MODULES: checked,
            CodedriftKeys.TRACKED_FILES: len(self._files),
            CodedriftKeys.STALE: stale[:MAX_RECENT],
            CodedriftKeys.STALE_COUNT: len(stale),
            CodedriftKeys.HASHED_FILES: self._hashed,
            CodedriftKeys.IMPORT_HOOK: bool(_IMPORT_NS) or _HOOK_STATE[CodedriftKeys.INSTALLED],
            CodedriftKeys.CHECK_COST_MS: 1e3 * (time.perf_counter() - t0),
            CodedriftKeys.CHECKED_WALL_S: now_ns / 1e9,
        }
        return self._last

    def _path_of(self, name: str, mod: Any) -> str | None:
        """The module's source file when it is worth checking (cached per module object)."""
        cached = self._paths.get(name)
        if cached is not None and cached[0] is mod:
            return cached[1]
        path = getattr(mod, "__file__", None)
        if not (isinstance(path, str) and path.endswith(".py") and os.path.isabs(path)) or _GENERATED.search(path):
            path = None  # no source file, or compiler-generated code (inductor, triton): never edited by hand
        self._paths[name] = (mod, path)
        return path

    def _check_one(self, name: str, path: str, now_ns: int) -> JsonDict | None:
        known = self._files.get(path)
        try:
            st = os.stat(path)
        except OSError:
            return {CodedriftKeys.MODULE: name, CodedriftKeys.FILE: path, CodedriftKeys.IMPORT_WALL_S: None, CodedriftKeys.MTIME_WALL_S: None, CodedriftKeys.HOW: "deleted"}
        if known is None:
            project = self._is_project_file(path)
            sha = None
            if project and self._hashed < self.config.hash_max_files:
                sha = _sha1(path, self.config.hash_max_bytes)
                self._hashed += sha is not None
            self._files[path] = known = _File(name, st.st_mtime_ns, st.st_size, sha, now_ns)
        import_ns = _IMPORT_NS.get(name)
        how = None
        if import_ns is not None and st.st_mtime_ns > import_ns:
            how = "mtime>import"
        elif (st.st_mtime_ns, st.st_size) != (known.mtime_ns, known.size):
            how = "changed"
        elif known.sha1 is not None and _sha1(path, self.config.hash_max_bytes) != known.sha1:
            how = "content"
        elif import_ns is None and known.first_seen_ns == self._first_check_ns and self._start_ns > 0 and st.st_mtime_ns > self._start_ns + _START_SLACK_NS:
            # Imported before the probes started, file newer than the process: edited in between.
            how = "mtime>process_start"
        if how is None:
            return None
        return {
            CodedriftKeys.MODULE: name,
            CodedriftKeys.FILE: path,
            CodedriftKeys.IMPORT_WALL_S: import_ns / 1e9 if import_ns is not None else None,
            CodedriftKeys.MTIME_WALL_S: st.st_mtime_ns / 1e9,
            CodedriftKeys.HOW: how,
        }

    def snapshot(self, now_s: float) -> JsonDict:
        if now_s - self._last_check_s >= self.config.check_interval_s:
            self._last_check_s = now_s
            return self.check()
        return self._last

    def close(self) -> None:
        _HOOK_STATE[CodedriftKeys.ACTIVE] = False


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.CODEDRIFT
PROBE = CodedriftProbe
