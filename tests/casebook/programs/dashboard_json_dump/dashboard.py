"""Live dashboard export: a side thread that serialises the run's full state (per-layer weight histograms,
per-step history of every metric) to ``live_state.json`` for a web page that polls it.

The dict is made of Python floats and is re-serialised from scratch every ``period_s`` seconds; ``json.dumps``
runs in C and holds the GIL for the whole encode (tens of ms), so the training thread, which gives the GIL back
at every small torch op, waits for it again and again (cf. pytorch/pytorch#101962: "SummaryWriter background
thread holds the GIL for too long").
"""
import json
import os
import tempfile
import threading
import time


class LiveDashboard(threading.Thread):
    def __init__(self, state, lock, out_path, period_s=0.05):
        super().__init__(name="dashboard-export", daemon=True)
        self.state, self.lock = state, lock
        self.out_path, self.period_s = out_path, period_s
        self.exports = 0
        self.last_bytes = 0

    def run(self):
        while True:
            with self.lock:
                snapshot = dict(self.state)  # shallow: the nested lists are shared
            payload = json.dumps(snapshot)
            tmp = self.out_path + ".tmp"
            with open(tmp, "w") as f:
                f.write(payload)
            os.replace(tmp, self.out_path)
            self.exports += 1
            self.last_bytes = len(payload)
            time.sleep(self.period_s)


def default_path():
    os.makedirs("runs", exist_ok=True)
    return os.path.join(tempfile.mkdtemp(prefix="dash-", dir="runs"), "live_state.json")
