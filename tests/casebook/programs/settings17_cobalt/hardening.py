"""Process hardening profiles for workers that handle customer-supplied files.

standard: no_new_privs (the worker and anything it starts can never gain privileges)
strict:   standard, plus the speculative-store-bypass mitigation for the worker process
"""
import ctypes
import os

PR_SET_NO_NEW_PRIVS = 38
PR_GET_SPECULATION_CTRL = 52
PR_SET_SPECULATION_CTRL = 53
PR_SPEC_STORE_BYPASS = 0
PR_SPEC_DISABLE = 1 << 2

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(*args):
    rc = _libc.prctl(*[ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (5 - len(args)))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return rc


def apply(profile):
    if profile not in ("standard", "strict"):
        raise ValueError(f"unknown hardening profile {profile!r}")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if profile == "strict":
        try:
            _prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, PR_SPEC_DISABLE)
        except OSError:
            pass  # CPU or kernel without the control: nothing to mitigate
    return status()


def status():
    try:
        return _prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS)
    except OSError:
        return -1
