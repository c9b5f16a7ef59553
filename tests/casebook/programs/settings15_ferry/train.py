"""Departure-delay regression for a ferry operator: each training example is one sailing (route, vessel,
day, departure hour, weather); the route and vessel features come from the operator's feature service.

    feature service   a child process (routestore.py, an HTTP/JSON service on a loopback port)
    fetcher           a thread in the trainer that fetches the vessel particulars once, then draws sailings,
                      looks up each sailing's route features (static features, recent delay statistics and
                      tide windows) on the service (storeclient.FeatureStore over an httpx.Client) and batches
                      them
    main thread       trains an MLP regressor of log delay minutes

Settings come from a TOML file, --config ([featurestore] sets the client's connection pool).

usage: python train.py [--config configs/store_rebalance.toml] [--steps N]

With keepalive_connections = 0 the pool keeps no idle connection: every lookup opens a new TCP connection to
the service (connect, accept, a new handler process forked by the service) and closes it after the response;
public reports of what per-request connections cost: leo-aa88/ultra-minimal-fast-rest-api#25,
pi-hole/FTL#2357, Portkey-AI/portkey-python-sdk#318.
"""
import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import tomllib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import storeclient

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES, VESSELS = 240, 60


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "store_rebalance.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)
    with open(args.config, "rb") as fh:
        cfg = tomllib.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    stop = threading.Event()
    state = {"sailings": 0, "error": None}
    batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
    service = fetcher = client = None
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        service = subprocess.Popen([sys.executable, os.path.join(HERE, "routestore.py")], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        port = int(service.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        status = storeclient.health(base)
        client = storeclient.make_client(base, cfg["featurestore"])
        store = storeclient.FeatureStore(client)
        batch = cfg["batches"]["size"]

        def fetcher_main():
            try:
                rng = np.random.default_rng(3)
                route_gain = rng.normal(0, 1, 24)
                vessel_gain = rng.normal(0, 1, 16)
                # vessel particulars change only at refits: fetched once per run
                vessels = [store.vessel(vid, 0) for vid in range(VESSELS)]
                while not stop.is_set():
                    rows, target = [], []
                    for _ in range(batch):
                        rid, vid = int(rng.integers(ROUTES)), int(rng.integers(VESSELS))
                        day, hour = int(rng.integers(365)), int(rng.integers(5, 23))
                        wind, swell = float(rng.gamma(2.0, 4.0)), float(rng.gamma(1.5, 0.6))
                        rf = store.route(rid, day)
                        vf = vessels[vid]
                        rows.append(rf + vf + [hour / 24.0, wind / 20.0, swell])
                        minutes = np.exp(0.4 * np.dot(route_gain, rf) / 5 + 0.3 * np.dot(vessel_gain, vf) / 4
                                         + 0.08 * wind + 0.5 * swell + rng.normal(0, 0.3))
                        target.append(np.log1p(minutes))
                    item = (torch.tensor(rows), torch.tensor(target, dtype=torch.float32))
                    state["sailings"] += batch
                    while not stop.is_set():
                        try:
                            batches.put(item, timeout=0.25)
                            break
                        except queue.Full:
                            pass
            except Exception as exc:       # noqa: BLE001 - reported by the main thread
                state["error"] = exc

        fetcher = threading.Thread(target=fetcher_main, name="fetcher", daemon=True)
        fetcher.start()
        print(f"ferry delays: feature service pid {status['pid']} on port {port}, keep-alive pool "
              f"{cfg['featurestore']['keepalive_connections']}, batch {batch}", flush=True)
        model = nn.Sequential(nn.Linear(24 + 16 + 3, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(),
                              nn.Linear(256, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                x, y = batches.get(timeout=2.0)
            except queue.Empty:
                if state["error"] is not None or not fetcher.is_alive():
                    raise RuntimeError(f"feature fetcher stopped: {state['error']!r}")
                continue
            loss = F.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.monotonic()
            if now - tick >= 1.0:
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"lookups {store.requests}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the fetcher and the feature service", flush=True)
    finally:
        stop.set()
        if fetcher is not None:
            fetcher.join(timeout=0.5)
        if client is not None:
            client.close()
        if service is not None:
            service.terminate()
            try:
                service.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
