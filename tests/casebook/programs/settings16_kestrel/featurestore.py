"""Local feature service for the bird-call trainer (stand-in for the lab's feature store).

GET /clips?batch=N&size=S   -> float32 log-mel patches, S x MELS x FRAMES (raw bytes)
GET /labels?batch=N&size=S  -> int64 species ids, S (raw bytes)
Every request must carry HTTP basic credentials for the store's account.
"""
import argparse
import base64
import ctypes
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import numpy as np

MELS, FRAMES, SPECIES = 32, 12, 10


def die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def make_labels(rng, size):
    return rng.integers(0, SPECIES, size=size)


def make_batch(batch, size):
    rng = np.random.default_rng(batch)
    labels = make_labels(rng, size)
    t = np.arange(FRAMES, dtype=np.float32)
    m = np.arange(MELS, dtype=np.float32)[:, None]
    centre = 4 + 2.5 * labels[:, None, None]
    sweep = 0.3 * (labels[:, None, None] % 3 - 1)
    call = np.exp(-((m[None] - centre - sweep * t[None, None]) ** 2) / 6.0)
    clips = call + 0.3 * rng.standard_normal((size, MELS, FRAMES))
    return clips.astype(np.float32), labels.astype(np.int64)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    expected = ""

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.headers.get("Authorization", "") != self.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="featurestore"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        url = urlparse(self.path)
        q = parse_qs(url.query)
        batch, size = int(q.get("batch", ["0"])[0]), int(q.get("size", ["64"])[0])
        if url.path == "/clips":
            body = make_batch(batch, size)[0].tobytes()
        elif url.path == "/labels":
            body = make_labels(np.random.default_rng(batch), size).astype(np.int64).tobytes()
        elif url.path == "/health":
            body = b"ok"
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--user", required=True)
    args = ap.parse_args()
    die_with_parent(args.parent)
    password = sys.stdin.readline().strip()
    Handler.expected = "Basic " + base64.b64encode(f"{args.user}:{password}".encode()).decode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
