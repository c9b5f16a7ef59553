"""Image classifier with GPU-side augmentation: an augment thread decodes (here: draws) uint8 images, crops,
flips, jitters and normalises them on the GPU, and hands finished batches to the training thread, which was meant
to run the model on the GPU "at the same time".

Modelled on sonos/tract#2443 (threads sharing the default CUDA stream "serialized all GPU work onto one stream and
inherited the null stream's implicit device-wide synchronization"), pytorch/pytorch#25540 (kernels of two
streams serialised by the legacy default stream) and NVIDIA/apex#316 (a torch.cuda.synchronize() every iteration
that only the timing needed): both threads launch on the default stream, and the augment thread calls
torch.cuda.synchronize() before each hand-off "so the batch is ready", which waits for the trainer's queued
forward/backward too: the two threads take turns instead of overlapping.

  python vision_pipeline.py                # as written
  python vision_pipeline.py --side-stream  # augmentation on its own stream, hand-off by a CUDA event
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def augment(raw, size, gen):
    b, _, h, w = raw.shape
    top = int(torch.randint(0, h - size + 1, (1,), generator=gen))
    left = int(torch.randint(0, w - size + 1, (1,), generator=gen))
    x = raw[:, :, top:top + size, left:left + size].float().div_(255)
    flip = torch.rand(b, 1, 1, 1, device=x.device) < 0.5
    x = torch.where(flip, x.flip(-1), x)
    x = x * (0.8 + 0.4 * torch.rand(b, 3, 1, 1, device=x.device))   # colour jitter
    x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), 3, stride=1)  # slight blur
    return (x - MEAN.to(x.device)) / STD.to(x.device)


class GpuAugmenter(threading.Thread):
    def __init__(self, out, batch, size, device, side_stream):
        super().__init__(name="gpu-augment", daemon=True)
        self.out, self.batch, self.size, self.device = out, batch, size, device
        self.stream = torch.cuda.Stream(device) if side_stream else None

    def run(self):
        gen = torch.Generator().manual_seed(0)
        pool = torch.randint(0, 256, (8, self.batch, 3, self.size + 32, self.size + 32), dtype=torch.uint8,
                             device=self.device)  # stands in for the decoded JPEG cache
        labels = torch.randint(0, 1000, (8, self.batch), device=self.device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the pool is ready before the first batch
        i = 0
        while True:
            if self.stream is not None:
                with torch.cuda.stream(self.stream):
                    x = augment(pool[i % 8], self.size, gen)
                    done = torch.cuda.Event()
                    done.record(self.stream)
                self.out.put((x, labels[i % 8], done))
            else:
                x = augment(pool[i % 8], self.size, gen)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)  # make sure the batch is finished before handing it over
                self.out.put((x, labels[i % 8], None))
            i += 1


class Residual(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))

    def forward(self, x):
        return F.relu(x + self.body(x))


def make_model(width, blocks, device):
    layers = [nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    ch = width
    for stage in range(4):
        if stage:
            layers += [nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * ch), nn.ReLU()]
            ch *= 2
        layers += [Residual(ch) for _ in range(blocks)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ch, 1000)]
    return nn.Sequential(*layers).to(device, memory_format=torch.channels_last)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--side-stream", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    batch, size, width, blocks = (96, 96, 32, 3) if gpu else (8, 32, 8, 1)
    q = queue.Queue(maxsize=3)
    GpuAugmenter(q, batch, size, device, args.side_stream and gpu).start()
    model = make_model(width, blocks, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def train():
        step, t0 = 0, time.time()
        while True:
            x, y, ready = q.get()
            if ready is not None:
                torch.cuda.current_stream(device).wait_event(ready)
                x.record_stream(torch.cuda.current_stream(device))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x.contiguous(memory_format=torch.channels_last)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 20 == 0:
                print(f"train step {step} loss {loss.item():.3f} {20 * batch / (time.time() - t0):.0f} img/s",
                      flush=True)
                t0 = time.time()

    t = threading.Thread(target=train, name="trainer")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
