"""`dflash-diag export` under load and on a shared machine: the page is rendered at most once a second, a
flood of scrapers gets one serving thread and at most 20 scrapes a second, slow clients (a header byte every 2 s)
hold nothing the other scrapers need, and who may read it is chosen: a bearer token (never on the command line,
checked the moment its header arrives) or a Unix socket only its user can open."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_diag.export.prometheus import BoardCollector, registry_for
from dflash_diag.export.serve import (
    DEFAULT_MAX_REQUESTS_PER_S,
    REQUEST_TIMEOUT_S,
    CachedPage,
    MetricsServer,
    serve_in_thread,
)

REPO = Path(__file__).resolve().parents[2]
PUBLISHER = """
import probes, queue, time
s = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), publish_interval_s=0.2, timer_interval_s=0.2))
s.watch_queue("jobs", queue.Queue(maxsize=3)).put(1)
s.set_app(name="side-job", step=7)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A board directory with one live probed program in it."""
    board_dir = tmp_path / "boards"
    board_dir.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DFLASH_DIAG_BOARD_DIR": str(board_dir)}
    proc = subprocess.Popen([sys.executable, "-c", PUBLISHER], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield board_dir, proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _flood(url: str, clients: int, per_client: int,
           others: frozenset[threading.Thread] = frozenset()) -> tuple[list[tuple[int, bytes]], int, float]:
    """``clients`` threads scraping back to back: the answers, the most exporter threads seen, seconds taken.
    ``others``: threads that were running before the exporter started (the test runner's own), not counted."""
    answers: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(per_client):
            answer = _get(url)
            with lock:
                answers.append(answer)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    most = 0
    t0 = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        most = max(most, sum(1 for t in threading.enumerate() if not t.name.startswith("Thread-")
                             and t not in threads and t not in others and t is not threading.main_thread()))
        time.sleep(0.01)
    return answers, most, time.monotonic() - t0


@pytest.mark.slow
def test_a_flood_is_served_from_one_render_by_a_fixed_pool_at_a_bounded_rate(published: tuple[Path, int]) -> None:
    board_dir, pid = published
    collector = BoardCollector([pid], board_dir=str(board_dir))
    server = MetricsServer("127.0.0.1", 0, CachedPage(registry_for(collector), max_age_s=60.0))
    others = frozenset(threading.enumerate())  # pytest-xdist's worker runs a thread of its own
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        answers, most_threads, elapsed_s = _flood(url, clients=20, per_client=3, others=others)
    finally:
        server.stop()
    assert len(answers) == 60 and {code for code, _ in answers} == {200}
    assert len({body for _, body in answers}) == 1 and b"dflash_up" in answers[0][1]
    assert collector.scrapes == 1  # 60 scrapes, one read of the boards (the page is kept 60 s here)
    assert most_threads <= 2  # the loop and the one that renders, not a thread per client
    assert elapsed_s >= (60 - 1) / DEFAULT_MAX_REQUESTS_PER_S * 0.9  # at most 20 scrapes a second


@pytest.mark.slow
def test_the_page_is_rendered_again_once_it_is_older_than_its_age(published: tuple[Path, int]) -> None:
    board_dir, pid = published
    now = [0.0]
    collector = BoardCollector([pid], board_dir=str(board_dir))
    page = CachedPage(registry_for(collector), max_age_s=1.0, clock=lambda: now[0])
    for _ in range(5):
        page.get(None)
    assert collector.scrapes == 1
    page.get("application/openmetrics-text; version=1.0.0")  # the other format is its own page
    assert collector.scrapes == 2
    now[0] = 1.0
    page.get(None)
    assert collector.scrapes == 3


def _exporter(board_dir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "dflash_diag", "export", "--all", "--no-gpu", "--board-dir",
                             str(board_dir), *args], env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    line = proc.stdout.readline() if proc.stdout else ""
    assert "serving" in line, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["file", "env"])
def test_a_bearer_token_is_required_when_set(source: str, published: tuple[Path, int], tmp_path: Path) -> None:
    board_dir, _ = published
    token = "s3cr3t-scrape-token-0123456789"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    args, env = (["--token-file", str(token_file)], None) if source == "file" else ([], {"DFLASH_DIAG_EXPORT_TOKEN": token})
    proc, line = _exporter(board_dir, "--port", "0", *args, env=env)
    try:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert match and "token required" in line and token not in line
        url = f"http://127.0.0.1:{match.group(1)}/metrics"
        assert _get(url)[0] == 401
        assert _get(url, {"Authorization": "Bearer wrong"})[0] == 401
        code, body = _get(url, {"Authorization": f"Bearer {token}"})
        assert code == 200 and b"dflash_up" in body
    finally:
        _stop(proc)
    assert token not in (proc.stderr.read() if proc.stderr else "")


def test_a_token_is_never_taken_from_argv_nor_from_a_file_others_can_read(tmp_path: Path) -> None:
    assert subprocess.run([sys.executable, "-m", "dflash_diag", "export", "--port", "0", "--all", "--token", "x"],
                          cwd=REPO, capture_output=True).returncode == 2
    loose = tmp_path / "token"
    loose.write_text("a-token")
    loose.chmod(0o644)
    res = subprocess.run([sys.executable, "-m", "dflash_diag", "export", "--port", "0", "--all", "--token-file",
                          str(loose)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 6 and "chmod 600" in res.stderr and res.stderr.count("\n") == 1


def _unix_get(path: str) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


SYSTEM_PY = "/usr/bin/python3"  # one another user may run (the venv's may be private)
NOBODY = 65534


@pytest.mark.slow
def test_a_unix_socket_only_its_user_can_open(published: tuple[Path, int]) -> None:
    board_dir, _ = published
    where = Path(tempfile.mkdtemp(prefix="dflash-serve-", dir="/tmp"))
    where.chmod(0o755)  # anyone may look in: only the socket's own mode keeps them out
    path = str(where / "metrics.sock")
    proc, line = _exporter(board_dir, "--unix-socket", path)
    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        reply = _unix_get(path)
        assert reply.startswith(b"HTTP/1.0 200") and b"dflash_up" in reply
        if os.geteuid() == 0 and os.access(SYSTEM_PY, os.X_OK):  # another user may not even connect
            other = subprocess.run([SYSTEM_PY, "-c", f"import socket; s = socket.socket(socket.AF_UNIX); "
                                    f"s.connect({path!r})"], user=NOBODY, capture_output=True, text=True, timeout=60)
            assert other.returncode != 0 and "PermissionError" in other.stderr, other.stderr
        again = subprocess.run([sys.executable, "-m", "dflash_diag", "export", "--all", "--unix-socket", path],
                               cwd=REPO, capture_output=True, text=True, timeout=60)
        assert again.returncode == 7 and again.stderr.count("\n") == 1  # never over an existing path
    finally:
        _stop(proc)
    assert not os.path.lexists(path)  # removed at exit: it made it
    where.rmdir()


# --- slow clients, the token's early check, bad paths -------------------------------------------------------------


class SlowClient:
    """A client that sends its request one header byte every ``every_s``: the attack that held every worker."""

    def __init__(self, port: int, every_s: float = 2.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.every_s = every_s
        self.closed_after_s: float | None = None
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()
        self.thread.start()

    def _run(self) -> None:
        head = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
        try:
            for byte in head:
                deadline = time.monotonic() + self.every_s
                while (left := deadline - time.monotonic()) > 0 and not self.stop.is_set():
                    readable, _, _ = select.select([self.sock], [], [], min(left, 0.1))
                    if readable and not self.sock.recv(4096):
                        self.closed_after_s = time.monotonic() - self.t0  # the server closed it
                        return
                if self.stop.is_set():
                    return
                self.sock.sendall(bytes([byte]))
                self.sent += 1
        except OSError:
            self.closed_after_s = time.monotonic() - self.t0

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()


def _timed_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, float]:
    t0 = time.monotonic()
    code, _ = _get(url, headers)
    return code, time.monotonic() - t0


@pytest.mark.slow
def test_four_slow_clients_hold_nothing_a_scrape_needs(published: tuple[Path, int]) -> None:
    """Four connections sending one header byte every 2 s held all four workers of the threaded server (its 3 s
    timeout was per recv): every scrape timed out for as long as they went on. Now a scrape is served in its normal
    time beside them, and each of them is dropped at its request's deadline although it keeps sending."""
    board_dir, pid = published
    server = MetricsServer("127.0.0.1", 0, CachedPage(registry_for(BoardCollector([pid], board_dir=str(board_dir)))))
    serve_in_thread(server)
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        code, normal_s = _timed_get(url)
        assert code == 200
        slow = [SlowClient(port) for _ in range(4)]
        try:
            time.sleep(2.5)  # every slow client has sent a byte or two, and holds its connection
            timings = []
            for _ in range(3):
                code, took_s = _timed_get(url)
                assert code == 200
                timings.append(took_s)
                time.sleep(0.5)
            time.sleep(REQUEST_TIMEOUT_S + 2.5 - 1.5)  # past each slow client's deadline, and its next byte
        finally:
            for client in slow:
                client.close()
    finally:
        server.stop()
    assert max(timings) < max(1.0, 5 * normal_s), (timings, normal_s)  # its normal time, not a timeout
    for client in slow:  # dropped at the deadline (3 s from the connection), not kept while bytes trickle in
        assert client.closed_after_s is not None and client.closed_after_s < REQUEST_TIMEOUT_S + 1.0, \
            (client.closed_after_s, client.sent)
    assert server.stats.timed_out >= 4


def _raw_request(port: int, data: bytes, timeout_s: float = 10.0) -> tuple[bytes, float]:
    """What the server answers to ``data`` (the client then sends nothing more), and when."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        t0 = time.monotonic()
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks), time.monotonic() - t0


def test_a_wrong_token_is_refused_the_moment_its_header_arrives(tmp_path: Path) -> None:
    class Registry:
        def collect(self) -> list:
            return []

    server = MetricsServer("127.0.0.1", 0, CachedPage(Registry()), token="right-token-0123456789")
    serve_in_thread(server)
    port = server.server_address[1]
    try:
        # the head is not finished (no blank line): the wrong credential alone ends it
        reply, took_s = _raw_request(port, b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer wrong\r\nX-More: ")
        assert reply.startswith(b"HTTP/1.0 401") and took_s < 1.0, (reply[:80], took_s)
        reply, _ = _raw_request(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # no token at all
        assert reply.startswith(b"HTTP/1.0 401") and b"WWW-Authenticate: Bearer" in reply
        reply, _ = _raw_request(port, b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer right-token-0123456789\r\n\r\n")
        assert reply.startswith(b"HTTP/1.0 200")
        reply, _ = _raw_request(port, b"\x16\x03\x01garbage\r\n\r\n")  # not HTTP (a TLS hello): 400, never a traceback
        assert reply.startswith(b"HTTP/1.0 400")
        # a client that sends nothing at all is dropped at the deadline
        reply, took_s = _raw_request(port, b"", timeout_s=REQUEST_TIMEOUT_S + 5)
        assert reply == b"" and took_s < REQUEST_TIMEOUT_S + 2
    finally:
        server.stop()


def test_at_the_connection_cap_the_oldest_unfinished_one_goes(tmp_path: Path) -> None:
    class Registry:
        def collect(self) -> list:
            return []

    server = MetricsServer("127.0.0.1", 0, CachedPage(Registry()), max_connections=8, request_timeout_s=30.0)
    serve_in_thread(server)
    port = server.server_address[1]
    holders = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    try:
        time.sleep(0.3)
        reply, took_s = _raw_request(port, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert reply.startswith(b"HTTP/1.0 200") and took_s < 2.0
        assert server.stats.evicted >= 1
        assert holders[0].recv(10) == b""  # the oldest holder was closed to make room
    finally:
        for sock in holders:
            sock.close()
        server.stop()


def _export_cli(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dflash_diag", "export", "--all", "--no-gpu", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s)


def test_a_token_file_that_is_a_directory_or_a_fifo_is_one_line_exit_6(tmp_path: Path) -> None:
    directory = tmp_path / "tokens"
    directory.mkdir(mode=0o700)
    res = _export_cli("--port", "0", "--token-file", str(directory))
    assert res.returncode == 6 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo, 0o600)
    t0 = time.monotonic()
    res = _export_cli("--port", "0", "--token-file", str(fifo), timeout_s=30)  # no writer: must not wait for one
    assert res.returncode == 6 and "not a regular file" in res.stderr and time.monotonic() - t0 < 25


def test_a_unix_socket_path_too_long_or_in_no_directory_is_one_line(tmp_path: Path) -> None:
    long_path = tmp_path / ("s" * 120 + ".sock")
    res = _export_cli("--unix-socket", str(long_path))
    assert res.returncode == 11 and res.stderr.count("\n") == 1 and "shorter" in res.stderr, res.stderr
    missing = tmp_path / "no-such-dir" / "m.sock"
    res = _export_cli("--unix-socket", str(missing))
    assert res.returncode == 11 and res.stderr.count("\n") == 1 and "no such directory" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
