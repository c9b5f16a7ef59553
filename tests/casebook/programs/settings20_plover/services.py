"""Two small HTTP children: the acoustic window store and the station's egress agent.

    python services.py store --parent PID      # GET /window/<id> -> float32 window
    python services.py agent --parent PID      # forward proxy (absolute-URI GETs)
Each prints its port on the first line of stdout.
"""
import http.client
import http.server
import os
import sys
import threading
import time
import urllib.parse

import numpy as np


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


class Store(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    n = 512

    def do_GET(self):
        wid = int(self.path.rsplit("/", 1)[1])
        rng = np.random.default_rng(wid)
        cls = wid % 4
        t = np.arange(self.n, dtype=np.float32)
        x = np.sin(t * (0.02 + 0.03 * cls)).astype(np.float32) + 0.5 * rng.standard_normal(self.n, dtype=np.float32)
        body = x.tobytes() + bytes([cls])
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Agent(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    audited = 0

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
        path = u.path + (("?" + u.query) if u.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "connection")}
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        Agent.audited += 1
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Via", "1.0 station-egress")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def main():
    kind = sys.argv[1]
    ppid = int(sys.argv[sys.argv.index("--parent") + 1])
    threading.Thread(target=watch_parent, args=(ppid,), daemon=True).start()
    handler = Store if kind == "store" else Agent
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
