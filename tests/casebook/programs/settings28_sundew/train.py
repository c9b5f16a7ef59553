"""CO2-flux regression for sundew (Drosera) bog plots from chamber and microclimate readings.

A deep residual MLP is trained on synthetic half-hourly plot records; an audit thread (audit.py) keeps a
per-parameter trail of every step in a rotating log, as the field kit's data policy asks."""
import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import audit

FEATURES = ("par", "air_temp", "peat_temp_5cm", "peat_temp_20cm", "water_table", "rh", "vpd", "wind",
            "chamber_minutes", "doy_sin", "doy_cos", "hour_sin", "hour_cos", "sphagnum_cover",
            "drosera_density", "prey_index")


def synth(rng, n):
    x = rng.normal(size=(n, len(FEATURES))).astype(np.float32)
    par, temp, wt, cover = x[:, 0], x[:, 1], x[:, 4], x[:, 13]
    gpp = 2.0 * np.tanh(par) * (1 + 0.3 * cover)
    reco = 0.8 * np.exp(0.3 * temp) * (1 - 0.4 * np.tanh(wt))
    y = (reco - gpp + 0.1 * x[:, 15] * x[:, 14] + 0.05 * rng.normal(size=n)).astype(np.float32)
    return x, y[:, None]


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, h):
        return h + self.fc(F.silu(self.norm(h)))


class FluxNet(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.inp = nn.Linear(len(FEATURES), width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


SCRATCH_PREFIX = "sundew-audit-"


def sweep_scratch():
    """Removes the audit directories of runs that were killed before they could clean up."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if name.startswith(SCRATCH_PREFIX):
            owner = name[len(SCRATCH_PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/bog_lab.toml")
    args = ap.parse_args()
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    run, log_cfg = cfg["train"], cfg["audit"]

    sweep_scratch()
    scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    trail, handler = None, None
    try:
        torch.manual_seed(run["seed"])
        torch.set_num_threads(run["threads"])
        rng = np.random.default_rng(run["seed"])
        xs, ys = synth(rng, run["records"])
        x_all, y_all = torch.from_numpy(xs), torch.from_numpy(ys)

        model = FluxNet(run["width"], run["depth"])
        opt = torch.optim.Adam(model.parameters(), lr=run["lr"])
        names = [n for n, _ in model.named_parameters()]
        params = [p for _, p in model.named_parameters()]
        model_lock = threading.Lock()
        logger, handler = audit.build_logger(scratch, log_cfg["max_bytes"], log_cfg["backup_count"])
        logger.info("run %s: %d tensors, %d records", cfg["name"], len(names), len(xs))
        trail = audit.AuditTrail(logger, names, log_cfg["queue_depth"], log_cfg["checkpoint_every"], scratch,
                                 model, model_lock)
        trail.start()

        step = 0
        batch = run["batch"]
        while True:
            idx = torch.randint(0, len(xs), (batch,))
            x, y = x_all[idx], y_all[idx]
            with model_lock:
                before = [p.detach().clone() for p in params]
                pred = model(x)
                loss = F.smooth_l1_loss(pred, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                g = torch.stack(torch._foreach_norm([p.grad for p in params]))
                opt.step()
                w = torch.stack(torch._foreach_norm(params))
                u = torch.stack(torch._foreach_norm(torch._foreach_sub(params, before)))
            trail.submit(step, g.tolist(), w.tolist(), u.tolist(), loss.item())
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            step += 1
    finally:
        if trail is not None:
            trail.close()
        if handler is not None:
            handler.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
