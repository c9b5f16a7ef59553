"""`dflash-diag export`: serve the probes' readings of one, several or all probed processes to Prometheus."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import signal
import sys
import threading
from types import FrameType

from dflash_diag.cli._output import pid_arg
from dflash_diag.errors import CommandError, ExitCode

DEFAULT_HOST = "127.0.0.1"


class ExportCommand:
    """Serve the probes' readings as Prometheus / OpenMetrics metrics at http://HOST:PORT/metrics.

    Every scrape re-reads the probe boards of the PIDs given (or, with --all, of every process of yours
    that publishes one), so trainers that start or exit are followed without a restart; a PID given but
    gone reads dflash_up 0. Per-GPU utilisation and memory come from NVML where it is installed. Both
    exposition formats are served: Prometheus text, and OpenMetrics when the scraper asks for it (Accept:
    application/openmetrics-text). Binds 127.0.0.1 unless --host says otherwise: the metrics name your
    programs and hosts, so expose them beyond this machine on purpose only. Runs until Ctrl-C / SIGTERM.
    Metric names and a Grafana dashboard: docs/integrations.md, docs/grafana-dashboard.json.

      dflash-diag export --port 9464 --all
      dflash-diag export --port 9464 12345 12346
      dflash-diag export --port 9464 --all --host 0.0.0.0    # reachable from other machines
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pids", type=pid_arg, nargs="*", metavar="PID", help="processes to export (or --all)")
        parser.add_argument("--all", action="store_true", help="every process with a probe board in the board directory")
        parser.add_argument("--port", type=int, required=True, metavar="N",
                            help="TCP port to listen on (0: any free port, printed at start)")
        parser.add_argument("--host", default=DEFAULT_HOST, metavar="ADDR",
                            help=f"address to bind (default {DEFAULT_HOST}: this machine only; 0.0.0.0 for all interfaces)")
        parser.add_argument("--no-gpu", action="store_true", help="do not read NVML (per-GPU utilisation and memory)")
        parser.add_argument("--board-dir", metavar="DIR", help="where probe boards are (default: the per-user runtime dir)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if bool(args.pids) == bool(args.all):
            raise CommandError("give PIDs or --all (not both): dflash-diag export --port N --all", ExitCode.USAGE)
        if not 0 <= args.port <= 65535:
            raise CommandError(f"--port must be 0..65535, got {args.port}", ExitCode.USAGE)
        if any(pid <= 0 for pid in args.pids):
            raise CommandError("PIDs must be positive integers", ExitCode.USAGE)
        try:
            from prometheus_client import start_http_server
        except ImportError:
            raise CommandError("prometheus-client is not installed: pip install prometheus-client",
                               ExitCode.MISSING_TOOL) from None
        from dflash_diag.export.prometheus import BoardCollector, default_gpus, registry_for

        collector = BoardCollector(None if args.all else args.pids, board_dir=args.board_dir,
                                   gpus=None if args.no_gpu else default_gpus())
        try:
            server, thread = start_http_server(args.port, addr=args.host, registry=registry_for(collector))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(f"port {args.port} on {args.host} is in use: pick another --port",
                                   ExitCode.USAGE) from None
            raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                               ExitCode.USAGE) from None
        host, port = str(server.server_address[0]), int(server.server_address[1])
        what = "every probed process" if args.all else f"PID {', '.join(map(str, args.pids))}"
        url_host = f"[{host}]" if ":" in str(host) else host
        print(f"dflash-diag export: serving {what} at http://{url_host}:{port}/metrics (Ctrl-C stops)", flush=True)
        if not _loopback(str(host)):
            print(f"dflash-diag export: note: {host} is reachable from other machines; the metrics name your "
                  "programs and hosts", file=sys.stderr, flush=True)
        _serve_until_signal(server)
        return ExitCode.OK


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
        shutdown = getattr(server, "shutdown", None)
        if callable(shutdown):
            shutdown()
