"""Minimal statsd client for the drill-log quality-control gauges.

It follows the statsd convention: host and port come from $STATSD_HOST and $STATSD_PORT
(or the arguments), every metric is one fire-and-forget UDP datagram sent to (host, port).
On the rig servers the node's statsd agent aggregates them; where no agent listens the
datagrams are simply dropped.
"""
import os
import socket


class StatsClient:
    def __init__(self, host=None, port=None, prefix=""):
        self.host = host or os.environ.get("STATSD_HOST", "127.0.0.1")
        self.port = int(port or os.environ.get("STATSD_PORT", "8125"))
        self.prefix = prefix + "." if prefix else ""
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def _send(self, payload):
        try:
            self._sock.sendto(payload.encode(), (self.host, self.port))
        except OSError:
            pass  # metrics are best effort

    def gauge(self, name, value):
        self._send(f"{self.prefix}{name}:{value:.5g}|g")

    def incr(self, name, count=1):
        self._send(f"{self.prefix}{name}:{count}|c")
