"""The frozen backbone the pool workers run."""
import torch

EMBED_DIM = 64
_backbone = None


def load_backbone():
    global _backbone
    torch.manual_seed(0)
    _backbone = torch.nn.Sequential(
        torch.nn.Conv2d(3, 24, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(24, 48, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(48, EMBED_DIM),
    ).eval()


@torch.no_grad()
def embed_batch(index):
    g = torch.Generator().manual_seed(index)
    images = torch.rand(16, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (16,), generator=g)
    return _backbone(images), labels
