"""The other end of a unix socket, from the kernel's socket diagnostics (``NETLINK_SOCK_DIAG``, what ``ss -x``
reads): /proc lists a unix socket's inode and, for a bound one, its path, but never its peer. One request per
socket asks for that inode exactly (``unix_diag_get_exact``) with its peer attribute; no privilege is needed and
nothing of the socket is touched. Linux only; anything else, or any error, is None (the wait stays what the stacks
say it is).
"""

from __future__ import annotations

import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
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
