"""Where a process's time goes in the C library: the chain of libc calls below its Python lines, and what the C
library is known to do there. Pure.

A process whose CPU goes largely to the kernel is in system calls, and neither its Python stacks (they end at the
line that called into C) nor /proc's counters (read-like and write-like calls only) say which. Its native stacks
do: ``time_mktime -> timelocal -> tzset -> fstatat64`` is a stat of the time-zone file under every ``time.mktime``;
``sock_sendto -> getaddrinfo -> _nss_files_gethostbyname3_r -> __open_nocancel`` is /etc/hosts opened for every
datagram. This module charges each working sample (``native.is_waiting`` tells the others) to its chain: the frames
from the first C library frame below the innermost Python frame down to the innermost one, unnamed addresses left
out; chains are grouped by their first libc call (the one the program's own code or its interpreter made).

Some chains have a known mechanism, said with the chain where what decides it was read (``MECHANISMS``): glibc's
time-zone code re-reads the zone on every conversion while TZ is unset; a host name given to a socket call is
resolved again on every call; random numbers drawn from the kernel cost a system call each.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dflash_diag.analysis.native import (
    MIN_SAMPLES,
    below_python,
    is_named,
    is_waiting,
    library_name,
    short_name,
    thread_stacks,
)
from dflash_diag.model import Frame, NativeProfile, NativeStack
from dflash_diag.model.sched import IoRates

MIN_CHAIN_SHARE = 0.15  # of the working samples: a chain said on its own
MAX_CHAIN_FRAMES = 5  # the first call, the innermost and the steps between, at most this many shown
_LIBC = re.compile(r"^(libc[.-]|libpthread[.-]|libresolv[.-]|libnss_\w+[.-])")
# The C library's thin wrappers around one system call (glibc's internal names included: __GI___read,
# __libc_read, __open_nocancel, fstatat64): a chain that ends in one is in the kernel there.
_SYSCALL = re.compile(
    r"^(__)?(GI_+)?(libc_)?(open|openat|read|pread|readv|write|pwrite|writev|close|fstat|stat|lstat|fstatat|"
    r"newfstatat|statx|lseek|access|faccessat2?|readlink|readlinkat|getdents|mmap|munmap|mprotect|madvise|brk|"
    r"socket|connect|bind|sendto|sendmsg|send|getsockname|getsockopt|setsockopt|ioctl|fcntl|getrandom|uname|"
    r"getpid|gettid|sched_yield|prctl|mremap|fsync|fdatasync|unlink|rename|mkdir)(64)?(_nocancel)?$")

# Locks and condition signals: the interpreter's and the libraries' own hand-offs between threads, not a use of the
# C library the program chose (a wake-up's futex call is their cost, said by the GIL's and the waits' findings).
_SYNC = re.compile(r"^(__)?(pthread_(mutex|cond|rwlock|spin)_\w+|sem_\w+|lll_\w+)$")


@dataclass(frozen=True, slots=True)
class LibcChain:
    """The samples under one first C library call: its commonest path down, and where they entered the kernel."""

    calls: tuple[str, ...]  # short names, the first libc call first, the innermost last
    share: float  # of the working samples
    syscalls: tuple[str, ...]  # the system-call wrappers its samples end in, commonest first
    syscall_share: float  # of its samples, those ending in a system call

    def __str__(self) -> str:
        calls = list(self.calls)
        if len(calls) > MAX_CHAIN_FRAMES:
            calls = [*calls[:2], "...", *calls[-(MAX_CHAIN_FRAMES - 3):]]
        text = f"{' > '.join(calls)} {100.0 * self.share:.0f}%"
        if self.syscalls and self.syscall_share >= 0.5:
            text += f", ending in system calls ({', '.join(self.syscalls)})"
        return text


@dataclass(frozen=True, slots=True)
class Mechanism:
    """What the C library is known to do in a chain with one of ``frames``, said where ``unset`` (a variable of the
    process's environment) is not set, if given."""

    frames: re.Pattern[str]
    text: str
    unset: str = ""


MECHANISMS = (
    # glibc's tzset_internal returns early only when TZ is set and unchanged; with TZ unset it opens the default zone
    # again, a stat of /etc/localtime per call (mktime, localtime, strftime and ctime all call tzset).
    Mechanism(re.compile(r"^(__)?(tzset|tzset_internal|tzfile_read|tz_convert|tz_compute|tzfile_compute)$"),
              "TZ is not set in its environment, so glibc's tzset, which mktime, localtime and strftime call, checks "
              "/etc/localtime again on every call (a stat of the file, to see whether the zone changed); with TZ set "
              "(TZ=:/etc/localtime names the same zone) the zone is read once", unset="TZ"),
    # CPython's socket calls resolve a host name given with each call (setipaddr); only a numeric address skips it.
    Mechanism(re.compile(r"^(getaddrinfo|gethostbyname\w*|_nss_\w+|__nss_\w+|getnameinfo|__?res_\w+|"
                         r"__libc_res_\w+)$"),
              "a host name resolved again on every call: getaddrinfo goes through glibc's name service each time "
              "(/etc/nsswitch.conf, /etc/hosts opened and read, then DNS); resolving the name once and passing the "
              "address skips it"),
    # os.urandom, random.SystemRandom and secrets read the kernel's generator: one system call per draw.
    Mechanism(re.compile(r"^(getrandom|getentropy)$"),
              "random numbers drawn from the kernel (os.urandom, random.SystemRandom, secrets), a system call per "
              "draw; a seeded generator (random.Random, numpy's default_rng) draws them in user space"),
)


def libc_chains(stacks: Iterable[NativeStack], *, n: int = 2) -> tuple[LibcChain, ...]:
    """The chains (``LibcChain``) holding ``MIN_CHAIN_SHARE`` of the stacks' working samples or more, largest
    first; () with fewer than ``native.MIN_SAMPLES`` working samples."""
    total = 0
    paths: dict[str, Counter[tuple[str, ...]]] = {}
    ends: dict[str, Counter[str]] = {}
    in_kernel: Counter[str] = Counter()
    for stack in stacks:
        if is_waiting(stack.frames):
            continue
        total += stack.count
        path = _libc_path(stack.frames)
        if not path or _SYNC.match(path[0]):
            continue
        paths.setdefault(path[0], Counter())[path] += stack.count
        if _SYSCALL.match(path[-1]):
            ends.setdefault(path[0], Counter())[path[-1]] += stack.count
            in_kernel[path[0]] += stack.count
    if total < MIN_SAMPLES:
        return ()
    out = []
    for first, counted in sorted(paths.items(), key=lambda kv: -sum(kv[1].values())):
        count = sum(counted.values())
        if count / total < MIN_CHAIN_SHARE:
            break
        calls = counted.most_common(1)[0][0]
        syscalls = tuple(name for name, _ in ends.get(first, Counter()).most_common(3))
        out.append(LibcChain(calls=calls, share=count / total, syscalls=syscalls,
                             syscall_share=in_kernel[first] / count))
    return tuple(out[:n])


def _libc_path(frames: tuple[Frame, ...]) -> tuple[str, ...]:
    """The sample's named frames from its first C library frame below its Python line to the innermost, short
    names, each step once; () when it makes no C library call."""
    below = list(reversed(below_python(frames)))  # the outermost C frame first
    start = next((i for i, f in enumerate(below) if _LIBC.match(library_name(f.filename)) and is_named(f)), None)
    if start is None:
        return ()
    path: list[str] = []
    for frame in below[start:]:
        name = short_name(frame.name) if is_named(frame) else ""
        if name and (not path or path[-1] != name):
            path.append(name)
    return tuple(path)


def mechanisms(chains: Iterable[LibcChain], env: Mapping[str, str]) -> tuple[str, ...]:
    """The known mechanisms of the chains (``MECHANISMS``), each once, where the environment read (``env``: the
    variables the mechanisms name, as the process has them) allows."""
    said: list[str] = []
    for chain in chains:
        for mech in MECHANISMS:
            if mech.text in said or not any(mech.frames.match(c) for c in chain.calls):
                continue
            if mech.unset and mech.unset in env:
                continue
            said.append(mech.text)
    return tuple(said)


def chains_text(stacks: Iterable[NativeStack], env: Mapping[str, str], *,
                lead: str = "its native samples in the C library", io: IoRates | None = None,
                chains: Sequence[LibcChain] | None = None) -> str:
    """"its native samples in the C library: timelocal > tzset > fstatat64 62%, ending in system calls (fstatat64):
    TZ is not set ..." for a process's stacks (``lead`` first), the dynamic linker's share where it runs during
    calls (``loader_text``), and what its I/O counters (``io``) give each of the chains' reads or writes when that
    is a few bytes (``tiny_calls_text``); "" when neither chains nor the linker hold enough of its time.
    ``chains``: ``libc_chains(stacks)``, where the caller has them already."""
    stacks = tuple(stacks)
    chains = libc_chains(stacks) if chains is None else chains
    loader = loader_text(stacks, env)
    if not chains:
        return loader
    text = f"{lead}: " + "; ".join(str(c) for c in chains)
    known = mechanisms(chains, env)
    return (text + (": " + "; ".join(known) if known else "") + (f"; {loader}" if loader else "")
            + tiny_calls_text(chains, io))


# The dynamic linker: a process past its start-up does not run it, unless a call's symbol is resolved each time.
_LOADER = re.compile(r"^ld-linux[\w.-]*\.so|^ld\.so|^ld64\.so")


def loader_text(stacks: Iterable[NativeStack], env: Mapping[str, str]) -> str:
    """"the dynamic linker (ld-linux-x86-64.so.2) runs in 51% of its working samples, below its calls: ..." where
    it holds MIN_CHAIN_SHARE of them or more (py-spy names the library even where the linker's symbols are
    stripped), with ``LD_BIND_NOT`` where the environment read has it; "" otherwise."""
    total = hits = 0
    library = ""
    for stack in stacks:
        if is_waiting(stack.frames):
            continue
        total += stack.count
        frame = next((f for f in below_python(stack.frames) if _LOADER.match(library_name(f.filename))), None)
        if frame is not None:
            hits += stack.count
            library = library_name(frame.filename)
    if total < MIN_SAMPLES or hits / total < MIN_CHAIN_SHARE:
        return ""
    text = (f"the dynamic linker ({library}) runs in {100.0 * hits / total:.0f}% of its working samples, below its "
            "calls: symbols resolved while it runs, not once at start-up")
    if "LD_BIND_NOT" in env:
        text += (f" (LD_BIND_NOT={env['LD_BIND_NOT']} in its environment: a lazily bound function is resolved again "
                 "on every call)")
    return text


def threads_libc_text(profile: NativeProfile | None, tids: Collection[int], env: Mapping[str, str],
                      io: IoRates | None = None, chains: Sequence[LibcChain] | None = None) -> str:
    """"in the C library: timelocal > tzset > fstatat64 100%, ...": the chains of the threads
    ``tids`` (kernel TIDs) in the process's native profile, with their mechanisms (``env``: the process's
    variables the mechanisms read, ``Observation.native_env``) and, where they end in reads or writes, what the
    process's I/O counters (``io``, over the window) say each call carried when that is a few bytes; "" when no
    chain holds enough of their time. ``chains``: theirs (``libc_chains``), where the caller has them already."""
    return chains_text(thread_stacks(profile, tids), env, lead="in the C library", io=io, chains=chains)


def chain_ends(chains: Iterable[LibcChain]) -> set[str]:
    """The system-call wrappers the chains' samples end in."""
    return {name for chain in chains for name in chain.syscalls}


# Read and write calls this frequent carrying this few bytes each: a system call per byte or field, where a buffer
# would make one per several KiB (an unbuffered stream: Python's buffering=0, subprocess's bufsize=0).
SMALL_CALLS_PER_S = 2_000.0
TINY_CALL_BYTES = 32.0
_READS = re.compile(r"^(__)?(GI_+)?(libc_)?(read|readv|pread|recv|recvfrom|recvmsg)(64)?(_nocancel)?$")
_WRITES = re.compile(r"^(__)?(GI_+)?(libc_)?(write|writev|pwrite|send|sendto|sendmsg)(64)?(_nocancel)?$")


def tiny_calls_text(chains: Iterable[LibcChain], io: IoRates | None) -> str:
    """"; the process made 150,000 read calls a second of 1 byte each on average: ..." where the chains end in
    reads (or writes) and the process's counters say those calls were many and tiny; "" otherwise."""
    if io is None:
        return ""
    ends = chain_ends(chains)
    said = []
    for pattern, verb, calls, size in ((_READS, "read", io.read_calls, io.read_bytes),
                                       (_WRITES, "write", io.write_calls, io.written_bytes)):
        if calls is None or size is None or calls < SMALL_CALLS_PER_S or not any(pattern.match(e) for e in ends):
            continue
        each = size / calls
        if each <= TINY_CALL_BYTES:
            unit = "byte" if round(each) == 1 else "bytes"
            said.append(f"the process made {calls:,.0f} {verb} calls a second of {each:.0f} {unit} each on "
                        "average: a system call per few bytes (an unbuffered stream: buffering=0, subprocess's "
                        "bufsize=0, or a stream read or written a few bytes at a time)")
    return "".join(f"; {x}" for x in said)


# The variables the mechanisms read from a process's environment (and the dynamic linker's, ``loader_text``).
MECHANISM_ENV = tuple(sorted({m.unset for m in MECHANISMS if m.unset} | {"LD_BIND_NOT"}))

__all__ = ["MECHANISMS", "MECHANISM_ENV", "MIN_CHAIN_SHARE", "LibcChain", "Mechanism", "chains_text",
           "chain_ends", "libc_chains", "loader_text", "mechanisms", "threads_libc_text", "tiny_calls_text"]
