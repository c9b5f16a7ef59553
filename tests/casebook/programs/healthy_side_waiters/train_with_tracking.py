"""Single-loop training with an experiment tracker in the background, the way tracking clients work:
a sender thread blocked on a SimpleQueue, a socket reader, a selector loop and a heartbeat Event."""
import argparse
import queue
import select
import socket
import threading
import time

import torch

events: "queue.SimpleQueue[dict]" = queue.SimpleQueue()
stop = threading.Event()


def sender() -> None:  # blocks in C until the training loop logs something
    while not stop.is_set():
        record = events.get()
        _ = len(str(record))


def reader(sock: socket.socket) -> None:  # waits for "server" replies that never come
    while not stop.is_set():
        sock.recv(4096)


def poller(sock: socket.socket) -> None:
    while not stop.is_set():
        select.select([sock], [], [], 30.0)


def heartbeat() -> None:
    while not stop.wait(20.0):
        events.put({"heartbeat": time.time()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    for target, argv, name in ((sender, (), "TrackerSender"), (reader, (a,), "TrackerReader"),
                               (poller, (c,), "TrackerPoller"), (heartbeat, (), "Heartbeat")):
        threading.Thread(target=target, args=argv, name=name, daemon=True).start()
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    step = 0
    while True:
        x = torch.randn(128, 256, device=args.device)
        loss = (model(x) - x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        step += 1
        if step % 50 == 0:
            events.put({"step": step, "loss": loss.item()})
            print(f"step {step}", flush=True)


if __name__ == "__main__":
    main()
