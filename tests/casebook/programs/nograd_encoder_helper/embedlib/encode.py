"""Encoding helpers shared by the training and the retrieval-eval scripts."""
import torch
import torch.nn.functional as F


@torch.no_grad()
def encode_batch(encoder, views, normalize=True):
    """Embed a batch of views; used by eval (recall@k) and, since the refactor, by training too."""
    z = encoder(views)
    return F.normalize(z, dim=-1) if normalize else z


def info_nce(q, k, temperature=0.1):
    logits = q @ k.t() / temperature
    target = torch.arange(q.shape[0])
    return F.cross_entropy(logits, target)
