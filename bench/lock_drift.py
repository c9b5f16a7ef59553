"""What the running environment installed against the lock: `make test-latest` prints it, `make lock` writes it.

    python bench/lock_drift.py requirements.lock            # the packages whose version moved, added or gone
    python bench/lock_drift.py requirements.lock --write    # rewrite the lock from this environment

The lock holds every package the project and its extras pull in, at one version each, but torch (and the CUDA
wheels torch brings): TORCH_SPEC picks torch, and a GPU box keeps its own.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

# Left out of the lock: torch and its CUDA runtime wheels (TORCH_SPEC's business), the project itself.
_NOT_LOCKED = re.compile(r"^(torch|triton|cuda-[a-z0-9-]+|nvidia-(?!ml-py)[a-z0-9-]+|dflash-diag|pip|setuptools|wheel)$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, tuple[str, str]]:
    """canonical name -> (name as published, version) of every distribution this interpreter sees."""
    found: dict[str, tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and not _NOT_LOCKED.match(canonical(name)):
            found[canonical(name)] = (name, dist.version)
    return found


def read_lock(path: Path) -> tuple[list[str], dict[str, tuple[str, str]]]:
    header: list[str] = []
    pins: dict[str, tuple[str, str]] = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pins[canonical(match[1])] = (match[1], match[2])
        elif line.startswith("#") and not pins:
            header.append(line)
    return header, pins


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def drift(lock: dict[str, tuple[str, str]], now: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(package, locked version or '-', installed version or '-') for every package that differs."""
    rows = []
    for key in sorted(set(lock) | set(now)):
        old = lock.get(key, ("", "-"))[1]
        new = now.get(key, ("", "-"))[1]
        if old != new:
            rows.append(((now.get(key) or lock[key])[0], old, new))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lock", type=Path)
    parser.add_argument("--write", action="store_true", help="rewrite the lock from this environment")
    args = parser.parse_args(argv)
    try:
        header, pins = read_lock(args.lock)
    except OSError as exc:
        print(f"lock_drift: cannot read {args.lock}: {exc.strerror}", file=sys.stderr)
        return 6
    now = installed()
    rows = drift(pins, now)
    print(f"torch {_torch_version()} (not locked: TORCH_SPEC picks it), python {sys.version.split()[0]}")
    if args.write:
        body = [f"{name}=={version}" for _, (name, version) in sorted(now.items())]
        tmp = args.lock.with_name(args.lock.name + ".tmp")
        tmp.write_text("\n".join([*header, *body]) + "\n")
        tmp.replace(args.lock)
        print(f"{args.lock}: {len(body)} packages, {len(rows)} moved")
        return 0
    if not rows:
        print(f"the newest releases are the locked ones ({len(pins)} packages)")
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{len(rows)} of {len(pins)} locked packages moved (locked -> newest):")
    for name, old, new in rows:
        print(f"  {name:<{width}}  {old} -> {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
