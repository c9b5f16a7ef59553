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
    reply = _ask(_request(inode, seq=os.getpid() & 0xFFFF))
    return parse_peer(reply, inode) if reply is not None else None


def _ask(request: bytes) -> bytes | None:
    """The kernel's one reply to a one-socket diagnostics request; None where it cannot be asked."""
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(TIMEOUT_S)
            nl.send(request)
            return nl.recv(REPLY_BYTES)
    except OSError:
        return None


def _attribute(reply: bytes, offset: int, length: int, wanted: int) -> bytes | None:
    """The payload of the attribute of type ``wanted`` among those from ``offset`` to ``length`` of a reply; None
    where it is absent or an attribute's length does not fit the bytes there."""
    while offset + _RTATTR.size <= length:
        size, kind = _RTATTR.unpack_from(reply, offset)
        if size < _RTATTR.size or offset + size > length:
            return None
        if kind == wanted:
            return reply[offset + _RTATTR.size:offset + size]
        offset += (size + 3) & ~3  # attributes are 4-byte aligned
    return None


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
    payload = _attribute(reply, _NLMSG_HDR.size + _UNIX_DIAG_MSG.size, length, UNIX_DIAG_PEER)
    if payload is None or len(payload) < 4:
        return None
    (peer,) = struct.unpack_from("=I", payload)
    return peer or None


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


# The sender's limits on one TCP connection, from the kernel's own accounting (``struct tcp_info``, what ``ss -ti``
# prints): where a connection is slow because of a setting of its socket, not of either program's work.
INET_DIAG_INFO = 2
_NO_PACING_LIMIT = (1 << 64) - 1  # SO_MAX_PACING_RATE unset (the kernel's ~0UL)
_MAX_PACING_UNSET_32 = (1 << 32) - 1  # a 32-bit value of ~0U, as old setsockopt callers leave it
# Offsets in struct tcp_info (linux/tcp.h, stable since each field was appended): 8 bytes of u8 fields, then u32s.
_TCPI_RTT = 68
_TCPI_SND_CWND = 80
_TCPI_PACING_RATE = 104
_TCPI_MAX_PACING_RATE = 112
_TCPI_NOTSENT_BYTES = 144
_TCPI_DELIVERY_RATE = 160
_TCPI_BUSY_TIME = 168
_TCPI_RWND_LIMITED = 176
_TCPI_SNDBUF_LIMITED = 184


@dataclass(frozen=True, slots=True)
class TcpInfo:
    """One TCP socket's sending side as the kernel accounts it. Rates in bytes a second; times in microseconds since
    the connection started sending; None where the kernel's tcp_info is too old to have the field."""

    rtt_us: int
    snd_cwnd: int
    pacing_rate_bytes_s: int | None
    max_pacing_rate_bytes_s: int | None  # None: no cap (SO_MAX_PACING_RATE unset)
    notsent_bytes: int | None
    delivery_rate_bytes_s: int | None
    busy_us: int | None  # time with data to send
    rwnd_limited_us: int | None  # ... held back by the receiver's window (its receive buffer)
    sndbuf_limited_us: int | None  # ... held back by its own send buffer


def parse_tcp_info(raw: bytes) -> TcpInfo | None:
    """The fields of a ``struct tcp_info`` the kernel sent (as long as its version has them); None when it is too
    short to hold even the round-trip time and window."""
    if len(raw) < _TCPI_SND_CWND + 4:
        return None

    def u64(offset: int) -> int | None:
        return struct.unpack_from("=Q", raw, offset)[0] if len(raw) >= offset + 8 else None

    def u32(offset: int) -> int | None:
        return struct.unpack_from("=I", raw, offset)[0] if len(raw) >= offset + 4 else None

    cap = u64(_TCPI_MAX_PACING_RATE)
    return TcpInfo(rtt_us=struct.unpack_from("=I", raw, _TCPI_RTT)[0],
                   snd_cwnd=struct.unpack_from("=I", raw, _TCPI_SND_CWND)[0],
                   pacing_rate_bytes_s=u64(_TCPI_PACING_RATE),
                   max_pacing_rate_bytes_s=None if cap in (None, _NO_PACING_LIMIT, _MAX_PACING_UNSET_32) else cap,
                   notsent_bytes=u32(_TCPI_NOTSENT_BYTES), delivery_rate_bytes_s=u64(_TCPI_DELIVERY_RATE),
                   busy_us=u64(_TCPI_BUSY_TIME), rwnd_limited_us=u64(_TCPI_RWND_LIMITED),
                   sndbuf_limited_us=u64(_TCPI_SNDBUF_LIMITED))


def _sockid(local: str, remote: str) -> bytes | None:
    """The diagnostics' socket id for a connection given as ``/proc/net/tcp`` spells its ends (``0100007F:8923``):
    ports in network order, addresses as the kernel's words, any interface, no cookie."""
    try:
        (laddr, lport), (raddr, rport) = (end.split(":") for end in (local, remote))
        words = [int(laddr[i:i + 8], 16) for i in range(0, len(laddr), 8)]
        rwords = [int(raddr[i:i + 8], 16) for i in range(0, len(raddr), 8)]
        if len(words) not in (1, 4) or len(rwords) != len(words):
            return None
        src = struct.pack(f"={len(words)}I", *words).ljust(16, b"\0")
        dst = struct.pack(f"={len(rwords)}I", *rwords).ljust(16, b"\0")
        return struct.pack(">HH", int(lport, 16), int(rport, 16)) + src + dst + struct.pack("=III", 0, _NO_COOKIE,
                                                                                          _NO_COOKIE)
    except ValueError:
        return None


def tcp_info(local: str, remote: str) -> TcpInfo | None:
    """The kernel's tcp_info of the one established socket whose ends are ``local`` and ``remote`` (as
    ``/proc/net/tcp`` spells them), asked for exactly (no dump of the namespace); None where none or not Linux."""
    sockid = _sockid(local, remote)
    if sockid is None or not hasattr(socket, "AF_NETLINK"):
        return None
    family = socket.AF_INET if len(local.split(":")[0]) == 8 else socket.AF_INET6
    body = _INET_DIAG_REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, 1 << TCP_ESTABLISHED, sockid)
    head = _NLMSG_HDR.pack(_NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    reply = _ask(head + body)
    return parse_info_reply(reply) if reply is not None else None


def parse_info_reply(reply: bytes) -> TcpInfo | None:
    """The tcp_info attribute of a one-socket diagnostics reply; None for an error or a reply without one."""
    if len(reply) < _NLMSG_HDR.size + _INET_DIAG_MSG.size:
        return None
    length, kind, _, _, _ = _NLMSG_HDR.unpack_from(reply, 0)
    if kind != SOCK_DIAG_BY_FAMILY or length > len(reply):
        return None
    payload = _attribute(reply, _NLMSG_HDR.size + _INET_DIAG_MSG.size, length, INET_DIAG_INFO)
    return parse_tcp_info(payload) if payload is not None else None
