"""Click-through-rate model trained from compressed click logs read by the `fastingest` library.

Modelled on zilliztech/knowhere#121 ("lower the OS scheduling priority of knowhere threads" to nice 19, so a
library's pool never competes with its host) and awslabs/metrique#94 ("nice the background thread to avoid
disrupting the application workloads"). Here the library's decode thread renices itself to 19 as it starts. The
training loop's intra-op threads keep every core busy while a step runs, so the nice-19 decoder only gets a CPU
when the trainer waits for it: decoding and training no longer overlap and every batch is late.

    python train_ctr.py                  # fastingest's default: its threads at nice 19
    python train_ctr.py --ingest-nice 0  # decode thread at normal priority (the heartbeat stays at nice 10)

Measured on the 2-core dev box (shared, loaded; 4 alternating 40 s runs each): see the case's docstring in
cases.py for the step rates.
"""
import argparse
import os
import tempfile
import threading
import time

import fastingest
import torch
from torch import nn

ROWS, FIELDS, CROSS_DIM = 512, 65, 256  # one block = one batch: label + 64 features


class CTRNet(nn.Module):
    def __init__(self, d_in: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                  nn.Linear(512, 1))

    def forward(self, x):
        return self.body(x).squeeze(1)


def fit(reader: fastingest.Reader, log_every: int) -> None:
    model = CTRNet(FIELDS - 1 + CROSS_DIM)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    lossf = nn.BCEWithLogitsLoss()
    t0, step = time.time(), 0
    for x, y in reader:
        loss = lossf(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % log_every == 0:
            now = time.time()
            print(f"[ctr] step {step} logloss {loss.item():.4f} {log_every / (now - t0):.2f} steps/s", flush=True)
            t0 = now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingest-nice", type=int, default=fastingest.BACKGROUND_NICE)
    ap.add_argument("--log-every", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    blocks = fastingest.make_blocks(12, ROWS, FIELDS)
    print(f"[ctr] {len(blocks)} blocks ready, decode thread nice={args.ingest_nice}, "
          f"intra-op threads={torch.get_num_threads()}", flush=True)
    beat = os.path.join(tempfile.gettempdir(), "fastingest-heartbeat")
    fastingest.Heartbeat(beat, nice=10).start()
    reader = fastingest.Reader(blocks, ROWS, FIELDS, CROSS_DIM, nice=args.ingest_nice).start()
    trainer = threading.Thread(target=fit, args=(reader, args.log_every), name="trainer")
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
