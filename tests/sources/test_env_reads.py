"""Which environment variables the installed code a process runs reads (sources/env_reads.py), and how the native
look attaches them to the observation (observe/native_look.env_reads_of): a real program that sets a variable
itself after it started (only its memory has it), a real package on disk that names it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_diag.model import Frame, Observation, StackSample, ThreadSample
from dflash_diag.model.sched import EnvRead
from dflash_diag.observe.native_look import env_reads_of
from dflash_diag.sources import env_reads as er
from dflash_diag.sources.env_reads import env_reads, process_environ, shown_value

SCRIPT = (
    "import os, sys, time\n"
    "os.environ['SOLVER_CACHE_SIZE'] = '16'\n"  # set by the program itself: /proc/PID/environ does not have it
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def program() -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "SOLVER_TOKEN": "s3cr3t-value", "SOLVER_BACKEND": "python"}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def _package(root: Path) -> Path:
    """site-packages/solver/core with a module that reads two variables, and one beside it that reads none."""
    core = root / "site-packages" / "solver" / "core"
    core.mkdir(parents=True)
    (core / "cache.py").write_text("import os\nSIZE = int(os.environ.get('SOLVER_CACHE_SIZE', 1000))\n"
                                   'TOKEN = os.getenv("SOLVER_TOKEN")\nHOME = os.environ["HOME"]\n')
    (core / "add.py").write_text("def add(a, b):\n    return a + b  # SOLVER_BACKEND in a comment is no read\n")
    return core


def test_a_variable_the_program_set_itself_is_linked_to_the_module_that_reads_it(
        program: subprocess.Popen[str], tmp_path: Path) -> None:
    core = _package(tmp_path)
    env = process_environ(program.pid)
    assert env["SOLVER_CACHE_SIZE"] == "16" and env["SOLVER_BACKEND"] == "python"
    reads = {r.name: r for r in env_reads(env, [str(core)])}
    assert reads["SOLVER_CACHE_SIZE"] == EnvRead("SOLVER_CACHE_SIZE", "16", "solver/core/cache.py")
    assert reads["SOLVER_TOKEN"].value == "<set>"  # a name that may hold a secret: its value is never shown
    assert "HOME" not in reads  # process plumbing is not looked for
    assert "SOLVER_BACKEND" not in reads  # named in a comment only, not as a string


def test_the_native_look_reads_the_directories_where_the_samples_run(tmp_path: Path) -> None:
    core = _package(tmp_path)
    frames = (Frame("add", str(core / "add.py"), 2), Frame("main", str(tmp_path / "train.py"), 9))
    other = (Frame("get", "/usr/lib/python3.11/queue.py", 171),)
    hooks = tmp_path / "site-packages" / "torch" / "utils"
    hooks.mkdir(parents=True)
    (hooks / "hooks.py").write_text("import os\nARCH = os.environ.get('TORCH_CUDA_ARCH_LIST')\n")
    framework = (Frame("hook", str(hooks / "hooks.py"), 2),)
    threads = (ThreadSample(1, 11, "worker", True, True, frames), ThreadSample(2, 12, "MainThread", False, False, other),
               ThreadSample(3, 13, "loader", True, True, framework), ThreadSample(4, 14, "loader-2", True, True, framework))
    stacks = tuple(StackSample(4242, float(i), float(i), 0.01, False, threads) for i in range(4))
    obs = Observation(pid=4242, cmdline=(), started_wall_s=0.0, window_s=4.0, stacks=stacks, proc=(), gpus=(),
                      boards=(), process_alive=True, warnings=())
    seen: list[int] = []

    def environ(pid: int) -> dict[str, str]:
        seen.append(pid)
        return {"SOLVER_CACHE_SIZE": "16", "PATH": "/bin", "TORCH_CUDA_ARCH_LIST": "9.0a"}

    # torch's busier directory is the framework's: not read (its variables are the settings catalogue's)
    assert env_reads_of(obs, environ=environ) == (EnvRead("SOLVER_CACHE_SIZE", "16", "solver/core/cache.py"),)
    assert seen == [4242]


def test_reading_is_bounded_and_values_are_words_or_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    core = _package(tmp_path)
    for i in range(5):
        (core / f"m{i}.py").write_text(f"X = 'SOLVER_OPT_{i}'\n")
    env = {f"SOLVER_OPT_{i}": "1" for i in range(5)}
    monkeypatch.setattr(er, "MAX_FILES", 3)  # add.py, cache.py, m0.py: the first three by name
    assert [r.name for r in env_reads(env, [str(core)])] == ["SOLVER_OPT_0"]
    monkeypatch.setattr(er, "MAX_FILES", 300)
    monkeypatch.setattr(er, "MAX_TOTAL_BYTES", 1)  # the budget is spent by the first file read
    assert env_reads(env, [str(core)]) == ()
    assert shown_value("SOLVER_MODE", "fast") == "fast" and shown_value("SOLVER_MODE", "a b;c") == "<set>"
    assert env_reads(env, [str(tmp_path / "gone")]) == ()
