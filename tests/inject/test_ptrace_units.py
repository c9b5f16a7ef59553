"""The ptrace injector's decisions that need no process: where a call is safe, the nudge's stack reading, the
method choice, the helper's answer turned into errors, the pause as printed. Real processes:
tests/attach/test_attach_ptrace.py (and every attach test that runs through `--method auto`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from dflash_diag.cli.attach import outcome_json, pause_text
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject import method, ptrace, ptrace_driver
from dflash_diag.inject.injection import Outcome, Run
from dflash_diag.inject.preflight import Target, syscall_name
from dflash_diag.inject.request import Request
from dflash_diag.sources.elfsyms import ProcessSymbols, resolve

FUNCS = ((0x1000, 0x1100, "PyNumber_Add"), (0x1100, 0x1400, "_PyEval_EvalFrameDefault"),
         (0x1400, 0x1480, "PyThread_acquire_lock_timed"), (0x1480, 0x1500, "Py_AddPendingCall"),
         (0x1500, 0x1600, "PyObject_RichCompare"))
SYMBOLS = ProcessSymbols(python_file="/usr/lib/libpython3.12.so.1.0", libc_file=None,
                         addresses={"mmap": 1, "Py_AddPendingCall": 2, "PyRun_SimpleString": 3}, functions=FUNCS)


def test_a_running_thread_is_used_only_outside_the_pending_call_and_lock_machinery() -> None:
    allowed = ptrace.safe_ranges(SYMBOLS)
    assert allowed == [0x1000, 0x1100, 0x1500, 0x1600]  # not the eval loop, the lock, AddPendingCall itself
    assert ptrace_driver.in_ranges(0x1050, allowed) and ptrace_driver.in_ranges(0x15FF, allowed)
    for address in (0x0FFF, 0x1100, 0x1234, 0x1450, 0x1600, 0):
        assert not ptrace_driver.in_ranges(address, allowed), hex(address)


def _stack(*words: int) -> bytes:
    return b"".join(w.to_bytes(8, "little") for w in words)


def test_the_nudge_reads_the_first_return_address_into_the_runtime() -> None:
    text = [0x1000, 0x2000]
    locks = ptrace.lock_wait_ranges(SYMBOLS)
    assert locks == [[0x1400, 0x1480, "PyThread_acquire_lock_timed"]]
    # libc's futex wrapper and sem_wait frames (addresses outside the runtime), then the lock acquire's return
    parked = _stack(0x7F0000001234, 0x7F0000005678, 0x1421, 0x1150)
    assert ptrace_driver.lock_wait_under(parked, text, locks) == ["PyThread_acquire_lock_timed"]
    # the GIL wait (an unexported function of the runtime) comes first: a stale lock address deeper does not count
    gil_wait = _stack(0x7F0000001234, 0x1A00, 0x1421)
    assert ptrace_driver.lock_wait_under(gil_wait, text, locks) == []
    assert ptrace_driver.lock_wait_under(b"", text, locks) == []


def test_auto_prefers_ptrace_and_goes_on_when_it_cannot_be_used() -> None:
    found = {"ptrace": "/usr/bin/python3", "gdb": "/usr/bin/gdb", "remote-exec": "/usr/bin/python3.14"}
    assert method.choose_method("auto", (3, 12), found)[0] == "ptrace"
    assert method.choose_method("auto", (3, 14), found)[0] == "ptrace"
    assert method.choose_method("auto", (3, 14), found, skip={"ptrace"})[0] == "remote-exec"
    assert method.choose_method("auto", (3, 12), found, skip={"ptrace"})[0] == "gdb"
    with pytest.raises(AttachError) as err:
        method.choose_method("auto", (3, 12), {"ptrace": "/x"}, skip={"ptrace"})
    assert err.value.exit_code == ExitCode.MISSING_TOOL and "ptrace cannot be used for it" in str(err.value)
    with pytest.raises(AttachError) as err:
        method.choose_method("ptrace", (3, 12), {"gdb": "/usr/bin/gdb"})  # an aarch64 machine, say
    assert err.value.exit_code == ExitCode.UNSUPPORTED and "x86-64 only" in str(err.value)


def _run(tmp_path: Path, symbols: ProcessSymbols | None = SYMBOLS) -> Run:
    target = Target(pid=os.getpid(), start_ticks=1, exe="/usr/bin/python3", python=(3, 12), free_threaded=False,
                    symbols=symbols, symbols_note=None if symbols else "cannot read /x: gone")
    return Run(target=target, req=Request(tmp_path, os.getpid()), method="ptrace", path="/usr/bin/python3",
               timeout_s=30.0)


@pytest.mark.parametrize(
    ("report", "code", "cls", "text"),
    [
        ({"kind": "permission", "error": "EPERM"}, ExitCode.PERMISSION, AttachError, "not allowed to attach to PID"),
        ({"kind": "gone", "error": "exited"}, ExitCode.NO_PROCESS, AttachError, "no process with PID"),
        ({"kind": "no-safe-thread", "error": "no thread", "touched": False}, ExitCode.ATTACH_FAILED,
         ptrace.PtraceUnavailable, "nothing was injected"),
        ({"kind": "failed", "error": "queue full", "touched": True}, ExitCode.ATTACH_FAILED, AttachError, "queue full"),
    ],
)
def test_the_helpers_answer_becomes_one_typed_error(tmp_path: Path, report: dict, code: int, cls: type,
                                                     text: str) -> None:
    err = ptrace._error(_run(tmp_path), report)
    assert type(err) is cls and err.exit_code == code and text in str(err)


def test_a_helper_that_says_nothing_is_a_failure_that_may_have_touched_the_process() -> None:
    report = ptrace._report(b"", b"Traceback ...\nMemoryError\n", 1)
    assert report["ok"] is False and report["touched"] is True and "MemoryError" in report["error"]


def test_the_plan_carries_addresses_the_program_and_bounds(tmp_path: Path) -> None:
    plan = ptrace.plan_for(_run(tmp_path), "try:\n pass\nexcept BaseException:\n pass\n")
    assert (plan["mmap"], plan["add_pending_call"], plan["run_simple_string"]) == (1, 2, 3)
    program = bytes.fromhex(plan["program_hex"])
    assert program.startswith(b"try:") and program.endswith(b"\0") and len(program) % 8 == 0
    assert plan["hold_s"] == 0.0 and 0 < plan["search_s"] <= ptrace.SEARCH_S
    with pytest.raises(ptrace.PtraceUnavailable, match="needs the runtime's symbols"):
        ptrace.plan_for(_run(tmp_path, symbols=None), "pass\n")


def test_this_interpreters_symbols_name_the_lock_wait_and_its_code() -> None:
    maps = Path("/proc/self/maps").read_text()
    symbols = resolve(os.getpid(), maps, os.readlink("/proc/self/exe"))
    names = {n for _, _, n in symbols.functions}
    assert {"PyThread_acquire_lock_timed", "Py_AddPendingCall"} <= names
    assert ptrace.text_ranges(maps, symbols.python_file)  # the runtime's code is mapped executable
    assert any(name == "PyThread_acquire_lock_timed" for *_, name in ptrace.lock_wait_ranges(symbols))


def _outcome(**kw: object) -> Outcome:
    base = dict(pid=7, action="attach", method="ptrace", debugger=None, python="3.12.3", stopped_s=0.0012,
                waited_s=0.04, total_s=0.3, nudged=True, result={"ok": True, "thread": "MainThread"},
                paused_s=0.0012, threads_paused=1)
    return Outcome(**{**base, **kw})  # type: ignore[arg-type]


def test_the_pause_is_printed_and_in_the_json() -> None:
    assert pause_text(_outcome()) == "paused 1.2 ms (1 thread) by ptrace"
    assert pause_text(_outcome(method="gdb", paused_s=0.31, threads_paused=5)) == "paused 310 ms (5 threads) by gdb"
    assert pause_text(_outcome(method="remote-exec", paused_s=0.0, threads_paused=0)) == "no thread paused (remote-exec)"
    sampled = _outcome(paused_s=0.0067, stops=20, paused_total_s=0.046)
    assert pause_text(sampled) == "paused 6.7 ms (1 thread; 20 stops, 46 ms in all) by ptrace"
    doc = outcome_json(_outcome())
    assert doc["paused_ms"] == 1.2 and doc["threads_paused"] == 1 and doc["method"] == "ptrace"


def test_where_a_main_thread_blocks_is_named() -> None:
    assert syscall_name(23, "x86_64") == "select" and syscall_name(202, "x86_64") == "futex"
    assert syscall_name(999, "x86_64") == "system call 999"


def test_methods_reach_the_command_line() -> None:
    from dflash_diag.cli.attach import _add_common

    parser = argparse.ArgumentParser()
    _add_common(parser)
    assert parser.parse_args(["1", "--method", "ptrace"]).method == "ptrace"
