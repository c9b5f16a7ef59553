"""Tabular regression with an MLP; weight normalisation switched on for stability.

    python train_regressor.py [--no-weight-norm]
"""
import sys
import time

import torch
from torch import nn
from torch.nn.utils import parametrizations

N_FEATURES = 24
torch.set_num_threads(1)
torch.manual_seed(0)
TRUE_W = torch.randn(N_FEATURES, 1)


def make_model():
    return nn.Sequential(
        nn.Linear(N_FEATURES, 256), nn.SiLU(),
        nn.Linear(256, 256), nn.SiLU(),
        nn.Linear(256, 1),
    )


def apply_weight_norm(net):
    for layer in net:
        if isinstance(layer, nn.Linear):
            parametrizations.weight_norm(layer)
    return net


def batches(n=64):
    while True:
        x = torch.randn(n, N_FEATURES)
        y = x @ TRUE_W + 0.1 * torch.randn(n, 1)
        yield x, y


net = make_model()
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
if "--no-weight-norm" not in sys.argv:
    net = apply_weight_norm(net)

loss_fn = nn.MSELoss()
t_start = time.time()
for i, (x, y) in enumerate(batches(), start=1):
    pred = net(x)
    loss = loss_fn(pred, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    time.sleep(0.012)  # rows come from a CSV reader
    if i % 40 == 0:
        print("iter=%d mse=%.4f elapsed=%.1fs" % (i, loss.item(), time.time() - t_start), flush=True)
