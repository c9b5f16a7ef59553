#!/usr/bin/env python3
# Noisy-label classification with a sharpening temperature schedule.
#
# The logits are divided by a temperature that anneals from 1.0 towards 0.02 to sharpen the predictions, and the
# loss is written by hand as log(softmax(...)) (modelled on summerlvsong/Aggregation-Cross-Entropy#2 and
# dmlc/gluon-cv#942: "F.SoftmaxOutput return with 0 value, and then F.log(0) will output -inf, and result in nan
# loss").  Once the temperature is small, a mislabelled sample's probability underflows to exactly 0 in float32,
# log gives -inf, its backward gives inf * 0 = nan, and one optimizer step turns every weight into nan. The
# loop does not check: it keeps stepping at full speed and prints loss=nan.
import argparse
import math
import threading
import queue
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument('--lr', type=float, default=0.05)
p.add_argument('--t-start', type=float, default=1.0)
p.add_argument('--t-end', type=float, default=0.02)
p.add_argument('--anneal-steps', type=int, default=300)
p.add_argument('--label-noise', type=float, default=0.1)
opt = p.parse_args()

torch.set_num_threads(1)
torch.manual_seed(3)
N_CLS, DIM, BS = 8, 32, 128
centers = torch.randn(N_CLS, DIM) * 2.0


def batches(out_q):
    g = torch.Generator().manual_seed(11)
    while True:
        y = torch.randint(0, N_CLS, (BS,), generator=g)
        x = centers[y] + torch.randn(BS, DIM, generator=g)
        noisy = torch.rand(BS, generator=g) < opt.label_noise
        y = torch.where(noisy, torch.randint(0, N_CLS, (BS,), generator=g), y)
        out_q.put((x, y))


q = queue.Queue(maxsize=8)
threading.Thread(target=batches, args=(q,), name='batcher', daemon=True).start()

net = nn.Sequential(nn.Linear(DIM, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, N_CLS))
sgd = torch.optim.SGD(net.parameters(), lr=opt.lr, momentum=0.9)


def temperature(it):
    frac = min(1.0, it / opt.anneal_steps)
    return math.exp(math.log(opt.t_start) + frac * (math.log(opt.t_end) - math.log(opt.t_start)))


it = 0
t0 = time.time()
while True:
    x, y = q.get()
    T = temperature(it)
    probs = torch.softmax(net(x) / T, dim=1)
    loss = -torch.log(probs.gather(1, y[:, None])).mean()
    sgd.zero_grad()
    loss.backward()
    sgd.step()
    it += 1
    if it % 100 == 0:
        w = net[0].weight
        print('it=%d T=%.4f loss=%.4f w0_finite=%s w0_mean=%.5f (%.0f it/s)' % (
            it, T, loss.item(), bool(torch.isfinite(w).all()), w.mean().item(), it / (time.time() - t0)),
            flush=True)
