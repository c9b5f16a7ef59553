"""A recurrent drafter stepped one token at a time from Python: thousands of tiny kernels per batch."""
import argparse
import queue
import threading

import torch


def source(q, device):
    while True:
        q.put(torch.randn(8, 256, 64, device=device))


def learner(q, device):
    # Scaled like nn.RNN's init: at std 1 the 256-step recurrence's gradients overflowed and the run trained on
    # NaN (the health probe's first catch, on the H200): this program is about its launches, not its numerics.
    w = (torch.randn(64, 64, device=device) / 8).requires_grad_()
    u = (torch.randn(64, 64, device=device) / 8).requires_grad_()
    opt = torch.optim.SGD([w, u], lr=1e-4)
    k = 0
    while True:
        x = q.get()
        h = torch.zeros(8, 64, device=device)
        loss = 0.0
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w + h @ u)
            loss = loss + h.square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        k += 1
        if k % 5 == 0:
            print(f"learner iteration {k}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    q = queue.Queue(maxsize=4)
    threading.Thread(target=source, args=(q, a.device), name="source", daemon=True).start()
    th = threading.Thread(target=learner, args=(q, a.device), name="learner")
    th.start()
    th.join()
