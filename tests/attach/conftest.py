"""Real attaches: through this command's own ptrace injector (Linux x86-64, no debugger), or a real gdb
(installed by `make setup` as root on Debian) for the tests about the debugger itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from attach_helpers import NO_GDB, PLAIN, Plain, gdb_cannot_call, wait_for


def _skip_unless_ptrace_is_allowed(who: str) -> None:
    from dflash_diag.sources.ptrace_access import has_cap_sys_ptrace, ptrace_scope

    scope = ptrace_scope()
    if scope == 3 or (scope in (1, 2) and not has_cap_sys_ptrace()):
        # the tracer is the test process's grandchild's sibling, never an ancestor of the target: Yama forbids it
        pytest.skip(f"kernel.yama.ptrace_scope is {scope} and this user lacks CAP_SYS_PTRACE: {who} may not "
                    "attach here (run as root, or sysctl kernel.yama.ptrace_scope=0)")


@pytest.fixture(scope="session")
def gdb() -> str:
    path = shutil.which("gdb")
    if path is None:
        pytest.skip(NO_GDB)
    _skip_unless_ptrace_is_allowed("no debugger")
    why = gdb_cannot_call(path)
    if why:
        pytest.skip(why)
    return path




@pytest.fixture(scope="session")
def ptrace_ok() -> None:
    """The ptrace injector can work here (Linux x86-64, ptrace allowed): what `--method auto` then uses."""
    from dflash_diag.inject.method import ptrace_helper, ptrace_unsupported

    if ptrace_helper() is None:
        pytest.skip(ptrace_unsupported())
    _skip_unless_ptrace_is_allowed("the ptrace injector")


@pytest.fixture
def board_dir(tmp_path: Path) -> Path:
    d = tmp_path / "boards"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def start_plain(tmp_path: Path) -> Iterator[Callable[..., Plain]]:
    started: list[subprocess.Popen[str]] = []

    def start(mode: str = "join", *extra: str, python: str = sys.executable, **popen: object) -> Plain:
        script = tmp_path / "plain.py"
        script.write_text(PLAIN)
        counter = tmp_path / f"counter-{len(started)}"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.Popen([python, str(script), str(counter), mode, *extra], stdout=subprocess.PIPE,
                                text=True, env=env, cwd=tmp_path, **popen)  # type: ignore[call-overload]
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready"), line
        plain = Plain(proc, counter)
        wait_for(lambda: plain.count() > 0, 30, "the program to start")
        return plain

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
