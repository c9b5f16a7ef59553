import argparse
import os
import signal
import subprocess
import sys
import time

import reedcfg


def start_decoder(cfg):
    s, d = cfg.survey, cfg.decoder
    return subprocess.Popen(
        [sys.executable, os.path.join(reedcfg.HERE, "decoder.py"), "--clips", str(s.clips_per_batch),
         "--sr", str(s.sample_rate), "--seconds", str(s.seconds), "--types", str(s.call_types),
         "--n-fft", str(d.n_fft), "--hop", str(d.hop), "--bands", str(d.bands), "--seed", str(s.seed)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=reedcfg.decoder_env(cfg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/reedbed_field.toml")
    args = ap.parse_args()
    cfg = reedcfg.load(args.config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # run the finally: clean-up on a plain kill

    import torch
    import torch.nn as nn

    from reader import FrameReader

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    decoder = start_decoder(cfg)
    reader = FrameReader(decoder.stdout, cfg.decoder.queue_depth)
    reader.start()
    print(f"{cfg.name}: decoder child {decoder.pid} started ({cfg.survey.clips_per_batch} clips a batch)", flush=True)

    ch = cfg.train.channels
    model = nn.Sequential(
        nn.Conv2d(1, ch, 3, padding=1, stride=(1, 2)), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, cfg.survey.call_types))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = reader.out.get()
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} n {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        decoder.terminate()


if __name__ == "__main__":
    main()
