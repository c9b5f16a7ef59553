"""A small threaded process for the snapshot/diff tests: target-* threads put into a queue, drafter-* threads
get from it, optionally under probes with an app config. Prints "ready" once the board (if any) is published.

    python snapshot_workload.py [--threads N] [--probes] [--reentrant true|false] [--api-key=...] [--token X]
                                [--config-json FILE] [anything else, ignored]

Unknown arguments are ignored (the secret test plants dozens of them); --config-json merges a JSON object
into the published app config. Under `dflash-diag run` the probes are already running and are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time


def _board_published(session: object) -> bool:
    """Ready means "everything a snapshot reads is there": with probes, the board file too."""
    if session is None:
        return True
    directory = os.environ.get("DFLASH_DIAG_BOARD_DIR", "")
    try:
        with open(os.path.join(directory, f"{os.getpid()}.json"), encoding="utf-8") as fh:
            return "use_reentrant" in fh.read()  # published after set_app: the app config is in it
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--threads", type=int, default=2, help="target and drafter threads each")
    parser.add_argument("--probes", action="store_true")
    parser.add_argument("--reentrant", default="false")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--token", default="")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--config-json", default="")
    args, _ignored = parser.parse_known_args()

    q: queue.Queue[int] = queue.Queue(maxsize=4)
    session = None
    if args.probes:
        import probes

        session = probes.start(probes.ProbesConfig(enabled=frozenset({"queues", "codedrift"}), publish_interval_s=0.2))
        q = session.watch_queue("q_hs", q)
        extra = {}
        if args.config_json:
            with open(args.config_json, encoding="utf-8") as fh:
                extra = json.load(fh)
        session.set_app(name="snapshot_workload", config={**extra, "use_reentrant": args.reentrant == "true",
                                                          "batch_size": 2, "api_key": args.api_key})
    stop = threading.Event()

    def target() -> None:
        i = 0
        while not stop.is_set():
            sum(range(2000))  # a little Python work
            try:
                q.put(i, timeout=0.1)
            except queue.Full:
                continue
            i += 1

    def drafter() -> None:
        while not stop.is_set():
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                continue
            time.sleep(0.02)

    threads = [threading.Thread(target=target, name=f"target-{i}", daemon=True) for i in range(args.threads)]
    threads += [threading.Thread(target=drafter, name=f"drafter-{i}", daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    step = 0
    deadline = time.monotonic() + args.seconds
    ready = False
    while time.monotonic() < deadline:
        step += 1
        if session is not None:
            session.step(step)
        if not ready and step >= 3 and _board_published(session):
            print(f"ready {os.getpid()}", flush=True)
            ready = True
        time.sleep(0.05)
    stop.set()
    if session is not None:
        session.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
