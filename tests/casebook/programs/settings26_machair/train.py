import argparse
import time

import machcfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/dune_survey.toml")
    args = ap.parse_args()
    cfg = machcfg.load(args.config)

    import torch
    import torch.nn as nn

    from ingest import TelemetryReader

    torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    reader = TelemetryReader(cfg, cfg.train.seed + 7)
    reader.start()
    while not reader.ready.wait(0.5):
        if not reader.is_alive():
            raise SystemExit("telemetry reader died during start-up")
    print(f"{cfg.name}: replay spool of {cfg.site.spool_records} telemetry lines ready", flush=True)

    h = cfg.train.hidden
    model = nn.Sequential(nn.Linear(cfg.site.sensors, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, h), nn.LayerNorm(h), nn.GELU(),
                          nn.Linear(h, cfg.site.states))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
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


if __name__ == "__main__":
    main()
