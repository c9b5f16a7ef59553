"""Synthetic catalogue audio: log-mel patches of 'tracks' built from a per-track harmonic template (pitch set,
tempo, timbre envelope) plus noise, so two random crops of one track share structure (the positives of the
contrastive loss), and the catalogue metadata the index needs next to each embedding."""
import math

import torch

N_MELS = 64
N_FRAMES = 64
N_TRACKS = 200_000
GENRES = ("ambient", "afrobeat", "baroque", "bluegrass", "drum and bass", "dub", "grime", "highlife", "house",
          "jazz fusion", "k-pop", "krautrock", "math rock", "shoegaze", "soul", "synthwave", "techno", "zouk")


class Catalogue:
    def __init__(self, seed=11):
        self.g = torch.Generator().manual_seed(seed)
        mel = torch.arange(N_MELS, dtype=torch.float32)
        self.bank = torch.exp(-0.5 * ((mel[None, :] - torch.linspace(2, 60, 24)[:, None]) / 2.5) ** 2)  # [24, M]

    def batch(self, n):
        ids = torch.randint(0, N_TRACKS, (n,), generator=self.g)
        g = torch.Generator().manual_seed(int(ids.sum()) + 7)
        timbre = (torch.rand(n, 24, generator=g) ** 4) @ self.bank                           # [n, M] pitch set
        tempo = 0.15 + 0.5 * (ids.float() % 97 / 97)[:, None]                                # per-track rate
        phase = (ids.float() % 13)[:, None]
        views = []
        for _ in range(2):                                                                   # two random crops
            start = torch.randint(0, 2 * N_FRAMES, (1,), generator=self.g).item()
            t = torch.arange(start, start + N_FRAMES, dtype=torch.float32)[None, :]
            beat = 0.6 + 0.4 * torch.sin(tempo * t + phase).clamp(min=0) ** 2                # [n, F]
            gain = 0.5 + torch.rand(n, 1, 1, generator=self.g)
            crop = gain * timbre[:, :, None] * beat[:, None, :]
            crop += 0.05 * torch.rand(crop.shape, generator=self.g)
            views.append(torch.log1p(20 * crop))
        return ids, views[0], views[1]

    @staticmethod
    def metadata(track_id):
        i = int(track_id)
        return {"track": f"TRK{i:08d}", "artist": f"artist-{(i * 2654435761) % 50_000:05d}",
                "genre": GENRES[i % len(GENRES)], "year": 1960 + i % 64,
                "duration_s": round(90 + (i * 37 % 420) + math.sin(i) * 3, 2), "explicit": i % 11 == 0}
