"""What a maintainer asks first: package versions of the process's environment, the driver, and the hashes
of the project's source files (with which changed after the process started).

Read from disk and /proc, never by importing anything into our process: the inspected process may use another
interpreter, and importing torch would cost seconds.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dflash_contract import proc
from dflash_diag.model import NA, Maybe

# Distribution names whose versions go into every report (dist-info name, normalised) -> label.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("torch", "torch"),
    ("triton", "triton"),
    ("flash_linear_attention", "fla"),
    ("fla_core", "fla"),
    ("transformers", "transformers"),
    ("causal_conv1d", "causal-conv1d"),
    ("dflash", "dflash"),
    ("numpy", "numpy"),
    ("nvidia_ml_py", "nvidia-ml-py"),
    ("py_spy", "py-spy"),
    ("wandb", "wandb"),
)
VERSION_KEYS = ("python", "torch", "cuda", "triton", "fla", "transformers", "causal-conv1d", "dflash", "driver")

# Hashing bounds: a snapshot must finish in ~3 s even when the script sits in a huge directory.
MAX_HASHED_FILES = 2000
MAX_HASHED_BYTES = 2 * 1024 * 1024
HASH_BUDGET_S = 1.0
_SKIP_DIRS = frozenset({".git", ".hg", ".venv", "venv", "env", "site-packages", "dist-packages", "__pycache__",
                        "node_modules", "build", "dist", "wandb", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def site_packages_dirs(pid: int) -> tuple[str, ...]:
    """site-packages directories the process has mapped files from (torch's .so files reveal its env)."""
    found: dict[str, None] = {}
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip("\n").split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
                for marker in ("/site-packages/", "/dist-packages/"):
                    if marker in path:
                        found[path[: path.index(marker) + len(marker) - 1]] = None
    except OSError:
        pass
    return tuple(found)


def _python_version(pid: int) -> Maybe[str]:
    # A full X.Y.Z in the interpreter's real path (pyenv, conda, uv) beats libpython's X.Y.
    try:
        match = re.search(r"(?<![\d.])(3\.\d+\.\d+)(?![\d.])", os.path.realpath(f"/proc/{pid}/exe"))
        if match:
            return match.group(1)
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                match = re.search(r"libpython(\d+\.\d+)", line)
                if match:
                    return match.group(1)
    except OSError as exc:
        return NA(f"cannot read /proc/{pid}/maps: {exc.strerror}")
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError as exc:
        return NA(f"cannot read /proc/{pid}/exe: {exc.strerror}")
    match = re.match(r"python(\d+\.\d+)", exe)
    return match.group(1) if match else NA(f"statically linked interpreter ({exe}): version not visible from outside")


def installed_versions(dirs: Sequence[str]) -> dict[str, str]:
    """Versions of PACKAGES from *.dist-info/METADATA in the given site-packages dirs."""
    wanted = dict(PACKAGES)
    versions: dict[str, str] = {}
    for directory in dirs:
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            name, _, rest = entry[: -len(".dist-info")].partition("-")
            label = wanted.get(name.lower().replace("-", "_").replace(".", "_"))
            if label is None or label in versions:
                continue
            version = rest or _metadata_version(Path(directory, entry, "METADATA"))
            if version:
                versions[label] = version
    return versions


def _metadata_version(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for _ in range(20):
                line = fh.readline()
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def torch_cuda_version(dirs: Sequence[str]) -> Maybe[str]:
    """torch.version.cuda, read from torch/version.py without importing torch."""
    for directory in dirs:
        path = Path(directory, "torch", "version.py")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:8192]
        except OSError:
            continue
        match = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.MULTILINE)
        if match:
            value = match.group(1) or match.group(2)
            return value if value else NA("CPU-only torch build (torch.version.cuda is None)")
    return NA("torch not found in the process's site-packages")


def driver_version() -> Maybe[str]:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return NA("no NVIDIA driver on this machine (/proc/driver/nvidia/version missing)")
    match = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([\d.]+)", text)
    return match.group(1) if match else NA("unrecognised /proc/driver/nvidia/version")


def interpreter_site_packages(pid: int, cmdline: Sequence[str]) -> tuple[str, ...]:
    """site-packages of the interpreter (venv first) when the process mapped none (e.g. no torch loaded yet)."""
    roots: list[str] = []
    if cmdline and os.sep in cmdline[0]:
        roots.append(os.path.dirname(os.path.dirname(os.path.abspath(cmdline[0]))))
    try:
        roots.append(os.path.dirname(os.path.dirname(os.readlink(f"/proc/{pid}/exe"))))
    except OSError:
        pass
    found: list[str] = []
    for root in roots:
        lib = Path(root, "lib")
        try:
            found.extend(str(p) for p in sorted(lib.glob("python3*/site-packages")) if p.is_dir())
        except OSError:
            continue
    return tuple(dict.fromkeys(found))


def versions(pid: int, app_versions: Mapping[str, object] | None = None, board_python: str | None = None,
             board_torch: str | None = None, cmdline: Sequence[str] = ()) -> dict[str, Maybe[str]]:
    """python, torch, CUDA, triton, fla, transformers, driver...: the app's own report wins, then the board
    writer, then what is installed where the process's torch lives; N/A with the reason otherwise."""
    dirs = site_packages_dirs(pid) or interpreter_site_packages(pid, cmdline)
    installed = installed_versions(dirs)
    out: dict[str, Maybe[str]] = {}
    out["python"] = board_python or _python_version(pid)
    out["torch"] = board_torch or installed.get("torch") or NA("torch not loaded by the process")
    out["cuda"] = torch_cuda_version(dirs)
    for key in ("triton", "fla", "transformers", "causal-conv1d", "dflash", "numpy", "wandb"):
        reason = "not installed in the process's environment" if dirs else "no site-packages mapped by the process"
        out[key] = installed.get(key) or NA(reason)
    out["driver"] = driver_version()
    for key, value in (app_versions or {}).items():
        if isinstance(value, str) and value:
            out[str(key)] = value
    return out


# --- code hashes -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodeInfo:
    root: Maybe[str]
    how: str  # how the root was found
    files: Mapping[str, str] = field(default_factory=dict)  # path relative to root -> sha256
    changed_after_start: tuple[str, ...] = ()  # relative paths with mtime > process start
    truncated: str | None = None  # why the listing is incomplete


def project_root(cmdline: Sequence[str], cwd: str | None) -> tuple[Maybe[str], str]:
    """The directory of the script the interpreter runs (``python x/train.py``, ``python -m pkg.mod``)."""
    args = list(cmdline[1:]) if cmdline else []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m" and i + 1 < len(args):
            top = args[i + 1].split(".")[0]
            if cwd and os.path.isdir(os.path.join(cwd, top)):
                return cwd, f"python -m {args[i + 1]} run from {cwd}"
            return (NA(f"module {args[i + 1]} is not under the process's cwd"), "-m")
        if arg == "-c":
            return (NA("the program is a -c string: no script directory"), "-c")
        if arg in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        path = arg if os.path.isabs(arg) else os.path.join(cwd or "", arg)
        if path.endswith(".py") or os.path.isfile(path):
            return os.path.dirname(os.path.abspath(path)), f"script {arg}"
        break
    return (NA("no script in the command line"), "none")


def hash_tree(root: str, start_wall_s: float | None, *, budget_s: float = HASH_BUDGET_S,
              clock: object = time.monotonic) -> CodeInfo:
    files: dict[str, str] = {}
    changed: list[str] = []
    truncated: str | None = None
    deadline = time.monotonic() + budget_s
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            if len(files) >= MAX_HASHED_FILES:
                truncated = f"more than {MAX_HASHED_FILES} .py files: listing stops there"
                break
            if time.monotonic() > deadline:
                truncated = f"hashing budget of {budget_s:.1f} s spent"
                break
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            try:
                st = os.stat(path, follow_symlinks=False)
                if not os.path.isfile(path) or os.path.islink(path) or st.st_size > MAX_HASHED_BYTES:
                    continue
                with open(path, "rb") as fh:
                    files[rel] = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                continue
            if start_wall_s is not None and st.st_mtime > start_wall_s:
                changed.append(rel)
        if truncated:
            break
    return CodeInfo(root=root, how="", files=files, changed_after_start=tuple(changed), truncated=truncated)


def process_start_wall_s(pid: int) -> float | None:
    """When the process started, as a wall-clock time (boot time + start ticks)."""
    return proc.start_wall_s(pid)


def code_info(cmdline: Sequence[str], cwd: str | None, start_wall_s: float | None) -> CodeInfo:
    root, how = project_root(cmdline, cwd)
    if isinstance(root, NA):
        return CodeInfo(root=root, how=how)
    info = hash_tree(root, start_wall_s)
    return CodeInfo(root=root, how=how, files=info.files, changed_after_start=info.changed_after_start,
                    truncated=info.truncated)
