"""Transit-time (ETA) regression for a regional parcel sort network, trained on the hubs' live induction scans.

    scanners        child processes (multiprocessing.Process, scans.scanner_main) simulate the hubs' induction
                    scanners and put one event per parcel on the scan channel
    collator        a thread in the trainer that takes the events off the channel and batches them
    main thread     trains an embedding + MLP regressor of log transit hours

The channel backend (channels.make_queue) and the sizes come from a TOML file, --config; a multiprocessing
manager is started in every run for the shared scan counters.

usage: python train.py [--config configs/channels_managed.toml] [--steps N]

The managed backend puts the scan queue in the manager's server process: every put and every get is a
request/reply round trip on the manager's socket (pickled call, a server thread runs queue.Queue.put/get,
pickled reply); public reports of the cost: SFDO-Tooling/CumulusCI#3080, datarobot/batch-scoring#42.
"""
import argparse
import os
import queue
import signal
import threading
import time

import numpy as np
import torch
import torch.multiprocessing
import torch.nn.functional as F
from torch import nn

import channels
import scans

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "channels_managed.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class Collator(threading.Thread):
    def __init__(self, channel, batch, out, stop):
        super().__init__(name="collator", daemon=True)
        self.channel, self.batch, self.out, self.stop = channel, batch, out, stop
        self.events = 0
        self.error = None

    def run(self):
        try:
            pending = []
            while not self.stop.is_set():
                try:
                    pending.append(self.channel.get(timeout=0.25))
                except queue.Empty:
                    continue
                self.events += 1
                if len(pending) < self.batch:
                    continue
                cats = torch.tensor([[e["hub"], e["lane"], e["service"]] for e in pending])
                dense = torch.from_numpy(np.stack([e["dense"] for e in pending]))
                y = torch.log(torch.tensor([e["hours"] for e in pending]))
                pending = []
                while not self.stop.is_set():
                    try:
                        self.out.put((cats, dense, y), timeout=0.25)
                        break
                    except queue.Full:
                        pass
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class EtaModel(nn.Module):
    def __init__(self, hidden=384):
        super().__init__()
        self.hub = nn.Embedding(scans.HUBS, 16)
        self.lane = nn.Embedding(scans.LANES, 24)
        self.service = nn.Embedding(len(scans.SERVICES), 4)
        self.mlp = nn.Sequential(nn.Linear(16 + 24 + 4 + scans.DENSE, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.LayerNorm(hidden),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, cats, dense):
        x = torch.cat([self.hub(cats[:, 0]), self.lane(cats[:, 1]), self.service(cats[:, 2]), dense], 1)
        return self.mlp(x).squeeze(1)


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)        # relative to the program's folder
    cfg = channels.load_config(args.config)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    stop = threading.Event()
    manager = channel = None
    workers = []
    manager, counters = channels.start_manager()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        channel = channels.make_queue(cfg["channels"]["backend"], cfg["channels"]["maxsize"], manager)
        for i in range(cfg["scanners"]["count"]):
            p = torch.multiprocessing.Process(target=scans.scanner_main, args=(f"hub-scanner-{i}", channel, counters,
                                                                               100 + i),
                                              name=f"hub-scanner-{i}", daemon=True)
            p.start()
            workers.append(p)
        batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
        collator = Collator(channel, cfg["batches"]["size"], batches, stop)
        collator.start()
        print(f"channel backend {cfg['channels']['backend']}, scanners "
              f"{', '.join(str(p.pid) for p in workers)}", flush=True)

        model = EtaModel()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                cats, dense, y = batches.get(timeout=2.0)
            except queue.Empty:
                if collator.error is not None or not all(p.is_alive() for p in workers):
                    raise RuntimeError(f"scan feed stopped: {collator.error!r}, scanner exit codes "
                                       f"{[p.exitcode for p in workers]}")
                continue
            loss = F.huber_loss(model(cats, dense), y, delta=0.5)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"events {collator.events}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the scanners", flush=True)
    finally:
        stop.set()
        for p in workers:
            if p.is_alive():
                p.terminate()
        for p in workers:
            p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join()
        if channel is not None and hasattr(channel, "cancel_join_thread"):
            channel.cancel_join_thread()
            channel.close()
        manager.shutdown()


if __name__ == "__main__":
    main()
