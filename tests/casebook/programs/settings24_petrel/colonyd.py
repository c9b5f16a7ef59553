"""Colony tracking service: serves GPS-logger track windows and sea-state grids over HTTPS on loopback.
Prints its port on stdout, exits when its parent goes away."""
import argparse
import ctypes
import os
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import numpy as np


def make_tracks(colonies, birds, length, behaviours, seed):
    rng = np.random.default_rng(seed)
    tracks = np.empty((colonies, birds, length, 6), dtype=np.float32)
    labels = np.empty((colonies, birds, length), dtype=np.int8)
    speed_of = np.array([0.3, 9.0, 4.0, 1.5, 6.0, 2.5][:behaviours], dtype=np.float32)
    turn_of = np.array([0.05, 0.02, 0.6, 0.2, 0.1, 0.4][:behaviours], dtype=np.float32)
    for c in range(colonies):
        seg = rng.integers(16, 96, size=(birds, length // 16 + 1))
        state = rng.integers(0, behaviours, size=seg.shape)
        lab = np.stack([np.repeat(state[b], seg[b])[:length] for b in range(birds)])
        speed = speed_of[lab] * rng.gamma(4.0, 0.25, size=lab.shape)
        turn = rng.normal(0.0, turn_of[lab])
        heading = np.cumsum(turn, axis=1)
        vx, vy = speed * np.cos(heading), speed * np.sin(heading)
        x, y = np.cumsum(vx, axis=1), np.cumsum(vy, axis=1)
        depth = np.where(lab == 2, rng.gamma(2.0, 1.5, size=lab.shape), 0.0)
        alt = np.where(lab == 1, rng.gamma(3.0, 4.0, size=lab.shape), rng.gamma(1.0, 0.5, size=lab.shape))
        tracks[c] = np.stack([x, y, vx, vy, depth, alt], axis=-1)
        labels[c] = lab
    return tracks, labels


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    tracks = labels = sea = None

    def log_message(self, *args):
        pass

    def _send(self, body, shape):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Shape", ",".join(map(str, shape)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        q = {k: int(v[0]) for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        if parts[0] == "tracks":
            c, off, n = int(parts[1]), q["offset"], q["n"]
            win = self.tracks[c, :, off:off + n]
            lab = self.labels[c, :, off:off + n]
            self._send(win.tobytes() + lab.tobytes(), win.shape)
        elif parts[0] == "sea":
            cell = int(parts[1]) % len(self.sea)
            grid = self.sea[cell]
            self._send(grid.tobytes(), grid.shape)
        else:
            self.send_error(404)


def watch_parent(ppid):
    while os.getppid() == ppid:
        time.sleep(0.5)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--min-version", default="TLSv1_2")
    ap.add_argument("--colonies", type=int, default=8)
    ap.add_argument("--birds", type=int, default=48)
    ap.add_argument("--track-len", type=int, default=4096)
    ap.add_argument("--behaviours", type=int, default=4)
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    Handler.tracks, Handler.labels = make_tracks(args.colonies, args.birds, args.track_len,
                                                 args.behaviours, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    Handler.sea = rng.normal(0, 1, size=(64, 3, 32, 32)).astype(np.float32)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = getattr(ssl.TLSVersion, args.min_version)
    ctx.load_cert_chain(args.cert, args.key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    print(httpd.server_address[1], flush=True)
    sys.stdout.close()
    httpd.serve_forever()


if __name__ == "__main__":
    main()
