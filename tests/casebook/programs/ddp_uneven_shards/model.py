import torch


class TinyEncoder(torch.nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 64) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.mix = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        for _ in range(3):
            h = h + self.mix(h)
        return h.mean(dim=1)
