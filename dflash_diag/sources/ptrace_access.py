"""Whether this user may ptrace a process, and what to do when not: one wording for every command.

py-spy (``top``, ``doctor``, ``snapshot``) reads a process with ptrace, and ``attach``/``detach`` write into one
with it; both refuse with the same advice, from the same facts: Yama's ``kernel.yama.ptrace_scope`` and this
process's CAP_SYS_PTRACE (/proc/self/status).
"""

from __future__ import annotations

PTRACE_FIX = (
    "run dflash-diag as the process's user with ptrace allowed (sudo sysctl kernel.yama.ptrace_scope=0), "
    "or as root / with CAP_SYS_PTRACE (sudo dflash-diag ...); in a container add the SYS_PTRACE capability "
    "(docker run --cap-add SYS_PTRACE; Kubernetes: securityContext.capabilities.add: [SYS_PTRACE])"
)
CAP_SYS_PTRACE_BIT = 19


def _read_text(path: str, limit: int = 1 << 20) -> str:
    with open(path, "rb") as fh:
        return fh.read(limit).decode("utf-8", "replace")


def ptrace_scope() -> int | None:
    """The Yama ptrace policy (0: classic, 1: descendants only, 2: admin only, 3: none); None without Yama."""
    try:
        value = _read_text("/proc/sys/kernel/yama/ptrace_scope").strip()
    except OSError:
        return None
    return int(value) if value.isdigit() else None


def has_cap_sys_ptrace(status_text: str | None = None) -> bool:
    text = status_text if status_text is not None else _read_text("/proc/self/status")
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << CAP_SYS_PTRACE_BIT))
    return False


def scope_note() -> str:
    """`` (kernel.yama.ptrace_scope is N here)`` when Yama restricts ptrace, else empty: said beside a refusal."""
    scope = ptrace_scope()
    return f" (kernel.yama.ptrace_scope is {scope} here)" if scope else ""


def scope_refusal(scope: int | None, cap: bool) -> str | None:
    """Why Yama forbids us to attach before we try (scope 1 is left to the attempt: PR_SET_PTRACER may allow it)."""
    if scope == 3:
        return "kernel.yama.ptrace_scope is 3: no process may be traced on this machine until reboot"
    if scope == 2 and not cap:
        return f"kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach; {PTRACE_FIX}"
    return None


def not_permitted(pid: int, what: str = "attach to") -> str:
    """The one refusal line: ``not allowed to attach to PID N (kernel.yama.ptrace_scope is 1 here): <fix>``."""
    return f"not allowed to {what} PID {pid}{scope_note()}: {PTRACE_FIX}"
