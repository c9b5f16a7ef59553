"""Point-cloud patch classifier (patch features in, class out), trained in fp32 with TF32 tensor cores, as the
config says; a sampler thread draws augmented patch batches on the GPU.

Modelled on huggingface/transformers#16588 (torch 1.12 turned allow_tf32 off by default: fp32 matmuls lost the
A100's 156 vs 19.5 TFLOPS), Nerogar/OneTrainer#1246 ("'highest' is exceedingly slow") and microsoft/retrochimera#36
(2.2x training throughput from float32_matmul_precision='high'): the config asks for TF32, but make_deterministic()
from the reproducibility checklist runs after it and sets allow_tf32 = False and precision 'highest', so every
matmul runs on the FP32 pipes, not the tensor cores.

  python train.py         # as run: determinism block after the precision setting
  python train_fast.py    # the copy without the determinism block (TF32 as configured)
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F

from model import ResidualMLP
from utils.repro import make_deterministic, seed_everything

CONFIG = {"precision": "tf32", "width": 2048, "depth": 4, "classes": 40, "batch": 8192, "lr": 1e-4}
CPU_CONFIG = {**CONFIG, "width": 128, "depth": 2, "batch": 512}


def apply_precision(name):
    if name == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def sampler(cfg, device, out):
    g = torch.Generator(device=device).manual_seed(1)
    centers = torch.randn(cfg["classes"], cfg["width"], device=device, generator=g)
    while True:
        labels = torch.randint(0, cfg["classes"], (cfg["batch"],), device=device, generator=g)
        jitter = 0.8 * torch.randn(cfg["batch"], cfg["width"], device=device, generator=g)
        out.put((centers[labels] + jitter, labels))


def run(cfg, device, deterministic):
    apply_precision(cfg["precision"])
    seed_everything(0)
    if deterministic:
        make_deterministic()
    print(f"precision={cfg['precision']} allow_tf32={torch.backends.cuda.matmul.allow_tf32} "
          f"matmul_precision={torch.get_float32_matmul_precision()}", flush=True)
    model = ResidualMLP(cfg["width"], cfg["depth"], cfg["classes"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    q = queue.Queue(maxsize=3)
    threading.Thread(target=sampler, args=(cfg, device, q), name="patch-sampler", daemon=True).start()

    def loop():
        it, t0 = 0, time.time()
        while True:
            x, y = q.get()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            it += 1
            if it % 5 == 0:
                print(f"it {it:4d} loss {loss.item():.4f} {5 * cfg['batch'] / (time.time() - t0):,.0f} patches/s",
                      flush=True)
                t0 = time.time()

    t = threading.Thread(target=loop, name="optimize")
    t.start()
    t.join()


def main(deterministic=True):
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    run(CONFIG if device.type == "cuda" else CPU_CONFIG, device, deterministic)


if __name__ == "__main__":
    main()
