"""Next-day fire-danger class (low .. extreme) for a district's remote automatic weather stations, trained on
the relay's archived station-day reports (YAML).

    start-up        a spool of station-day reports (stations x days YAML files, synthesised) is written into a
                    scratch directory
    spool reader    a thread that reads the report files in a shuffled order, loads each with the configured
                    YAML loader (yamlio.read_report) and turns it into a sample; the samples go into a reservoir
                    and a batch is drawn from it after every `fresh_per_batch` new reports
    main thread     trains a small Transformer over the 24 hourly observations (plus the station's metadata)

The ingest settings (spool size, YAML loader, batch size) come from a TOML file, --config.

usage: python train.py [--config configs/ingest.toml] [--steps N]

The default config loads each report with yaml.SafeLoader, PyYAML's pure-Python loader, where the libyaml-based
CSafeLoader builds the same objects several times faster; public reports of the cost:
pre-commit/pre-commit-hooks#27, RedHatInsights/insights-core#2271, kxr/o-must-gather#33, papis/papis#348,
OpenJobDescription/openjd-model-for-python#219, y-scope/clp#1402.
"""
import argparse
import os
import queue
import random
import shutil
import signal
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
import yaml

import reports
import yamlio

HERE = os.path.dirname(os.path.abspath(__file__))
OBS_MEAN = np.array([22.0, 40.0, 18.0, 28.0, 0.1, 18.0, 300.0], dtype=np.float32)
OBS_STD = np.array([8.0, 20.0, 10.0, 15.0, 0.6, 8.0, 330.0], dtype=np.float32)


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "ingest.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=5e-4)
    return ap.parse_args()


def to_sample(report):
    obs = np.array([[o[f] for f in reports.FIELDS] for o in report["observations"]], dtype=np.float32)
    st = report["station"]
    static = np.array([st["elevation_m"] / 1000.0, np.sin(np.radians(st["aspect_deg"])),
                       np.cos(np.radians(st["aspect_deg"])), st["slope_pct"] / 30.0], dtype=np.float32)
    fuel = reports.FUEL_MODELS.index(st["fuel_model"])
    return (obs - OBS_MEAN) / OBS_STD, static, fuel, report["outcome"]["danger_class"]


class SpoolReader(threading.Thread):
    def __init__(self, paths, loader, batch, fresh_per_batch, out, stop, reservoir=384):
        super().__init__(name="spool-reader", daemon=True)
        self.paths, self.loader, self.out, self.stop = list(paths), loader, out, stop
        self.batch, self.fresh_per_batch, self.capacity = batch, fresh_per_batch, reservoir
        self.pool = []
        self.rng = random.Random(17)
        self.loaded = 0
        self.error = None

    def batches(self):
        while True:
            self.rng.shuffle(self.paths)
            for path in self.paths:
                sample = to_sample(yamlio.read_report(path, self.loader))
                if len(self.pool) < self.capacity:
                    self.pool.append(sample)
                else:
                    self.pool[self.rng.randrange(self.capacity)] = sample
                self.loaded += 1
                if len(self.pool) >= self.batch and self.loaded % self.fresh_per_batch == 0:
                    yield self.rng.sample(self.pool, self.batch)

    def run(self):
        try:
            for picked in self.batches():
                obs, static, fuel, y = zip(*picked)
                item = (torch.from_numpy(np.stack(obs)), torch.from_numpy(np.stack(static)),
                        torch.tensor(fuel), torch.tensor(y))
                while not self.stop.is_set():
                    try:
                        self.out.put(item, timeout=0.25)
                        break
                    except queue.Full:
                        pass
                if self.stop.is_set():
                    return
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class DangerNet(nn.Module):
    def __init__(self, d=64, layers=2):
        super().__init__()
        self.obs = nn.Linear(len(reports.FIELDS), d)
        self.hour = nn.Parameter(torch.randn(24, d) * 0.02)
        self.static = nn.Linear(4, d)
        self.fuel = nn.Embedding(len(reports.FUEL_MODELS), d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, batch_first=True, norm_first=True), layers,
            enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, reports.CLASSES))

    def forward(self, obs, static, fuel):
        ctx = (self.static(static) + self.fuel(fuel)).unsqueeze(1)
        h = self.encoder(torch.cat([ctx, self.obs(obs) + self.hour], 1))
        return self.head(h[:, 0])


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)        # relative to the program's folder
    cfg = yamlio.load_config(args.config)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    scratch = None
    stop = threading.Event()
    threads = []
    try:
        scratch = tempfile.mkdtemp(prefix="firewx-")
        paths = reports.write_spool(scratch, cfg["spool"]["stations"], cfg["spool"]["days"], seed=23)
        with open(os.path.join(scratch, "stations.yaml"), encoding="utf-8") as fh:
            catalogue = yaml.safe_load(fh)          # read once, as the relay's QC job does
        loader = yamlio.loader_for(cfg["yaml"]["loader"])
        print(f"spool: {len(paths)} reports from {len(catalogue['stations'])} stations, loader {loader.__name__}",
              flush=True)
        batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
        reader = SpoolReader(paths, loader, cfg["batches"]["size"], cfg["batches"]["fresh_per_batch"], batches,
                             stop)
        threads = [reader]
        reader.start()

        model = DangerNet()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                obs, static, fuel, y = batches.get(timeout=2.0)
            except queue.Empty:
                if reader.error is not None or not reader.is_alive():
                    raise RuntimeError(f"spool reader stopped: {reader.error!r}")
                continue
            loss = F.cross_entropy(model(obs, static, fuel), y, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 5 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"reports {reader.loaded}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the spool reader", flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
