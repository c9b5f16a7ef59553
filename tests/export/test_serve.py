"""`dflash-diag export` under load and on a shared machine: the page is rendered at most once a second, a
flood of scrapers gets a fixed number of threads and at most 20 scrapes a second, and who may read it is
chosen: a bearer token (never on the command line) or a Unix socket only its user can open."""

from __future__ import annotations

import os
import re
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
    DEFAULT_WORKERS,
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
    assert most_threads <= DEFAULT_WORKERS + 1  # the workers and the accept loop, not a thread per client
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
