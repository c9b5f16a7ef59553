"""A small threaded program for the secret test: started by `dflash-diag run` with secrets in its environment
and argv (which it ignores), it publishes an app config holding more secrets and look-alikes, then works.

Prints "ready PID" once its board carries the config. Config: the JSON file named by $SECRETS_WORKLOAD_CONFIG.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time

import probes


def main() -> None:
    session = probes.current()
    assert session is not None, "run me under `dflash-diag run`"
    with open(os.environ["SECRETS_WORKLOAD_CONFIG"], encoding="utf-8") as fh:
        config = json.load(fh)
    q = session.watch_queue("q_hs", queue.Queue(maxsize=4))
    session.set_app(name="secrets_workload", config=config, tokens_per_s=1234.5, step=0)
    stop = threading.Event()

    def target() -> None:
        while not stop.is_set():
            sum(range(3000))
            try:
                q.put(1, timeout=0.1)
            except queue.Full:
                pass

    def drafter() -> None:
        while not stop.is_set():
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                continue
            time.sleep(0.01)

    for fn, name in ((target, "target-0"), (drafter, "drafter-0")):
        threading.Thread(target=fn, name=name, daemon=True).start()
    step = 0
    announced = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        step += 1
        session.set_app(step=step)
        session.step(step)
        if not announced and step > 3 and session.board_path and os.path.exists(session.board_path):
            with open(session.board_path, encoding="utf-8") as fh:
                if "\"name\":\"secrets_workload\"" in fh.read():  # the app section, not just argv
                    print(f"ready {os.getpid()}", flush=True)
                    announced = True
        time.sleep(0.05)
    stop.set()


if __name__ == "__main__":
    main()
