"""Training throughput benchmark for the segmentation head: a prefetch thread decodes samples while the loop
trains. `harness.stable_timing()` comes from the team's micro-benchmark kit."""
import os
import queue
import threading
import time

import harness
import torch
import torch.nn.functional as F

harness.stable_timing()


def decode(seed):
    """Stand-in for the PNG decode + augmentation the real loader does (pure Python)."""
    state, pixels = seed, []
    for _ in range(2048):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        pixels.append((state >> 8) % 256 / 255.0)
    return pixels


def prefetch(out):
    seed = 0
    while True:
        seed += 1
        out.put(torch.tensor(decode(seed)).view(2, 1, 32, 32))


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    head = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 2, 1))
    opt = torch.optim.SGD(head.parameters(), lr=0.01)
    samples = queue.Queue(maxsize=8)
    threading.Thread(target=prefetch, args=(samples,), name="prefetch", daemon=True).start()
    it, t0 = 0, time.time()
    while True:
        x = samples.get()
        target = (x > 0.5).long().squeeze(1)
        for _ in range(3):
            loss = F.cross_entropy(head(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        it += 1
        if it % 5 == 0:
            print(f"bench it={it} {it / (time.time() - t0):.1f} it/s", flush=True)


if __name__ == "__main__":
    main()
