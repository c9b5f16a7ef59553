"""Route and vessel feature service of the ferry operator (a small HTTP/JSON service, run here as a child
process on a loopback port; it forks a handler process per client connection): GET /routes/<id>?day=N
returns the route's static features, recent delay statistics and tide windows for the day, GET
/vessels/<id>?day=N a vessel's particulars, GET /health answers ok. Prints its port on stdout when it is
listening."""
import argparse
import json
import math
import os
import random
import signal
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

ROUTES, VESSELS, DAYS = 240, 60, 365
ROUTE_DIM, VESSEL_DIM = 24, 16


class Tables:
    HISTORY = 360          # recent sailings kept per route

    def __init__(self, seed=7):
        rng = random.Random(seed)
        self.route = [[rng.gauss(0, 1) for _ in range(ROUTE_DIM - 8)] for _ in range(ROUTES)]
        # per route: (day, hour, delay minutes, load factor) of its recent sailings
        self.history = [[(rng.randrange(DAYS), rng.randrange(5, 23), rng.gammavariate(1.5, 6.0), rng.random())
                         for _ in range(self.HISTORY)] for _ in range(ROUTES)]
        self.vessel = [[rng.gauss(0, 1) for _ in range(VESSEL_DIM)] for _ in range(VESSELS)]
        self.season = [math.sin(2 * math.pi * d / DAYS) for d in range(DAYS)]
        # harmonic constituents (amplitude m, phase) of the two ports of each route
        self.ports = [[(rng.uniform(0.5, 2.5), rng.uniform(0, 2 * math.pi), rng.uniform(0.1, 0.6),
                        rng.uniform(0, 2 * math.pi)) for _ in range(2)] for _ in range(ROUTES)]

    def tide_windows(self, rid, day):
        """Share of the hours of the 90 days before `day` with less than 0.4 m of tide at each port (the
        harmonic tide model the timetable planners use: M2 and S2 constituents)."""
        out = []
        for m2, p2, s2, q2 in self.ports[rid]:
            low = 0
            for h in range((day - 90) * 24, day * 24):
                height = m2 * math.cos(0.5059 * h + p2) + s2 * math.cos(0.5236 * h + q2)
                low += height < -0.4
            out.append(low / 2160.0)
        return out

    def route_features(self, rid, day):
        """Static route features plus delay statistics of its sailings in the 30 days before `day`."""
        g = 1.0 + 0.3 * self.season[day % DAYS]
        n = s = ss = late = peak = load = 0.0
        for d, hour, delay, lf in self.history[rid]:
            if 0 < (day - d) % DAYS <= 30:
                n += 1
                s += delay
                ss += delay * delay
                late += delay > 15
                peak += 7 <= hour <= 9 or 16 <= hour <= 19
                load += lf
        n = max(n, 1.0)
        mean = s / n
        stats = [mean / 10, math.sqrt(max(ss / n - mean * mean, 0.0)) / 10, late / n, peak / n, load / n,
                 math.log1p(n), self.season[day % DAYS], g]
        stats[6:8] = self.tide_windows(rid, day)
        return [round(x * g, 5) for x in self.route[rid]] + [round(x, 5) for x in stats]

    def vessel_features(self, vid, day):
        g = 0.1 * self.season[(day + vid) % DAYS]
        return [round(x + g, 5) for x in self.vessel[vid]]


TABLES = None


class ForkingHTTPServer(socketserver.ForkingMixIn, HTTPServer):
    """One handler process per client connection (forked from the server with its tables loaded), as the
    operator's legacy services do: a misbehaving request cannot take the service down."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        url = urlparse(self.path)
        parts = url.path.strip("/").split("/")
        day = int(parse_qs(url.query).get("day", ["0"])[0])
        if parts == ["health"]:
            body = {"status": "ok", "pid": os.getpid()}
        elif len(parts) == 2 and parts[0] == "routes":
            body = {"route": int(parts[1]), "day": day, "features": TABLES.route_features(int(parts[1]), day)}
        elif len(parts) == 2 and parts[0] == "vessels":
            body = {"vessel": int(parts[1]), "day": day, "features": TABLES.vessel_features(int(parts[1]), day)}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


def main():
    global TABLES
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)            # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    TABLES = Tables()
    server = ForkingHTTPServer(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    # leave when the trainer goes away (its end of our stdin closes)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.serve_forever(poll_interval=0.5)


if __name__ == "__main__":
    main()
