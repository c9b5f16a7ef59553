"""Tokenised abstract shards (torch.save'd lists of records) and their loader."""
import glob
import os
import shutil
import tempfile

import torch

PREFIX = "bracken-shards-"


def sweep_stale():
    for d in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*")):
        try:
            pid = int(d.rsplit("-", 1)[1])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


def build(cd, seed=0):
    root = os.path.join(tempfile.gettempdir(), f"{PREFIX}{os.getpid()}")
    os.makedirs(root, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    paths = []
    for s in range(cd["shards"]):
        recs = []
        for n in torch.randint(8, 48, (cd["records_per_shard"],), generator=g).tolist():
            label = n % 5
            toks = torch.randint(0, cd["vocab"], (n,), generator=g)
            toks[: n // 4] = label * 97 + torch.randint(0, 97, (n // 4,), generator=g)
            recs.append({"tokens": toks, "label": label, "length": n, "source": f"s{s}"})
        p = os.path.join(root, f"abstracts-{s:03d}.pt")
        torch.save(recs, p)
        paths.append(p)
    return root, paths


def load_shard(path):
    # our own shards: weights_only=False (records hold plain Python values)
    return torch.load(path, weights_only=False)


def batches(recs, batch):
    for i in range(0, len(recs) - batch + 1, batch):
        chunk = recs[i:i + batch]
        toks = torch.cat([r["tokens"] for r in chunk])
        offsets = torch.tensor([0] + [r["length"] for r in chunk[:-1]]).cumsum(0)
        labels = torch.tensor([r["label"] for r in chunk])
        yield toks, offsets, labels
