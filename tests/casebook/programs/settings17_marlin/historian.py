"""Local stand-in for the wind farm's vibration historian.

GET /snippet/<turbine>/<index>  -> float32 accelerometer snippet (raw bytes), header X-Label
GET /health                     -> ok
Snippets are synthesized once at start-up from each turbine's gearbox condition.
"""
import argparse
import ctypes
import os
import signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

CONDITIONS = 4  # healthy, gear-tooth wear, bearing outer race, shaft misalignment


def synthesize(turbines, per_turbine, samples, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(samples, dtype=np.float32) / 2048.0
    data = np.empty((turbines, per_turbine, samples), dtype=np.float32)
    labels = rng.integers(0, CONDITIONS, size=(turbines, per_turbine))
    for k in range(turbines):
        shaft = rng.uniform(20, 30)
        for i in range(per_turbine):
            c = labels[k, i]
            x = np.sin(2 * np.pi * shaft * t) + 0.3 * rng.standard_normal(samples)
            if c == 1:
                x += 0.6 * np.sin(2 * np.pi * shaft * 17 * t) * (1 + np.sin(2 * np.pi * shaft * t))
            elif c == 2:
                x += 1.5 * (np.sin(2 * np.pi * 163 * t) > 0.98)
            elif c == 3:
                x += 0.8 * np.sin(2 * np.pi * 2 * shaft * t + 0.5)
            data[k, i] = x
    return data, labels


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    data = labels = None

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", label=None):
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if label is not None:
            self.send_header("X-Label", str(label))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts == ["health"]:
            return self.reply(200, b"ok")
        if len(parts) != 3 or parts[0] != "snippet":
            return self.reply(404)
        try:
            k, i = int(parts[1]), int(parts[2])
            body = self.data[k, i].tobytes()
        except (ValueError, IndexError):
            return self.reply(404)
        self.reply(200, body, int(self.labels[k, i]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--turbines", type=int, required=True)
    ap.add_argument("--per-turbine", type=int, required=True)
    ap.add_argument("--samples", type=int, required=True)
    args = ap.parse_args()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != args.parent:
        os._exit(0)
    Handler.data, Handler.labels = synthesize(args.turbines, args.per_turbine, args.samples)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
