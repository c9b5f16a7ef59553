"""Per-sample embedding caches for the kNN monitor of a self-supervised run (one embedding per dataset index)."""
import torch


class DictCache:
    """dataset index -> that sample's latest embedding (a row of the step's output)."""

    def __init__(self):
        self.rows = {}

    def store(self, indices, emb):
        for j, i in enumerate(indices):
            self.rows[i] = emb[j]

    def sample(self, n, gen):
        keys = list(self.rows)
        pick = torch.randint(0, len(keys), (min(n, len(keys)),), generator=gen).tolist()
        return torch.stack([self.rows[keys[k]] for k in pick])

    def __len__(self):
        return len(self.rows)


class TensorCache:
    """The same cache as one preallocated (N, D) tensor written with index_copy_."""

    def __init__(self, n, dim, device):
        self.table = torch.zeros(n, dim, device=device)
        self.filled = torch.zeros(n, dtype=torch.bool)

    def store(self, indices, emb):
        idx = torch.as_tensor(indices)
        self.table.index_copy_(0, idx.to(self.table.device, non_blocking=True), emb.float())
        self.filled[idx] = True

    def sample(self, n, gen):
        have = torch.nonzero(self.filled).flatten()
        pick = have[torch.randint(0, len(have), (min(n, len(have)),), generator=gen)]
        return self.table[pick.to(self.table.device)]

    def __len__(self):
        return int(self.filled.sum())
