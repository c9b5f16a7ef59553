"""Lagoon sensor feature service: serves the resampled sensor windows of the monitoring buoys.

GET /window/<station>/<hour> returns one float32 array (sensors x samples, C order) with the
water level, temperature, salinity, turbidity, chlorophyll and dissolved oxygen of the
station, resampled to 1-minute steps, starting at <hour>. It is the stdlib http.server
(one request per connection, handled in turn by the serving thread), listening with the
backlog given on the command line. It prints its port on the first line of stdout and
exits when its parent goes away.

    python featureserver.py --backlog 256 --stations 64 --samples 4096
"""
import argparse
import http.server
import os
import sys
import threading
import time

import numpy as np

SENSORS = ("level", "temperature", "salinity", "turbidity", "chlorophyll", "oxygen")


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


class Archive:
    def __init__(self, stations, samples, seed=3):
        rng = np.random.default_rng(seed)
        self.samples = samples
        self.phase = rng.uniform(0, 2 * np.pi, (stations, len(SENSORS))).astype(np.float32)
        self.scale = rng.uniform(0.5, 2.0, (stations, len(SENSORS))).astype(np.float32)
        self.depth = rng.uniform(0.4, 3.0, stations).astype(np.float32)

    def window(self, station, hour):
        t = (np.arange(self.samples, dtype=np.float32) + 60.0 * hour) / 60.0
        tide = np.sin(2 * np.pi * t / 12.42 + self.phase[station, 0])
        day = np.sin(2 * np.pi * t / 24.0 + self.phase[station, 1])
        rng = np.random.default_rng(station * 100003 + hour)
        noise = rng.standard_normal((len(SENSORS), self.samples), dtype=np.float32)
        out = np.empty((len(SENSORS), self.samples), np.float32)
        out[0] = self.depth[station] + 0.6 * tide
        out[1] = 18.0 + 3.0 * day + 0.4 * tide
        out[2] = 30.0 - 4.0 * np.maximum(0, -tide) * self.scale[station, 2]
        out[3] = 5.0 + 2.0 * np.abs(np.gradient(tide)) * 60 * self.scale[station, 3]
        out[4] = 2.0 + day * self.scale[station, 4]
        out[5] = 8.0 + 1.5 * day - 0.08 * out[1] - 0.05 * out[3]
        out += 0.05 * noise
        return out


def make_handler(archive):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "window":
                self.send_error(404)
                return
            body = archive.window(int(parts[1]), int(parts[2])).tobytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backlog", type=int, default=5)
    ap.add_argument("--stations", type=int, default=64)
    ap.add_argument("--samples", type=int, default=4096)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()

    class Server(http.server.HTTPServer):
        request_queue_size = args.backlog   # passed to listen()

    server = Server(("127.0.0.1", 0), make_handler(Archive(args.stations, args.samples)))
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
