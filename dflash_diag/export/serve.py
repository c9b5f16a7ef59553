"""Serving the metrics page so that no number of scrapers can take CPU from the trainers on the same machine.

prometheus_client's own server starts a thread per connection and renders the page (re-reading every board)
for each request: 20 scrapers in a loop kept a 2-core box busy rendering (bench/export_flood.py). Here:

- :class:`CachedPage` renders at most once per ``max_age_s`` per exposition format; every request in between
  gets the same bytes (the boards are published about once a second, so nothing newer is lost);
- :class:`MetricsServer` serves with a fixed number of worker threads and takes at most
  ``max_requests_per_s`` connections a second from the listen queue: more scrapers wait in the kernel's
  backlog, which costs nothing, instead of being served in a loop; a connection that does not send its
  request within ``REQUEST_TIMEOUT_S`` is dropped;
- who may read it: on TCP, anyone who can connect, unless a bearer ``token`` is set (compared in constant
  time; a wrong or missing one gets 401); on a Unix socket (mode 0600), only this user and root.

docs/security.md ("Who can read the exporter") and docs/integrations.md say how to scrape each.
"""

from __future__ import annotations

import hmac
import http.server
import os
import queue
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder

DEFAULT_MAX_AGE_S = 1.0
DEFAULT_WORKERS = 4
DEFAULT_MAX_REQUESTS_PER_S = 20.0  # Prometheus scrapes a target every 15-60 s: this is a hundred scrapers
REQUEST_TIMEOUT_S = 3.0


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


class _Handler(http.server.BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = REQUEST_TIMEOUT_S  # a client that sends nothing does not hold a worker
    protocol_version = "HTTP/1.0"  # one request per connection: a keep-alive client cannot hold a worker

    def do_GET(self) -> None:
        if not self.server.authorized(self.headers.get("Authorization")):
            self._reply(401, b"a bearer token is required\n", "text/plain; charset=utf-8",
                        {"WWW-Authenticate": 'Bearer realm="dflash-diag"'})
            return
        if urlsplit(self.path).path not in ("/", "/metrics"):
            self._reply(404, b"the metrics are at /metrics\n", "text/plain; charset=utf-8")
            return
        body, content_type = self.server.page.get(self.headers.get("Accept"))
        self._reply(200, body, content_type)

    def _reply(self, code: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape on stderr would be noise (and a cost)

    def address_string(self) -> str:  # a Unix socket's peer has no address
        return str(self.client_address[0]) if isinstance(self.client_address, tuple) else "unix"


class _Bounded:
    """A fixed pool of workers fed from the accept loop, which takes at most ``max_requests_per_s``."""

    page: CachedPage

    def _start_pool(self, page: CachedPage, token: str | None, workers: int, max_requests_per_s: float) -> None:
        self.page = page
        self._token = token.encode() if token else None
        self._interval_s = 1.0 / max_requests_per_s
        self._next_accept_s = 0.0
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue(maxsize=workers)
        self._stopping = threading.Event()
        self._workers = [threading.Thread(target=self._work, name=f"dflash-diag-export-{i}", daemon=True)
                         for i in range(workers)]
        for worker in self._workers:
            worker.start()

    def authorized(self, header: str | None) -> bool:
        if self._token is None:
            return True
        scheme, _, credentials = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), self._token)

    def process_request(self, request: Any, client_address: Any) -> None:
        # The accept loop waits here: at most one connection per interval, and none while every worker is busy.
        delay_s = self._next_accept_s - time.monotonic()
        if delay_s > 0:
            time.sleep(delay_s)
        self._next_accept_s = max(time.monotonic(), self._next_accept_s) + self._interval_s
        while not self._stopping.is_set():
            try:
                self._queue.put((request, client_address), timeout=0.5)
                return
            except queue.Full:
                continue
        self.shutdown_request(request)  # type: ignore[attr-defined]

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)  # type: ignore[attr-defined]
            except Exception:
                pass  # a client that went away or sent garbage: nothing to tell anyone
            finally:
                self.shutdown_request(request)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self._stopping.set()
        self.shutdown()  # type: ignore[attr-defined]
        for _ in self._workers:
            self._queue.put(None)
        for worker in self._workers:
            worker.join(timeout=REQUEST_TIMEOUT_S + 1)
        self.server_close()  # type: ignore[attr-defined]


class MetricsServer(_Bounded, http.server.HTTPServer):
    """The metrics page on TCP (IPv4 or IPv6, by the host's address family)."""

    def __init__(self, host: str, port: int, page: CachedPage, *, token: str | None = None,
                 workers: int = DEFAULT_WORKERS, max_requests_per_s: float = DEFAULT_MAX_REQUESTS_PER_S) -> None:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self.address_family = family
        super().__init__((host, port), _Handler)
        self._start_pool(page, token, workers, max_requests_per_s)


class UnixMetricsServer(_Bounded, socketserver.UnixStreamServer):
    """The metrics page on a Unix socket created 0600 (only this user, and root, can connect)."""

    def __init__(self, path: str, page: CachedPage, *, token: str | None = None, workers: int = DEFAULT_WORKERS,
                 max_requests_per_s: float = DEFAULT_MAX_REQUESTS_PER_S) -> None:
        old_umask = os.umask(0o177)  # the socket file is created 0600: never a moment it is open to others
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        self._path = path
        self._inode = os.stat(path).st_ino
        self._start_pool(page, token, workers, max_requests_per_s)

    def server_close(self) -> None:
        super().server_close()
        try:
            if os.stat(self._path).st_ino == self._inode:  # still the socket we made: ours to remove
                os.unlink(self._path)
        except OSError:
            pass


def serve_in_thread(server: MetricsServer | UnixMetricsServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name="dflash-diag-export-accept", daemon=True)
    thread.start()
    return thread
