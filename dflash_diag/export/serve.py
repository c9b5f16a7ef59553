"""Serving the metrics page so that no number of scrapers can take CPU from the trainers on the same machine, and
no client, however slow, can keep the others from being served.

prometheus_client's own server starts a thread per connection and renders the page (re-reading every board)
for each request: 20 scrapers in a loop kept a 2-core box busy rendering (bench/export_flood.py). Its
replacement here served from four threads with a timeout per ``recv``: four clients sending one byte of header
every 2 s held all four for as long as they liked. Now:

- :class:`CachedPage` renders at most once per ``max_age_s`` per exposition format; every request in between
  gets the same bytes (the boards are published about once a second, so nothing newer is lost);
- :class:`MetricsServer` is one asyncio loop on one thread: a connection waiting for its client costs a socket,
  not a thread, so slow clients hold nothing the others need. Each request has a **deadline**: its whole head
  (request line and headers) within ``REQUEST_TIMEOUT_S`` of the connection, however it trickles in; the answer
  written within the same time again. At most ``MAX_CONNECTIONS`` connections are open: one more closes the
  oldest that has not sent its whole head yet. At most ``max_requests_per_s`` answers a second leave (the rest
  wait their turn, holding a socket each);
- who may read it: on TCP, anyone who can connect, unless a bearer ``token`` is set: then the ``Authorization``
  header is checked the moment its line arrives (compared in constant time), and a wrong one is answered 401 at
  once, without reading further; a head that ends without one gets 401 too. On a Unix socket (mode 0600), only
  this user and root.

docs/security.md ("Who can read the exporter") and docs/integrations.md say how to scrape each.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder

DEFAULT_MAX_AGE_S = 1.0
DEFAULT_MAX_REQUESTS_PER_S = 20.0  # Prometheus scrapes a target every 15-60 s: this is a hundred scrapers
REQUEST_TIMEOUT_S = 3.0  # the whole request head, from the connection on; then again for the answer
MAX_CONNECTIONS = 256  # open at once: a socket each, no thread
MAX_HEAD_BYTES = 16 << 10  # request line and headers, all of them
MAX_HEADERS = 64
PACE_WAIT_MAX_S = 30.0  # a request that waited this long for its turn is dropped (scrapers give up after 10 s)
LISTEN_BACKLOG = 128


@dataclass(frozen=True, slots=True)
class _Rendered:
    body: bytes
    content_type: str
    at_s: float


class CachedPage:
    """The exposition of ``registry``, rendered at most once per ``max_age_s`` per format."""

    def __init__(self, registry: Any, *, max_age_s: float = DEFAULT_MAX_AGE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._registry = registry
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()  # one render at a time; requests meanwhile wait for it and reuse it
        self._pages: dict[str, _Rendered] = {}
        self.renders = 0

    def get(self, accept: str | None) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept or "")
        with self._lock:
            page = self._pages.get(content_type)
            now = self._clock()
            if page is None or now - page.at_s >= self._max_age_s:
                page = _Rendered(encoder(self._registry), content_type, now)
                self._pages[content_type] = page
                self.renders += 1
            return page.body, page.content_type


class _Refused(Exception):
    """The request is answered with ``code`` and the connection closed; nothing more is read."""

    def __init__(self, code: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        super().__init__(code)
        self.code, self.body, self.extra = code, body, extra or {}


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def _unauthorized() -> _Refused:
    return _Refused(401, b"a bearer token is required\n", {"WWW-Authenticate": 'Bearer realm="dflash-diag"'})


@dataclass
class _Head:
    method: str
    target: str
    accept: str | None = None
    authorized: bool = False


@dataclass
class _Connection:
    """One open connection: when it came, and whether its whole head is in (then it is no longer evictable)."""

    writer: asyncio.StreamWriter
    opened_s: float
    head_done: bool = False


@dataclass
class ServerStats:
    """What the server did, for tests and the benchmark (read after ``stop``, or racily while it runs)."""

    served: int = 0
    refused: dict[int, int] = field(default_factory=dict)
    timed_out: int = 0
    evicted: int = 0


class MetricsServer:
    """The metrics page on TCP (IPv4 or IPv6, by the host's address family), or on a Unix socket created 0600
    (:meth:`unix`). The listening socket is made here, so a bad address fails in the caller's thread; the loop
    runs once :func:`serve_in_thread` starts it."""

    def __init__(self, host: str, port: int, page: CachedPage, *, token: str | None = None,
                 max_requests_per_s: float = DEFAULT_MAX_REQUESTS_PER_S,
                 max_connections: int = MAX_CONNECTIONS, request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(LISTEN_BACKLOG)
        except BaseException:
            sock.close()
            raise
        self._setup(sock, page, token, max_requests_per_s, max_connections, request_timeout_s)
        self._unix_path: str | None = None

    @classmethod
    def unix(cls, path: str, page: CachedPage, *, token: str | None = None,
             max_requests_per_s: float = DEFAULT_MAX_REQUESTS_PER_S, max_connections: int = MAX_CONNECTIONS,
             request_timeout_s: float = REQUEST_TIMEOUT_S) -> MetricsServer:
        """On a Unix socket at ``path``, created 0600 (only this user, and root, can connect). OSError as bind
        raises it (no such directory, a path too long for a socket, the path exists)."""
        self = cls.__new__(cls)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is created 0600: never a moment it is open to others
        try:
            sock.bind(path)
        except BaseException:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        try:
            os.chmod(path, 0o600)
            sock.listen(LISTEN_BACKLOG)
            inode = os.stat(path).st_ino
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        self._setup(sock, page, token, max_requests_per_s, max_connections, request_timeout_s)
        self._unix_path, self._inode = path, inode
        return self

    def _setup(self, sock: socket.socket, page: CachedPage, token: str | None, max_requests_per_s: float,
               max_connections: int, request_timeout_s: float) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.server_address: Any = sock.getsockname()
        self.page = page
        self._token = token.encode() if token else None
        self._interval_s = 1.0 / max_requests_per_s
        self._max_connections = max_connections
        self._timeout_s = request_timeout_s
        self._next_answer_s = 0.0
        self._connections: dict[int, _Connection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._render = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dflash-diag-export-render")
        self.stats = ServerStats()

    def authorized(self, header: str | None) -> bool:
        if self._token is None:
            return True
        scheme, _, credentials = (header or "").strip().partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self._token)

    # --- the loop ---------------------------------------------------------------------------------------------

    def serve_forever(self) -> None:
        """Run the loop until :meth:`stop` (on the thread :func:`serve_in_thread` starts)."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._handle, sock=self._sock, limit=MAX_HEAD_BYTES)
        try:
            await self._stopped.wait()
        finally:
            server.close()
            for conn in list(self._connections.values()):
                conn.writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)

    def stop(self) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(stopped.set)
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(timeout=self._timeout_s + 5)
        self._render.shutdown(wait=False, cancel_futures=True)
        self.server_close()

    def server_close(self) -> None:
        self._sock.close()
        path = self._unix_path
        if path is not None:
            try:
                if os.stat(path).st_ino == self._inode:  # still the socket we made: ours to remove
                    os.unlink(path)
            except OSError:
                pass
            self._unix_path = None

    # --- one connection ---------------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        conn = _Connection(writer, loop.time())
        self._make_room()
        self._connections[id(conn)] = conn
        try:
            try:
                async with asyncio.timeout(self._timeout_s):
                    head = await self._read_head(reader)
                conn.head_done = True
                body, content_type = await self._answer(head)
                status, extra = 200, {}
            except _Refused as refused:
                conn.head_done = True
                body, content_type, status, extra = refused.body, "text/plain; charset=utf-8", refused.code, refused.extra
                self.stats.refused[status] = self.stats.refused.get(status, 0) + 1
            async with asyncio.timeout(self._timeout_s):
                writer.write(_response(status, body, content_type, extra))
                await writer.drain()
            if status == 200:
                self.stats.served += 1
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.stats.timed_out += 1  # slow, gone or garbage: nothing to tell anyone
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.pop(id(conn), None)
            writer.close()

    def _make_room(self) -> None:
        """At the cap, the oldest connection still sending its head goes (it had the longest time)."""
        if len(self._connections) < self._max_connections:
            return
        pending = [c for c in self._connections.values() if not c.head_done]
        if pending:
            oldest = min(pending, key=lambda c: c.opened_s)
            self._connections.pop(id(oldest), None)
            oldest.writer.transport.abort()
            self.stats.evicted += 1

    async def _read_head(self, reader: asyncio.StreamReader) -> _Head:
        line = await _line(reader)
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _Refused(400, b"not an HTTP request\n")
        head = _Head(parts[0], parts[1], authorized=self._token is None)
        for _ in range(MAX_HEADERS + 1):
            line = await _line(reader)
            if not line:
                break
            name, sep, value = line.partition(":")
            if not sep:
                raise _Refused(400, b"a malformed header line\n")
            name = name.strip().lower()
            if name == "authorization":
                # Checked the moment it arrives: a client without the token reads nothing and holds nothing more.
                if not self.authorized(value):
                    raise _unauthorized()
                head.authorized = True
            elif name == "accept":
                head.accept = value.strip()
        else:
            raise _Refused(431, b"too many headers\n")
        if not head.authorized:
            raise _unauthorized()
        return head

    async def _answer(self, head: _Head) -> tuple[bytes, str]:
        if head.method != "GET":
            raise _Refused(405, b"only GET\n")
        if urlsplit(head.target).path not in ("/", "/metrics"):
            raise _Refused(404, b"the metrics are at /metrics\n")
        await self._pace()
        loop = asyncio.get_running_loop()
        # Rendered off the loop (it reads every board): the loop keeps taking and timing out connections meanwhile.
        return await loop.run_in_executor(self._render, self.page.get, head.accept)

    async def _pace(self) -> None:
        """At most one answer per interval leaves; a request past ``PACE_WAIT_MAX_S`` in line is dropped."""
        now = time.monotonic()
        slot = max(now, self._next_answer_s)
        if slot - now > PACE_WAIT_MAX_S:
            raise _Refused(503, b"too many scrapes: try again later\n")
        self._next_answer_s = slot + self._interval_s
        if slot > now:
            await asyncio.sleep(slot - now)


async def _line(reader: asyncio.StreamReader) -> str:
    """One line of the head (CRLF or LF), without its end; the head's bytes are bounded by the reader's limit."""
    raw = await reader.readuntil(b"\n")
    return raw.decode("latin-1").rstrip("\r\n")  # latin-1 decodes every byte


def _response(status: int, body: bytes, content_type: str, extra: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.0 {status} {_REASONS.get(status, '')}", f"Content-Type: {content_type}",
             f"Content-Length: {len(body)}", "Connection: close", *(f"{k}: {v}" for k, v in extra.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def serve_in_thread(server: MetricsServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="dflash-diag-export", daemon=True)
    server._thread = thread  # type: ignore[attr-defined]  # stop() joins it
    thread.start()
    # The loop is up (its stop event exists) before the caller may stop it.
    deadline = time.monotonic() + 10
    while server._stopped is None and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    return thread
