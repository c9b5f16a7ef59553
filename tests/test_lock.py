"""The lock `make setup` installs from pins every dependency the project declares, and leaves torch to TORCH_SPEC."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import lock_drift  # noqa: E402


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = [*project["dependencies"], *(d for group in ("trainer", "nvml", "test", "dev") for d in extras[group])]
    return {lock_drift.canonical(re.match(r"[A-Za-z0-9._-]+", d)[0]) for d in names}


def test_the_lock_pins_every_declared_dependency_but_torch() -> None:
    _, pins = lock_drift.read_lock(ROOT / "requirements.lock")
    assert _declared() - {"torch"} <= set(pins), "pyproject names a package the lock does not pin: make lock"
    assert not {"torch", "triton"} & set(pins)
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version) for _, version in pins.values())


def test_setup_and_ci_install_from_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    install = next(line for line in makefile.splitlines() if "pip install" in line and "-e " in line)
    assert "-c $(LOCK)" in install and "LOCK := requirements.lock" in makefile


def test_drift_names_what_moved_was_added_and_went() -> None:
    lock = {"a": ("A", "1.0"), "b": ("b", "2.0"), "c": ("c", "3.0")}
    now = {"a": ("A", "1.1"), "b": ("b", "2.0"), "d": ("d", "4.0")}
    assert lock_drift.drift(lock, now) == [("A", "1.0", "1.1"), ("c", "3.0", "-"), ("d", "-", "4.0")]
