"""Frame classifier for speech features (CTC-style targets simplified to per-frame labels) with an optional
reconstruction head kept from the self-supervised stage. The run config sets its weight to 0.0, "disabled".

Modelled on open-mmlab/mmaction2#682 / mmcv#877 (an auxiliary head configured but its loss silently unused),
jasonkyuyim/multiflow#3 (auxiliary loss weight set to 0 in the config to turn it off) and NVIDIA/Isaac-GR00T#734
(an output computed every step and discarded): with weight 0.0 the loss leaves the reconstruction term out, but
the model's forward still runs the decoder on every frame (about a third of the step's GPU time, and its
activations' memory) and the result is dropped.

  python speech_ctc.py                          # weight 0.0, head still computed (as shipped)
  python speech_ctc.py --skip-disabled-heads    # heads with weight 0 are frozen and not run (preview every 200
                                                # steps)
"""
import argparse
import json
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

CONFIG = json.loads("""
{
  "model": {"feat_dim": 512, "width": 1536, "layers": 4, "labels": 128, "recon_width": 6144},
  "data": {"batch": 32, "frames": 384},
  "loss": {"ctc_weight": 1.0, "recon_weight": 0.0},
  "optim": {"lr": 0.0003}
}
""")
CPU_OVERRIDES = {"model": {"feat_dim": 64, "width": 128, "layers": 2, "labels": 32, "recon_width": 256},
                 "data": {"batch": 4, "frames": 64}}


class SpeechModel(nn.Module):
    def __init__(self, feat_dim, width, layers, labels, recon_width):
        super().__init__()
        self.inp = nn.Linear(feat_dim, width)
        self.body = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
            for _ in range(layers))
        self.classifier = nn.Linear(width, labels)
        # Reconstruction decoder from the self-supervised stage (masked-frame prediction).
        self.recon = nn.Sequential(nn.Linear(width, recon_width), nn.GELU(), nn.Linear(recon_width, recon_width),
                                   nn.GELU(), nn.Linear(recon_width, feat_dim))

    def forward(self, feats, with_recon=True):
        h = self.inp(feats)
        for blk in self.body:
            h = h + blk(h)
        out = {"logits": self.classifier(h)}
        if with_recon:
            out["recon"] = self.recon(h)
        return out


class Module:
    """Lightning-flavoured: training_step returns the loss; the loop is generic."""

    def __init__(self, cfg, device, skip_disabled):
        self.cfg, self.device, self.skip_disabled = cfg, device, skip_disabled
        self.model = SpeechModel(**cfg["model"]).to(device)
        if skip_disabled and cfg["loss"]["recon_weight"] == 0.0:
            self.model.recon.requires_grad_(False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg["optim"]["lr"])

    def training_step(self, feats, labels, step):
        w = self.cfg["loss"]
        with_recon = not self.skip_disabled or w["recon_weight"] > 0.0
        preview = self.skip_disabled and step % 200 == 0
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
            out = self.model(feats, with_recon=with_recon)
        loss = w["ctc_weight"] * F.cross_entropy(out["logits"].float().flatten(0, 1), labels.flatten())
        if w["recon_weight"] > 0.0:
            loss = loss + w["recon_weight"] * F.mse_loss(out["recon"].float(), feats)
        if preview:  # a look at what the frozen-weight decoder makes of this batch, for the logs
            with torch.no_grad(), torch.autocast(self.device.type, dtype=torch.bfloat16,
                                                 enabled=self.device.type == "cuda"):
                recon = self.model.recon(self.model.inp(feats[:1]))
            print(f"  recon preview mse {F.mse_loss(recon.float(), feats[:1]).item():.3f}", flush=True)
        return loss


def data_worker(cfg, device, out):
    d, m = cfg["data"], cfg["model"]
    g = torch.Generator(device=device).manual_seed(3)
    while True:
        feats = torch.randn(d["batch"], d["frames"], m["feat_dim"], device=device, generator=g)
        labels = torch.randint(0, m["labels"], (d["batch"], d["frames"]), device=device, generator=g)
        out.put((feats, labels))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--skip-disabled-heads", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    cfg = CONFIG if device.type == "cuda" else {**CONFIG, **CPU_OVERRIDES}
    module = Module(cfg, device, args.skip_disabled_heads)
    q = queue.Queue(maxsize=4)
    threading.Thread(target=data_worker, args=(cfg, device, q), name="feature-loader", daemon=True).start()

    def fit():
        step, t0 = 0, time.time()
        while True:
            feats, labels = q.get()
            loss = module.training_step(feats, labels, step)
            loss.backward()
            module.opt.step()
            module.opt.zero_grad(set_to_none=True)
            step += 1
            if step % 20 == 0:
                print(f"Epoch 0 | step {step} | loss {loss.item():.3f} | {20 / (time.time() - t0):.1f} it/s", flush=True)
                t0 = time.time()

    t = threading.Thread(target=fit, name="fit-loop")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
