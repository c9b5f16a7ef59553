"""The decisions and the generated text of `dflash-diag attach` that do not need a debugger.

What the debugger is told (gdb commands, the lldb script, the 3.14 remote_exec command line), which method
is chosen, the fixed program and how it sits in memory, the refusals, and the ELF symbol reader (on the
real interpreter running these tests). The real attach is tests/attach/ (and the ptrace driver's, tests/inject/test_ptrace_*.py).
"""

from __future__ import annotations

import ast
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from dflash_contract import attach as protocol
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject import gdb, lldb, method, nudge, preflight, remote_exec, request
from dflash_diag.inject import program as fixed
from dflash_diag.sources import elfsyms, ptrace_access

BOOT = "/opt/venv/lib/python3.12/site-packages/probes/_attach_boot.py"
CTRL = "/run/user/1000/dflash-diag/.attach-42.0123456789abcdef.control"


def test_fixed_program_is_one_try_that_execs_the_boot_file_with_the_control_path() -> None:
    program = fixed.fixed_program(BOOT, CTRL)
    tree = ast.parse(program)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Try)
    assert [type(h.type).__name__ for h in tree.body[0].handlers] == ["Name"]  # except BaseException
    assert repr(BOOT) in program and repr(CTRL) in program
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert names == set()  # binds nothing in __main__


@pytest.mark.parametrize("bad", ["relative/path.py", "/tmp/x'); import os; os.system('id') #", "/tmp/a\nb",
                                 "/tmp/a\\b", "/tmp/../etc/passwd", "/tmp/" + "x" * 500, "/tmp/é"])
def test_paths_with_odd_characters_are_refused(bad: str) -> None:
    with pytest.raises(AttachError) as err:
        fixed.fixed_program(BOOT, bad)
    assert err.value.exit_code == ExitCode.BAD_INPUT


def test_page_words_hold_the_nul_terminated_program_in_one_page() -> None:
    program = fixed.fixed_program(BOOT, CTRL)
    words = fixed.page_words(program)
    data = b"".join(w.to_bytes(8, "little") for _, w in words)
    assert data.rstrip(b"\0") == program.encode() and data[len(program)] == 0
    assert [off for off, _ in words] == list(range(0, len(data), 8)) and len(data) <= fixed.PAGE_BYTES


def test_read_back_words_parses_gdb_x_output() -> None:
    out = "0x7f0000001000:\t0x5f5f200a3a797274\t0x0000000000000001\n0x7f0000001010:\t0x0000000000000002\n"
    assert gdb.read_back_words(out) == [0x5F5F200A3A797274, 1, 2]


def test_lldb_script_maps_writes_queues_and_detaches() -> None:
    program = fixed.fixed_program(BOOT, CTRL)
    cmds = lldb.lldb_commands(program)
    assert "mmap" in cmds[0] and "$dd_page" in cmds[0]
    pokes = [c for c in cmds if c.startswith("expr -l c -- *(unsigned long long*)")]
    assert len(pokes) == len(fixed.page_words(program))
    assert "Py_AddPendingCall" in cmds[-2] and "PyRun_SimpleString" in cmds[-2] and cmds[-1] == "process detach"


def test_remote_exec_command_passes_only_the_pid_and_a_checked_path() -> None:
    argv = remote_exec.remote_exec_argv("/usr/bin/python3.14", 42, "/run/user/1000/dflash-diag/.attach-42.ab.py")
    assert argv[:3] == ["/usr/bin/python3.14", "-I", "-c"]
    assert argv[3] == "import sys; sys.remote_exec(42, '/run/user/1000/dflash-diag/.attach-42.ab.py')"
    with pytest.raises(AttachError):
        remote_exec.remote_exec_argv("/usr/bin/python3.14", 42, "/tmp/x'); evil('")


FOUND_ALL = {"gdb": "/usr/bin/gdb", "cuda-gdb": "/usr/local/cuda/bin/cuda-gdb", "lldb": "/usr/bin/lldb",
             "remote-exec": "/usr/bin/python3.14"}


@pytest.mark.parametrize(
    ("requested", "version", "found", "expected"),
    [
        ("auto", (3, 14), FOUND_ALL, "remote-exec"),
        ("auto", (3, 12), FOUND_ALL, "gdb"),
        ("auto", (3, 12), {**FOUND_ALL, "gdb": None}, "cuda-gdb"),  # the H200 box: no gdb, cuda-gdb
        ("auto", (3, 12), {"lldb": "/usr/bin/lldb"}, "lldb"),
        ("auto", (3, 14), {**FOUND_ALL, "remote-exec": None}, "gdb"),
        ("cuda-gdb", (3, 12), FOUND_ALL, "cuda-gdb"),
        ("gdb", (3, 14), FOUND_ALL, "gdb"),
    ],
)
def test_method_choice(requested: str, version, found, expected: str) -> None:
    assert method.choose_method(requested, version, found)[0] == expected


@pytest.mark.parametrize(
    ("requested", "version", "found", "code", "text"),
    [
        ("auto", (3, 12), {}, ExitCode.MISSING_TOOL, "no debugger"),
        ("gdb", (3, 12), {"cuda-gdb": "/x"}, ExitCode.MISSING_TOOL, "gdb is not installed"),
        ("remote-exec", (3, 12), FOUND_ALL, ExitCode.UNSUPPORTED, "Python 3.14+"),
        ("remote-exec", (3, 14), {}, ExitCode.MISSING_TOOL, "3.14 interpreter"),
        ("telepathy", (3, 12), FOUND_ALL, ExitCode.USAGE, "unknown method"),
    ],
)
def test_method_refusals(requested: str, version, found, code: int, text: str) -> None:
    with pytest.raises(AttachError) as err:
        method.choose_method(requested, version, found)
    assert err.value.exit_code == code and text in str(err.value)


def test_cuda_gdb_is_found_in_the_cuda_toolkit_when_not_on_path(tmp_path: Path) -> None:
    tool = tmp_path / "cuda" / "bin" / "cuda-gdb"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    env = {"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "cuda")}
    assert method.find_debugger("cuda-gdb", env) == str(tool)
    assert method.find_debugger("gdb", env) is None


def test_remote_exec_helper_is_the_targets_own_314_interpreter(tmp_path: Path) -> None:
    exe = tmp_path / "python3.14"
    exe.write_text("")
    exe.chmod(0o755)
    target = preflight.Target(pid=1, start_ticks=0, exe=str(exe), python=(3, 14), free_threaded=False)
    assert method.remote_exec_helper(target) == str(exe)
    older = preflight.Target(pid=1, start_ticks=0, exe=str(exe), python=(3, 12), free_threaded=False)
    assert method.remote_exec_helper(older) is None


@pytest.mark.parametrize(
    ("maps", "exe", "expected"),
    [
        ("7f00-7f01 r--p 0 fe:00 1 /usr/lib/libpython3.12.so.1.0\n", "/usr/bin/python3", ((3, 12), False, True)),
        ("7f00-7f01 r--p 0 fe:00 1 /opt/lib/libpython3.13t.so.1.0\n", "/x/python", ((3, 13), True, True)),
        ("", "/usr/bin/python3.11", ((3, 11), False, True)),
        ("", "/usr/bin/python3", (None, False, True)),
        ("", "/usr/bin/sleep", (None, False, False)),
    ],
)
def test_python_version_from_maps_and_exe(maps: str, exe: str, expected) -> None:
    assert preflight.python_of(maps, exe) == expected


@pytest.mark.parametrize("version", [(3, 10), (2, 7), (3, 15)])
def test_unsupported_versions_are_refused(version) -> None:
    with pytest.raises(AttachError) as err:
        preflight.check_version(42, version)
    assert err.value.exit_code == ExitCode.UNSUPPORTED and "3.11 to 3.14" in str(err.value)


def test_yama_scope_refusals() -> None:
    assert ptrace_access.scope_refusal(None, False) is None and ptrace_access.scope_refusal(0, False) is None
    assert ptrace_access.scope_refusal(1, False) is None  # PR_SET_PTRACER may allow it: left to the attempt
    assert "CAP_SYS_PTRACE" in ptrace_access.scope_refusal(2, False) and ptrace_access.scope_refusal(2, True) is None
    assert "until reboot" in ptrace_access.scope_refusal(3, True)
    assert ptrace_access.has_cap_sys_ptrace("CapEff:\t0000000000080000\n") and not ptrace_access.has_cap_sys_ptrace("CapEff:\t0\n")


def test_gdb_output_parsing() -> None:
    assert gdb.parse_value("$1 = 0x30c03f0\n") == 0x30C03F0
    assert gdb.parse_value("$3 = 0\n$4 = -512\n") == -512
    assert gdb.parse_value('No symbol "Py_Version" in current context.\n') is None
    threads = ("  Id   Target Id                                   Frame \n"
               "* 1    Thread 0x7f0b8a7efb80 (LWP 11369) \"python3\" __futex_abstimed_wait_common64 () at x.c:57\n"
               "  2    Thread 0x7f0b89fff6c0 (LWP 11371) \"python3\" 0x00007f in ?? ()\n")
    assert gdb.main_thread_number(threads, 11369) == "1" and gdb.main_thread_number(threads, 11371) == "2"
    assert gdb.main_thread_number("* 1    process 500 \"sleep\" 0x0 in ?? ()\n", 500) == "1"


BT = """#0  __futex_abstimed_wait_common64 (private=..., cancel=...) at ./nptl/futex-internal.c:57
#1  0x00007f38520aed90 in __new_sem_wait_slow64 (sem=...) at ./nptl/sem_waitcommon.c:183
#2  0x00007f38524a9370 in ?? () from /usr/lib/libpython3.11.so.1.0
#3  0x00007f3852513000 in ?? () from /usr/lib/libpython3.11.so.1.0
"""


def test_backtrace_frames_gdb_cannot_name_are_named_from_the_elf_symbols() -> None:
    symbols = elfsyms.ProcessSymbols(python_file="libpython", libc_file=None, addresses={},
                                     functions=((0x7F38524A9000, 0x7F38524A9400, "PyThread_acquire_lock_timed"),))
    names = gdb.backtrace_functions(BT, symbols)
    assert names == ["__futex_abstimed_wait_common64", "__new_sem_wait_slow64", "PyThread_acquire_lock_timed", "??"]


def test_nudge_only_a_futex_wait_under_a_python_lock_on_x86_64() -> None:
    lock = ["__futex_abstimed_wait_common64", "__new_sem_wait_slow64", "PyThread_acquire_lock_timed"]
    assert nudge.should_nudge(202, -512, lock, "x86_64")
    assert nudge.should_nudge(202, -516, ["futex_wait", "_PySemaphore_Wait", "_PyMutex_LockTimed"], "x86_64")
    assert not nudge.should_nudge(202, -512, lock, "aarch64")
    assert not nudge.should_nudge(202, 0, lock, "x86_64")  # not interrupted in the syscall
    assert not nudge.should_nudge(23, -514, lock, "x86_64")  # select(), not a futex
    assert not nudge.should_nudge(202, -512, ["__futex_abstimed_wait_common64", "cudaDeviceSynchronize"], "x86_64")
    assert not nudge.should_nudge(-1, -4, lock, "x86_64")


def test_control_document_validates_action_and_probe_names(tmp_path: Path) -> None:
    req = request.Request(tmp_path, 42)
    doc = request.control_document(req, "attach", ["gil", "queues", "gil"], str(tmp_path), 5.0, "gdb", "/opt")
    assert doc["probes"] == ["gil", "queues"] and doc["pid"] == 42 and doc["result_path"] == str(req.result)
    with pytest.raises(AttachError):
        request.control_document(req, "shell", [], None, 5.0, "gdb", "/opt")
    with pytest.raises(AttachError):
        request.control_document(req, "attach", ["gil", "os.system"], None, 5.0, "gdb", "/opt")


def test_request_files_are_private_and_answers_are_checked(tmp_path: Path) -> None:
    req = request.Request(tmp_path, 42)
    request.write_private(req.control, b"{}")
    assert stat.S_IMODE(os.stat(req.control).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        request.write_private(req.control, b"{}")  # never over an existing (or planted) file
    assert request.read_result(req.result, req.nonce) is None
    request.write_private(req.result, json.dumps({"schema": protocol.SCHEMA, "nonce": "other"}).encode())
    with pytest.raises(AttachError, match="not the answer"):
        request.read_result(req.result, req.nonce)
    os.unlink(req.result)
    request.write_private(req.result, json.dumps({"schema": protocol.SCHEMA, "nonce": req.nonce, "ok": True}).encode())
    assert request.read_result(req.result, req.nonce)["ok"] is True
    os.chmod(req.result, 0o644)
    with pytest.raises(AttachError, match="not a private file"):
        request.read_result(req.result, req.nonce)
    os.unlink(req.result)
    os.symlink(req.control, req.result)
    with pytest.raises(AttachError):
        request.read_result(req.result, req.nonce)


def test_clean_stale_removes_only_its_own_old_files(tmp_path: Path) -> None:
    mine_dead = tmp_path / ".attach-999999999.0123456789abcdef.control"
    mine_live = tmp_path / f".attach-{os.getpid()}.0123456789abcdef.result"
    other = tmp_path / "notes.attach-1.txt"
    board = tmp_path / "123.json"
    for p in (mine_dead, mine_live, other, board):
        p.write_text("x")
    request.clean_stale(tmp_path)
    assert not mine_dead.exists() and mine_live.exists() and other.exists() and board.exists()
    old = time.time() - 3600
    os.utime(mine_live, (old, old))
    request.clean_stale(tmp_path)
    assert not mine_live.exists() and other.exists()


def test_elf_symbols_of_this_interpreter() -> None:
    maps = Path("/proc/self/maps").read_text()
    symbols = elfsyms.resolve(os.getpid(), maps, os.readlink("/proc/self/exe"))
    for name in ("Py_Version", "Py_AddPendingCall", "PyRun_SimpleString", "mmap"):
        assert name in symbols.addresses
    assert elfsyms.read_version(os.getpid(), symbols.addresses["Py_Version"])[:3] == tuple(sys.version_info[:3])
    assert symbols.name_of(symbols.addresses["Py_AddPendingCall"] + 1) == "Py_AddPendingCall"
    import ctypes

    py = ctypes.pythonapi
    assert ctypes.cast(py.Py_AddPendingCall, ctypes.c_void_p).value == symbols.addresses["Py_AddPendingCall"]
    libc = ctypes.CDLL(None)
    assert ctypes.cast(libc.mmap, ctypes.c_void_p).value == symbols.addresses["mmap"]


def test_elf_reader_refuses_what_is_not_elf(tmp_path: Path) -> None:
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\0" * 10)
    with pytest.raises(elfsyms.ElfError):
        elfsyms.read_dynsym(str(junk))
    text = tmp_path / "text"
    text.write_text("#!/bin/sh\n")
    with pytest.raises(elfsyms.ElfError, match="not an ELF"):
        elfsyms.read_dynsym(str(text))


# --- the protocol (dflash_contract.attach): spelled once, checked on both sides ------------------------------

PROTOCOL_LITERALS = ("dflash-diag.attach/1", '".claimed"', '.control"', '.result"', '"attach", "detach", "inventory"')


def test_the_attach_protocol_is_spelled_in_the_contract_only() -> None:
    root = Path(__file__).resolve().parents[2]
    files = [p for pkg in ("dflash_diag", "probes", "dflash_contract") for p in (root / pkg).rglob("*.py")]
    spelled = sorted({f"{p.relative_to(root)}: {lit}" for p in files for lit in PROTOCOL_LITERALS
                      if lit in p.read_text() and p != root / "dflash_contract" / "attach.py"})
    assert spelled == []


def test_request_files_are_named_by_the_protocol(tmp_path: Path) -> None:
    req = request.Request(tmp_path, 42)
    assert len(req.nonce) == protocol.NONCE_HEX_CHARS
    for path in req.paths():
        assert protocol.OWN_FILE.fullmatch(path.name), path.name  # what clean_stale may remove: all, and only these
    assert protocol.is_result_path(str(req.result), str(req.control))
    assert not protocol.is_result_path(str(tmp_path / "elsewhere" / req.result.name), str(req.control))
    assert request.page_note_path(tmp_path, 42).name == protocol.page_name(42)


def test_the_bootstrap_checks_a_request_with_the_protocols_rules(tmp_path: Path) -> None:
    req = request.Request(tmp_path, os.getpid())
    doc = request.control_document(req, "detach", ["gil"], str(tmp_path), time.time() + 5, "gdb", "/opt")
    protocol.check_control(doc, os.getpid())  # what the tool writes, the bootstrap accepts
    for bad, message in (({"pid": 1}, "for PID 1"), ({"action": "rm"}, "unknown action"),
                         ({"deadline_wall_s": time.time() - 1}, "expired"), ({"board_dir": "rel"}, "absolute"),
                         ({"lease": {"pid": 0, "start_ticks": 1}}, "lease must be")):
        with pytest.raises((ValueError, TimeoutError), match=message):
            protocol.check_control({**doc, **bad}, os.getpid())
