"""Synthetic listening sessions for skip prediction: each example is one track play with the listener's recent
history and a few dozen categorical context features (device, hour, the playlist's tags...), in the wide
per-feature layout the feature service exports: an ids, an offsets and a weights tensor per sparse feature (the
weights are recency decays for the history features, 1.0 elsewhere) and one column tensor per dense feature."""
import numpy as np
import torch

SPARSE = {  # feature name -> vocabulary size
    "track": 20000, "artist": 4000, "album": 8000, "genre": 64, "label": 600, "decade": 10, "mood": 24,
    "device": 12, "os": 8, "country": 90, "hour": 24, "weekday": 7, "context_type": 6, "playlist_tag": 300,
    "prev_track": 20000, "prev_artist": 4000, "prev_genre": 64, "search_query_cat": 200, "user_segment": 40,
    "subscription": 4, "shuffle": 2, "repeat": 3, "source": 16, "language": 40,
}
BAG = {"prev_track": 20, "prev_artist": 20, "prev_genre": 20, "playlist_tag": 8, "mood": 3}   # multi-valued
DENSE = ("track_age_days", "track_popularity", "artist_popularity", "user_tenure_days", "session_length",
         "session_position", "skips_today", "plays_today", "completion_rate_7d", "completion_rate_30d",
         "genre_affinity", "artist_affinity", "time_since_last_play", "tempo_delta", "loudness_delta",
         "energy_delta")


class SessionSampler:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.taste = self.rng.normal(0, 1, (64, 8)).astype(np.float32)                     # user segments
        self.track_vec = self.rng.normal(0, 1, (SPARSE["track"], 8)).astype(np.float32)

    def batch(self, n):
        rng = self.rng
        seg = rng.integers(0, SPARSE["user_segment"], n)
        out = {}
        for name, vocab in SPARSE.items():
            k = BAG.get(name, 1)
            lengths = rng.integers(1, k + 1, n) if k > 1 else np.ones(n, np.int64)
            ids = rng.zipf(1.3, int(lengths.sum())) % vocab
            out[f"{name}.ids"] = torch.from_numpy(ids.astype(np.int64))
            out[f"{name}.offsets"] = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)[:-1]]))
            if k > 1:
                pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                weights = (0.85 ** pos / np.repeat(lengths, lengths)).astype(np.float32)
            else:
                weights = np.ones(len(ids), np.float32)
            out[f"{name}.weights"] = torch.from_numpy(weights)
        out["user_segment.ids"] = torch.from_numpy(seg.astype(np.int64))
        dense = rng.normal(0, 1, (n, len(DENSE))).astype(np.float32)
        for j, name in enumerate(DENSE):
            out[f"dense.{name}"] = torch.from_numpy(np.ascontiguousarray(dense[:, j]))
        track = out["track.ids"].numpy()
        affinity = (self.taste[seg % 64] * self.track_vec[track]).sum(1) + 0.5 * dense[:, 0]
        out["skipped"] = torch.from_numpy((affinity + rng.logistic(0, 1, n) < 0).astype(np.float32))
        return out
