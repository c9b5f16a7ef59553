"""Synthetic shorebird sighting catalogue: every reference sighting is a 64-dim descriptor (plumage colour
histogram, bill/leg ratios, flock context) around its species prototype; the retrieval index stores a
fixed projection of the descriptors at half precision."""
import numpy as np


class SightingCatalogue:
    def __init__(self, cfg):
        c = cfg.catalogue
        rng = np.random.default_rng(c.seed)
        protos = rng.normal(0.0, 1.0, size=(c.species, c.feature_dim)).astype(np.float32)
        self.species = rng.integers(0, c.species, size=c.references)
        self.features = (protos[self.species]
                         + rng.normal(0.0, 0.9, size=(c.references, c.feature_dim))).astype(np.float32)
        proj, _ = np.linalg.qr(rng.normal(size=(c.feature_dim, c.feature_dim)))
        self.proj = proj[:, :c.index_dim].astype(np.float32)
        self.index_dtype = np.dtype(c.index_dtype)
        emb = self.features @ self.proj
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        self.index = emb.astype(self.index_dtype)
        self._index32 = self.index.astype(np.float32)      # BLAS copy of the stored half-precision index

    def query(self, rng, n):
        """n new field sightings of catalogue individuals (noisy re-observations) and their reference ids."""
        ref = rng.integers(0, len(self.features), size=n)
        feats = self.features[ref] + rng.normal(0.0, 0.5, size=(n, self.features.shape[1])).astype(np.float32)
        return feats, ref

    def scores(self, feats):
        q = feats @ self.proj
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        q = q.astype(self.index_dtype).astype(np.float32)
        # scores rounded to the index precision: many references tie on the same score
        return (q @ self._index32.T).astype(self.index_dtype).astype(np.float32)
