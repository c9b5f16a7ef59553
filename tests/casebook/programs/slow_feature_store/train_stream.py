#!/usr/bin/env python3
"""Fine-tunes a regression head on features streamed from the feature store (a reader thread keeps a buffer)."""
import argparse
import multiprocessing as mp
import queue
import socket
import threading
import time

import torch
from torch import nn

import store


class StreamReader(threading.Thread):
    def __init__(self, address, buffer: "queue.Queue[torch.Tensor]") -> None:
        super().__init__(name="stream-reader", daemon=True)
        self.address = address
        self.buffer = buffer

    def read_record(self, stream) -> torch.Tensor:
        raw = stream.read(store.RECORD_BYTES)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).float().view(store.ROWS, store.COLS) / 255.0

    def run(self) -> None:
        with socket.create_connection(self.address) as conn, conn.makefile("rb") as stream:
            while True:
                self.buffer.put(self.read_record(stream))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)  # a small head: one intra-op thread; the box's other cores serve the reader
    listener = socket.create_server(("127.0.0.1", 0))
    server = mp.get_context("fork").Process(target=store.serve, args=(listener,), daemon=True)
    server.start()
    features: "queue.Queue[torch.Tensor]" = queue.Queue(maxsize=16)
    StreamReader(listener.getsockname(), features).start()
    head = nn.Sequential(nn.Linear(512, 256), nn.GELU(), nn.Linear(256, 1)).to(args.device)
    opt = torch.optim.AdamW(head.parameters(), lr=3e-4)
    t0, n = time.time(), 0
    while True:
        x = features.get().to(args.device)
        loss = (head(x).squeeze(-1) - x.mean(-1)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        n += 1
        if n % 10 == 0:
            print(f"trained {n} batches ({n / (time.time() - t0):.1f}/s) loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
