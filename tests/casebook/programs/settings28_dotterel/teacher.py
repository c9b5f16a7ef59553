"""The frozen bout encoder that labels batches for the student, run by a small pool of labeller threads."""
import warnings

import torch
import torch.nn as nn


class BoutTeacher(nn.Module):
    def __init__(self, n_features, d_model, heads, ff, layers, n_classes, nested):
        super().__init__()
        self.proj = nn.Linear(n_features, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.1, activation="relu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=nested)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x, pad):
        h = self.encoder(self.proj(x), src_key_padding_mask=pad)
        h = h.masked_fill(pad.unsqueeze(-1), 0.0)
        pooled = h.sum(1) / (~pad).sum(1, keepdim=True).clamp(min=1)
        return self.head(pooled), pooled


def configure(fastpath):
    """Process-wide switches for the teacher's inference."""
    warnings.filterwarnings("ignore", message=".*nested tensors is in prototype stage.*")
    warnings.filterwarnings("ignore", message=".*enable_nested_tensor is True.*")
    torch.backends.mha.set_fastpath_enabled(bool(fastpath))


def build(cfg, n_features, n_classes, seed):
    torch.manual_seed(seed)
    model = BoutTeacher(n_features, cfg["d_model"], cfg["heads"], cfg["ff"], cfg["layers"], n_classes,
                        cfg["enable_nested_tensor"])
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def label(model, x, pad, temperature):
    with torch.no_grad():
        logits, emb = model(x, pad)
        return torch.softmax(logits / temperature, dim=-1), emb


def parity_check(model, x, pad):
    """One-off at start-up: the fast and the regular encoder path agree on the unpadded positions."""
    saved = torch.backends.mha.get_fastpath_enabled()
    try:
        torch.backends.mha.set_fastpath_enabled(True)
        a, _ = label(model, x, pad, 1.0)
        torch.backends.mha.set_fastpath_enabled(False)
        b, _ = label(model, x, pad, 1.0)
    finally:
        torch.backends.mha.set_fastpath_enabled(saved)
    return float((a - b).abs().max())
