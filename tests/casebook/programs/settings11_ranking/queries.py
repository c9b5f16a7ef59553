"""Synthetic learning-to-rank data: queries with 16 candidate documents each, graded relevance 0-3 from a hidden
bilinear scorer, query-document features as a search engine's feature extractor would emit them."""
import torch

N_FEAT = 64
N_INPUT = 2 * N_FEAT
DOCS_PER_QUERY = 16
N_QUERIES = 50_000


class QuerySampler:
    def __init__(self, seed=5):
        self.gen = torch.Generator().manual_seed(seed)
        self.w = torch.randn(N_FEAT, N_FEAT, generator=self.gen) / N_FEAT
        self.u = torch.randn(N_FEAT, generator=self.gen)

    def batch(self, n_queries):
        """-> (qids [Q], features [Q, D, 2F], labels [Q, D] in 0..3)"""
        g = self.gen
        qids = torch.randint(0, N_QUERIES, (n_queries,), generator=g)
        q = torch.randn(n_queries, 1, N_FEAT, generator=g)
        d = torch.randn(n_queries, DOCS_PER_QUERY, N_FEAT, generator=g)
        rel = (q @ self.w * d).sum(-1) + 0.5 * d @ self.u + 0.3 * torch.randn(n_queries, DOCS_PER_QUERY, generator=g)
        ranks = rel.argsort(1, descending=True).argsort(1)
        labels = (3 - ranks.div(3, rounding_mode="floor")).clamp(min=0)
        x = torch.cat([d, d * q], -1)
        return qids, x, labels
