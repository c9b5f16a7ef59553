"""The shipped suggestion model (int8): a fixed-window syllable LM used as a distillation teacher."""
import torch
from torch import nn

CONTEXT = 8


class WindowLM(nn.Module):
    def __init__(self, vocab, dim=64, hidden=1024):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(CONTEXT * dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, vocab))

    def forward(self, ids):
        ctx = nn.functional.pad(ids, (CONTEXT - 1, 0)).unfold(1, CONTEXT, 1)   # (B, T, CONTEXT)
        return self.mlp(self.emb(ctx).flatten(2))


def load_teacher(vocab, seed=7):
    """Stand-in for the exported checkpoint: same architecture, fixed weights, dynamic int8 Linear layers."""
    torch.manual_seed(seed)
    model = WindowLM(vocab).eval()
    return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
