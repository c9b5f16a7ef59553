"""Full-graph node classification with a 3-layer message-passing network (mean aggregation, DropEdge) on a GPU.

Modelled on pyg-team/pytorch_geometric#3175 and pytorch/pytorch#50469 (scatter_add_ under
torch.use_deterministic_algorithms(True); PyTorch since added deterministic implementations that sort the indices),
pytorch/pytorch#23151 ("the deterministic mode for these kinds of operations will come with a huge runtime
trade-off") and facebookresearch/fairchem#438 (deterministic scatter made an opt-in config, off by default). The
repo's seed_everything() turns on torch.use_deterministic_algorithms(True) for every run: each layer's index_add_
over 4M edges, and the backward of each gather, then go through the sort-based deterministic index_put path
instead of atomic adds.

    python train_gcn.py                     # seed_everything(..., deterministic=True), the repo default
    python train_gcn.py --nondeterministic  # seeds, cuDNN flags and CUBLAS_WORKSPACE_CONFIG as before;
                                            # use_deterministic_algorithms left off
"""
import argparse
import queue
import threading
import time

import torch
from repro import seed_everything
from torch import nn


class MeanConv(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.msg_lin = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x, src, dst, inv_deg):
        msgs = self.msg_lin(x)[src]  # gather along the kept edges
        agg = torch.zeros(x.shape[0], msgs.shape[1], device=x.device, dtype=msgs.dtype).index_add_(0, dst, msgs)
        return self.self_lin(x) + agg * inv_deg[:, None]


class GNN(nn.Module):
    def __init__(self, d_in, hidden, classes, layers=3):
        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1)
        self.convs = nn.ModuleList(MeanConv(a, hidden) for a in dims)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in dims)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x, src, dst, inv_deg):
        for conv, norm in zip(self.convs, self.norms):
            x = torch.relu(norm(conv(x, src, dst, inv_deg)))
        return self.out(x)


def random_graph(n_nodes, n_edges, d_feat, classes, gen):
    """A planted-partition graph: edges mostly inside communities, features noisy community centroids."""
    labels = torch.randint(0, classes, (n_nodes,), generator=gen)
    by_class = [torch.nonzero(labels == c).flatten() for c in range(classes)]
    src = torch.randint(0, n_nodes, (n_edges,), generator=gen)
    same = torch.rand(n_edges, generator=gen) < 0.8
    dst = torch.randint(0, n_nodes, (n_edges,), generator=gen)
    for c in range(classes):
        pick = same & (labels[src] == c)
        members = by_class[c]
        dst[pick] = members[torch.randint(0, len(members), (int(pick.sum()),), generator=gen)]
    centroids = torch.randn(classes, d_feat, generator=gen)
    feats = centroids[labels] + 2.0 * torch.randn(n_nodes, d_feat, generator=gen)
    return feats, labels, src, dst


def drop_edge_sampler(n_edges, keep, device, out, seed=1):
    """DropEdge: a fresh random subset of edge ids for every step, drawn on the device ahead of the trainer."""
    g = torch.Generator(device=device).manual_seed(seed)
    k = int(keep * n_edges)
    while True:
        out.put(torch.randperm(n_edges, generator=g, device=device)[:k])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--nondeterministic", action="store_true")
    ap.add_argument("--log-every", type=int, default=20)
    args = ap.parse_args()
    seed_everything(0, deterministic=not args.nondeterministic)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    n_nodes, n_edges, d_feat, hidden, classes = (400_000, 5_000_000, 128, 128, 16) if gpu else \
        (5_000, 40_000, 32, 32, 8)
    gen = torch.Generator().manual_seed(0)
    feats, labels, src, dst = random_graph(n_nodes, n_edges, d_feat, classes, gen)
    feats, labels, src, dst = feats.to(device), labels.to(device), src.to(device), dst.to(device)
    train_idx = torch.nonzero(torch.rand(n_nodes, generator=gen) < 0.3).flatten().to(device)
    model = GNN(d_feat, hidden, classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    edge_ids = queue.Queue(maxsize=4)
    threading.Thread(target=drop_edge_sampler, args=(n_edges, 0.8, device, edge_ids), name="drop-edge", daemon=True).start()
    print(f"gnn: {n_nodes:,} nodes, {n_edges:,} edges, deterministic="
          f"{torch.are_deterministic_algorithms_enabled()}", flush=True)

    step, t0 = 0, time.time()
    while True:
        keep = edge_ids.get()
        s, d = src[keep], dst[keep]
        deg = torch.zeros(n_nodes, device=device).index_add_(0, d, torch.ones_like(d, dtype=torch.float32))
        logits = model(feats, s, d, 1.0 / deg.clamp(min=1))
        logp = torch.log_softmax(logits[train_idx], -1)
        loss = -logp.gather(1, labels[train_idx][:, None]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % args.log_every == 0:
            print(f"epoch {step:>5}  loss {loss.item():.4f}  {args.log_every / (time.time() - t0):.2f} it/s", flush=True)
            t0 = time.time()


if __name__ == "__main__":
    main()
