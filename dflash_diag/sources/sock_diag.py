"""The other end of a unix socket, from the kernel's socket diagnostics (``NETLINK_SOCK_DIAG``, what ``ss -x``
reads): /proc lists a unix socket's inode and, for a bound one, its path, but never its peer. One request per
socket asks for that inode exactly (``unix_diag_get_exact``) with its peer attribute; no privilege is needed and
nothing of the socket is touched. Linux only; anything else, or any error, is None (the wait stays what the stacks
say it is).

The same diagnostics list the established TCP sockets (``established_remotes``): reading ``/proc/PID/net/tcp``
walks every socket of the namespace, TIME_WAIT included, and with thousands of those (a client that opens a
connection per request leaves a minute of them) one read takes tens of milliseconds, by which time a short-lived
connection whose inode the process's descriptors named is closed. The dump asks for the established ones alone.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
UDIAG_SHOW_PEER = 0x4
UNIX_DIAG_PEER = 2
_NO_COOKIE = 0xFFFFFFFF  # both cookie words unset: match the inode whatever the socket's cookie
_ALL_STATES = 0xFFFFFFFF
_NLMSG_HDR = struct.Struct("=IHHII")  # length, type, flags, sequence, port
_UNIX_DIAG_REQ = struct.Struct("=BBHIIIII")  # family, protocol, pad, states, inode, show, cookie[2]
_UNIX_DIAG_MSG = struct.Struct("=BBBBIII")  # family, type, state, pad, inode, cookie[2]
_RTATTR = struct.Struct("=HH")  # length, type
REPLY_BYTES = 8192  # one socket's reply with its peer attribute is under 100 bytes
TIMEOUT_S = 0.05


def unix_peer_inode(inode: int) -> int | None:
    """The inode of the socket at the other end of unix socket ``inode`` (in this process's network namespace);
    None where it has none (a listener, an unconnected socket), is gone, or the kernel cannot be asked."""
    if not 0 < inode <= 0xFFFFFFFF or not hasattr(socket, "AF_NETLINK"):
        return None
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(TIMEOUT_S)
            nl.send(_request(inode, seq=os.getpid() & 0xFFFF))
            reply = nl.recv(REPLY_BYTES)
    except OSError:
        return None
    return parse_peer(reply, inode)


def _request(inode: int, seq: int) -> bytes:
    body = _UNIX_DIAG_REQ.pack(socket.AF_UNIX, 0, 0, _ALL_STATES, inode, UDIAG_SHOW_PEER, _NO_COOKIE, _NO_COOKIE)
    return _NLMSG_HDR.pack(_NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + body


def parse_peer(reply: bytes, inode: int) -> int | None:
    """The peer inode in a sock_diag reply about ``inode``; None for an error reply, another socket's message, a
    truncated one, or no peer attribute. Every length is checked against the bytes there."""
    if len(reply) < _NLMSG_HDR.size:
        return None
    length, kind, _, _, _ = _NLMSG_HDR.unpack_from(reply)
    if kind in (NLMSG_ERROR, NLMSG_DONE) or kind != SOCK_DIAG_BY_FAMILY or not \
            _NLMSG_HDR.size + _UNIX_DIAG_MSG.size <= length <= len(reply):
        return None
    family, _, _, _, ino, _, _ = _UNIX_DIAG_MSG.unpack_from(reply, _NLMSG_HDR.size)
    if family != socket.AF_UNIX or ino != inode:
        return None
    offset = _NLMSG_HDR.size + _UNIX_DIAG_MSG.size
    while offset + _RTATTR.size <= length:
        size, attr = _RTATTR.unpack_from(reply, offset)
        if size < _RTATTR.size or offset + size > length:
            return None
        if attr == UNIX_DIAG_PEER and size >= _RTATTR.size + 4:
            (peer,) = struct.unpack_from("=I", reply, offset + _RTATTR.size)
            return peer or None
        offset += (size + 3) & ~3  # attributes are 4-byte aligned
    return None


TCP_ESTABLISHED = 1
TCP_SYN_SENT = 2
TCP_LISTEN = 10
_INET_DIAG_REQ = struct.Struct("=BBBBI48s")  # family, protocol, extensions, pad, state mask, sockid (unset)
_INET_DIAG_MSG = struct.Struct("=BBBB2s2s16s16sIQIIIII")  # family .. sockid (ports, addresses) .. uid, inode
MAX_DUMP_BYTES = 8 << 20  # bounds one family's answer: ~100,000 established sockets
DUMP_RECV_BYTES = 1 << 16
DUMP_TIMEOUT_S = 0.5


def same_network_namespace(pid: int, proc_root: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` shares this one's network namespace (the dump answers for this one's); False where
    either link cannot be read."""
    try:
        return os.readlink(proc_root / str(pid) / "ns" / "net") == os.readlink(proc_root / "self" / "ns" / "net")
    except OSError:
        return False


def established_remotes(inodes: set[str]) -> set[str] | None:
    """The remote endpoints of the established TCP sockets with these inodes, spelled as ``/proc/net/tcp`` spells
    them (``0100007F:8923``), in this process's network namespace; None where the kernel cannot be asked."""
    remotes: set[str] = set()
    for family in (socket.AF_INET, socket.AF_INET6):
        answer = dump_tcp(family, 1 << TCP_ESTABLISHED)
        if answer is None:
            return None
        remotes.update(e.remote for e in answer if e.inode in inodes)
    return remotes


@dataclass(frozen=True, slots=True)
class TcpEntry:
    """One TCP socket as the diagnostics describe it; addresses as ``/proc/net/tcp`` prints them."""

    state: int  # TCP_SYN_SENT 2, TCP_LISTEN 10 ...
    local: str
    remote: str
    retransmits: int  # a connecting socket's SYNs sent again so far
    rqueue: int  # a listener: connections waiting in its accept queue
    wqueue: int  # a listener: its listen() backlog
    inode: str


def opening_and_listening() -> list[TcpEntry] | None:
    """The TCP sockets still opening a connection (SYN_SENT) and those listening, both families, in this process's
    network namespace; None where the kernel cannot be asked. A dump of these two states alone: a namespace's
    thousands of established and closed connections are not walked."""
    out: list[TcpEntry] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        answer = dump_tcp(family, (1 << TCP_SYN_SENT) | (1 << TCP_LISTEN))
        if answer is None:
            return None
        out += answer
    return out


def dump_tcp(family: int, states: int) -> list[TcpEntry] | None:
    """Every TCP socket of one address family in the states of the mask ``states`` (1 << state), or None."""
    if not hasattr(socket, "AF_NETLINK"):
        return None
    body = _INET_DIAG_REQ.pack(family, socket.IPPROTO_TCP, 0, 0, states, bytes(48))
    head = _NLMSG_HDR.pack(_NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(DUMP_TIMEOUT_S)
            nl.send(head + body)
            return _read_dump(nl, family)
    except OSError:
        return None


def _read_dump(nl: socket.socket, family: int) -> list[TcpEntry] | None:
    out: list[TcpEntry] = []
    read_bytes = 0
    while read_bytes < MAX_DUMP_BYTES:
        data = nl.recv(DUMP_RECV_BYTES)
        if not data:
            return None
        read_bytes += len(data)
        entries, done = parse_entries(data, family)
        if entries is None:
            return None
        out.extend(entries)
        if done:
            return out
    return None


def parse_dump(data: bytes, family: int) -> tuple[list[tuple[str, str]] | None, bool]:
    """The (inode, remote) entries in one datagram of a dump, and whether it ended it; None for an error reply or
    a message whose length does not fit the bytes there."""
    entries, done = parse_entries(data, family)
    return (None if entries is None else [(e.inode, e.remote) for e in entries]), done


def parse_entries(data: bytes, family: int) -> tuple[list[TcpEntry] | None, bool]:
    """The sockets in one datagram of a dump, and whether it ended it; None for an error reply or a message whose
    length does not fit the bytes there."""
    out: list[TcpEntry] = []
    offset = 0
    while offset + _NLMSG_HDR.size <= len(data):
        length, kind, _, _, _ = _NLMSG_HDR.unpack_from(data, offset)
        if length < _NLMSG_HDR.size or offset + length > len(data) or kind == NLMSG_ERROR:
            return None, True
        if kind == NLMSG_DONE:
            return out, True
        if kind == SOCK_DIAG_BY_FAMILY and length >= _NLMSG_HDR.size + _INET_DIAG_MSG.size:
            out.append(_tcp_entry(_INET_DIAG_MSG.unpack_from(data, offset + _NLMSG_HDR.size), family))
        offset += (length + 3) & ~3  # messages are 4-byte aligned
    return out, False


def _tcp_entry(fields: tuple, family: int) -> TcpEntry:
    """The addresses as the kernel's 32-bit words in this machine's byte order, then the port in hex, as
    ``/proc/net/tcp`` prints them."""
    words = 1 if family == socket.AF_INET else 4

    def addr(port: bytes, raw: bytes) -> str:
        return "".join(f"{w:08X}" for w in struct.unpack("=4I", raw)[:words]) + f":{struct.unpack('>H', port)[0]:04X}"

    return TcpEntry(state=fields[1], local=addr(fields[4], fields[6]), remote=addr(fields[5], fields[7]),
                    retransmits=fields[3], rqueue=fields[11], wqueue=fields[12], inode=str(fields[14]))
