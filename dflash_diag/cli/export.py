"""`dflash-diag export`: serve the probes' readings of one, several or all probed processes to Prometheus."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

from dflash_diag.cli._output import output_path_arg, pid_arg, shown
from dflash_diag.errors import CommandError, ExitCode

DEFAULT_HOST = "127.0.0.1"
TOKEN_ENV = "DFLASH_DIAG_EXPORT_TOKEN"


class ExportCommand:
    """Serve the probes' readings as Prometheus / OpenMetrics metrics at http://HOST:PORT/metrics.

    Every scrape reads the probe boards of the PIDs given (or, with --all, of every process of yours
    that publishes one), so trainers that start or exit are followed without a restart; a PID given but
    gone reads dflash_up 0. Per-GPU utilisation and memory come from NVML where it is installed. Both
    exposition formats are served: Prometheus text, and OpenMetrics when the scraper asks for it (Accept:
    application/openmetrics-text). The page is rendered at most once a second and served from one thread, at
    most 20 scrapes a second: no number of scrapers costs the trainers more than that. Each request has 3 s to
    send its head, however it trickles in; a slow client holds a socket, never what the other scrapers need.

    Who can read it: on 127.0.0.1 (the default) every user of this machine; the metrics name your programs,
    PIDs and hosts. On a shared machine serve a Unix socket only you can open (--unix-socket), or require a
    bearer token (--token-file, or $DFLASH_DIAG_EXPORT_TOKEN; never on the command line, where `ps` shows it
    to everyone). Runs until Ctrl-C / SIGTERM. Metric names, scrape configs and a Grafana dashboard:
    docs/integrations.md, docs/grafana-dashboard.json; who can read what: docs/security.md.

      dflash-diag export --port 9464 --all
      dflash-diag export --port 9464 12345 12346
      dflash-diag export --unix-socket ~/.dflash-metrics.sock --all             # only you (and root)
      dflash-diag export --port 9464 --all --token-file ~/.dflash-token          # Authorization: Bearer ...
      dflash-diag export --port 9464 --all --host 0.0.0.0 --token-file T     # reachable from other machines
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        # No abbreviations: `--token SECRET` must be a usage error, never read as `--token-file SECRET`.
        parser.allow_abbrev = False
        parser.add_argument("pids", type=pid_arg, nargs="*", metavar="PID", help="processes to export (or --all)")
        parser.add_argument("--all", action="store_true", help="every process with a probe board in the board directory")
        parser.add_argument("--job", type=pid_arg, metavar="PID",
                            help="every rank of the job PID launches or belongs to (torchrun's PID, or any rank's; "
                                 "docs/jobs.md): the ranks are found again at each scrape, so a restarted group is "
                                 "followed")
        parser.add_argument("--port", type=int, metavar="N",
                            help="TCP port to listen on (0: any free port, printed at start)")
        parser.add_argument("--host", default=DEFAULT_HOST, metavar="ADDR",
                            help=f"address to bind (default {DEFAULT_HOST}: this machine only, every user of it; "
                            "0.0.0.0 for all interfaces)")
        parser.add_argument("--unix-socket", metavar="PATH", type=output_path_arg,
                            help="serve on a Unix socket created 0600 (only you and root can scrape) instead of TCP")
        parser.add_argument("--token-file", metavar="PATH",
                            help=f"require 'Authorization: Bearer TOKEN', TOKEN read from this file (0600, yours); "
                            f"${TOKEN_ENV} works too")
        parser.add_argument("--no-gpu", action="store_true", help="do not read NVML (per-GPU utilisation and memory)")
        parser.add_argument("--board-dir", metavar="DIR", help="where probe boards are (default: the per-user runtime dir)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if sum((bool(args.pids), bool(args.all), args.job is not None)) != 1:
            raise CommandError("give PIDs or --all (not both), or --job PID: dflash-diag export --port N --all",
                               ExitCode.USAGE)
        pids: Iterable[int] | None = None if args.all else args.pids
        if args.job is not None:
            from dflash_diag.cli._job import job_topology

            job_topology(args.job, True)  # a PID that is no job is a usage error now, not an empty page later
            pids = JobPids(args.job)
        if (args.port is None) == (args.unix_socket is None):
            raise CommandError("give --port N (TCP) or --unix-socket PATH (not both)", ExitCode.USAGE)
        if args.port is not None and not 0 <= args.port <= 65535:
            raise CommandError(f"--port must be 0..65535, got {args.port}", ExitCode.USAGE)
        if any(pid <= 0 for pid in args.pids):
            raise CommandError("PIDs must be positive integers", ExitCode.USAGE)
        token = _token(args.token_file)
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise CommandError("prometheus-client is not installed: pip install prometheus-client",
                               ExitCode.MISSING_TOOL) from None
        from dflash_diag.export.prometheus import BoardCollector, default_gpus, registry_for
        from dflash_diag.export.serve import CachedPage, serve_in_thread

        collector = BoardCollector(pids, board_dir=args.board_dir, gpus=None if args.no_gpu else default_gpus())
        page = CachedPage(registry_for(collector))
        server = _listen(args, page, token)
        serve_in_thread(server)
        what = ("every probed process" if args.all else f"the ranks of the job of PID {args.job}"
                if args.job is not None else f"PID {', '.join(map(str, args.pids))}")
        guard = " (bearer token required)" if token else ""
        if args.unix_socket is not None:
            print(f"dflash-diag export: serving {what} on the Unix socket {shown(args.unix_socket)} (0600){guard} "
                  "(Ctrl-C stops)", flush=True)
        else:
            host, port = str(server.server_address[0]), int(server.server_address[1])
            url_host = f"[{host}]" if ":" in str(host) else host
            print(f"dflash-diag export: serving {what} at http://{url_host}:{port}/metrics{guard} (Ctrl-C stops)",
                  flush=True)
            if not _loopback(str(host)):
                print(f"dflash-diag export: note: {host} is reachable from other machines; the metrics name your "
                      "programs and hosts", file=sys.stderr, flush=True)
            elif token is None:
                print("dflash-diag export: note: every user of this machine can read these metrics; on a shared "
                      "machine use --unix-socket or --token-file", file=sys.stderr, flush=True)
        _serve_until_signal(server)
        return ExitCode.OK


class JobPids:
    """The PIDs of a job's ranks, found again each time they are iterated (each scrape): a group torchrun restarts
    has new PIDs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __iter__(self) -> Iterator[int]:
        from dflash_diag.sources.job import find_job

        job = find_job(self.pid)
        return iter(tuple(r.pid for r in job.ranks) if job is not None else ())


def _token(path: str | None) -> str | None:
    """The bearer token: from ``--token-file`` (a regular 0600 file of yours) or $DFLASH_DIAG_EXPORT_TOKEN."""
    if path is None:
        token = os.environ.get(TOKEN_ENV)
        if token is not None and not token.strip():
            raise CommandError(f"${TOKEN_ENV} is set but empty: set a token or unset it", ExitCode.USAGE)
        return token.strip() if token else None
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (the file is checked to be regular right after).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise CommandError(f"--token-file {shown(path)}: cannot be read ({exc.strerror})", ExitCode.BAD_INPUT) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise CommandError(f"--token-file {shown(path)}: not a regular file of yours", ExitCode.BAD_INPUT)
        if st.st_mode & 0o077:
            raise CommandError(f"--token-file {shown(path)}: readable by others (mode {st.st_mode & 0o777:o}): "
                               "chmod 600 it", ExitCode.BAD_INPUT)
        data = _read_at_most(fd, 4097)
    except OSError as exc:
        raise CommandError(f"--token-file {shown(path)}: cannot be read ({exc.strerror})", ExitCode.BAD_INPUT) from None
    finally:
        os.close(fd)
    token = data.decode("utf-8", "replace").strip()
    if not token or len(data) > 4096 or any(ch.isspace() or not ch.isprintable() for ch in token):
        raise CommandError(f"--token-file {shown(path)}: expected one token of at most 4096 printable characters "
                           "without spaces", ExitCode.BAD_INPUT)
    return token


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# sun_path holds 108 bytes on Linux, the terminating NUL included (104 on the BSDs and macOS).
UNIX_PATH_MAX_BYTES = 107 if sys.platform.startswith("linux") else 103


def _listen(args: argparse.Namespace, page: Any, token: str | None) -> Any:
    from dflash_diag.export.serve import MetricsServer

    if args.unix_socket is not None:
        path = args.unix_socket
        if len(os.fsencode(path)) > UNIX_PATH_MAX_BYTES:
            raise CommandError(f"--unix-socket {shown(path)[:120]}: {len(os.fsencode(path))} bytes, longer than a Unix "
                               f"socket's path may be ({UNIX_PATH_MAX_BYTES}): pick a shorter path",
                               ExitCode.CANNOT_WRITE)
        if os.path.lexists(path):
            raise CommandError(f"--unix-socket {shown(path)} exists: remove it (a socket left by an exporter that "
                               "was killed) or pick another path", ExitCode.EXISTS)
        try:
            return MetricsServer.unix(path, page, token=token)
        except OSError as exc:
            from dflash_diag.snapshot.output import cannot_write

            raise cannot_write(path, exc, "--unix-socket") from None
    try:
        return MetricsServer(args.host, args.port, page, token=token)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(f"port {args.port} on {args.host} is in use: pick another --port",
                               ExitCode.USAGE) from None
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                           ExitCode.USAGE) from None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _serve_until_signal(server: object) -> None:
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        server.stop()  # type: ignore[attr-defined]
