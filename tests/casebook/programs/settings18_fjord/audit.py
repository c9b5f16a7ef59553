"""Syscall auditor for third-party feed adapters (data-handling compliance).

Attaches to the adapter process with ptrace, tallies the system calls it makes and
writes the tally to a JSON report every few seconds. In 'startup' mode it audits the
adapter's start-up window only, then detaches and keeps the report; in 'continuous'
mode it stays attached for the adapter's whole life.

    python audit.py --parent PID --pid ADAPTER_PID --mode startup|continuous --report PATH
"""
import argparse
import collections
import ctypes
import json
import os
import signal
import time

PTRACE_SYSCALL = 24
PTRACE_GETREGS = 12
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_O_TRACESYSGOOD = 1
PTRACE_EVENT_STOP = 128
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs "
        "eflags rsp ss fs_base gs_base ds es fs gs").split()]


def ptrace(req, pid, addr=None, data=None):
    r = libc.ptrace(req, pid, addr, data)
    if r == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return r


def write_report(path, counts, started, attached):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"since": started, "attached": attached,
                   "syscalls": {str(k): v for k, v in counts.most_common()}}, f)
    os.replace(tmp, path)


def idle(parent):
    while os.getppid() == parent:
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--mode", choices=("startup", "continuous"), default="startup")
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--report", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    pid, counts, regs = args.pid, collections.Counter(), Regs()
    started = time.time()
    ptrace(PTRACE_SEIZE, pid, None, PTRACE_O_TRACESYSGOOD)
    ptrace(PTRACE_INTERRUPT, pid)
    entering, last_report = True, time.monotonic()
    while True:
        try:
            _, status = os.waitpid(pid, WALL)
        except ChildProcessError:
            break
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            break
        inject = 0
        sig = os.WSTOPSIG(status)
        if sig == (signal.SIGTRAP | 0x80):
            if entering:
                ptrace(PTRACE_GETREGS, pid, None, ctypes.addressof(regs))
                counts[regs.orig_rax] += 1
            entering = not entering
        elif (status >> 16) != PTRACE_EVENT_STOP:
            inject = sig
        now = time.monotonic()
        if now - last_report > 2.0:
            write_report(args.report, counts, started, True)
            last_report = now
            if os.getppid() != args.parent:
                ptrace(PTRACE_DETACH, pid, None, inject)
                return
        if args.mode == "startup" and time.time() - started > args.window and entering:
            ptrace(PTRACE_DETACH, pid, None, inject)
            write_report(args.report, counts, started, False)
            idle(args.parent)
            return
        ptrace(PTRACE_SYSCALL, pid, None, inject)
    write_report(args.report, counts, started, False)


if __name__ == "__main__":
    main()
