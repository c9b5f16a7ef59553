"""Process hardening for the trainer (seccomp-bpf, no libseccomp needed).

Each registered component gets its own filter stacked on the process, so a
component can be reviewed on its own.  Levels:

  basic  - deny a handful of syscalls we never need (number-only rules)
  audit  - also deny device/terminal ioctls and raw socket families, with
           argument-level rules generated from the tables below
"""
import ctypes
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_AUDIT_ARCH_X86_64 = 0xC000003E

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO_EPERM = 0x00050000 | 1

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06

# x86_64 numbers
_NR = {"ioctl": 16, "socket": 41, "ptrace": 101, "personality": 135, "acct": 163,
       "swapon": 167, "swapoff": 168, "reboot": 169, "kexec_load": 246,
       "init_module": 175, "delete_module": 176, "quotactl": 179}

BASIC_DENY = ["ptrace", "personality", "acct", "swapon", "swapoff", "reboot",
              "kexec_load", "init_module", "delete_module", "quotactl"]

# (syscall, argument index, value) triples
def _audit_rules():
    rules = []
    for base in (0x4B00, 0x5600, 0xAE00, 0x8900):      # console, VT, KVM, sockios
        for k in range(0x60):
            rules.append(("ioctl", 1, base + k))
    for fam in (3, 4, 5, 9, 12, 15, 16, 17, 24, 26, 27, 29, 30, 36, 38, 40):
        for typ in range(1, 7):
            rules.append(("socket", 0, fam | (typ << 8)))
    return rules


def _stmt(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg_off(i):
    return 16 + 8 * i


def compile_policy(level):
    prog = [_stmt(_LD_W_ABS, 4), _stmt(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0), _stmt(_RET_K, _RET_ALLOW)]
    for name in BASIC_DENY:
        prog += [_stmt(_LD_W_ABS, 0), _stmt(_JEQ_K, _NR[name], 0, 1), _stmt(_RET_K, _RET_ERRNO_EPERM)]
    if level == "audit":
        for name, idx, value in _audit_rules():
            prog += [_stmt(_LD_W_ABS, _arg_off(idx)), _stmt(_JEQ_K, value, 0, 3),
                     _stmt(_LD_W_ABS, 0), _stmt(_JEQ_K, _NR[name], 0, 1),
                     _stmt(_RET_K, _RET_ERRNO_EPERM)]
    prog.append(_stmt(_RET_K, _RET_ALLOW))
    return b"".join(prog), len(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_installed = []


def confine(component, level="audit"):
    """Stack this component's filter on the calling thread (and its future threads)."""
    code, n = compile_policy(level)
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(n, ctypes.addressof(buf))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return False
    _installed.append((component, level, n))
    return True


def installed():
    return list(_installed)
