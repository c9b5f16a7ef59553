"""Synthetic song catalogue: every song type is a Markov chain over the syllable inventory with its own
motifs (preferred syllable-to-syllable transitions), so a few dozen syllables identify the type."""
import numpy as np

SPECIAL = 3                       # 0 = pad, 1 = song start, 2 = song end


class SongCatalogue:
    def __init__(self, syllables, song_types, seed):
        rng = np.random.default_rng(seed)
        self.syllables = syllables
        self.song_types = song_types
        base = rng.dirichlet(np.full(syllables, 0.3), size=syllables)
        self.trans = np.empty((song_types, syllables, syllables))
        self.start = np.empty((song_types, syllables))
        for t in range(song_types):
            motif = rng.dirichlet(np.full(syllables, 0.08), size=syllables)
            mix = rng.uniform(0.55, 0.8)
            self.trans[t] = mix * motif + (1 - mix) * base
            self.start[t] = rng.dirichlet(np.full(syllables, 0.2))
        self.cum = np.cumsum(self.trans, axis=2)
        self.cum[..., -1] = 1.0

    def sample(self, rng, n, length):
        """n songs of `length` syllables (token ids, offset by the special tokens) and their types."""
        types = rng.integers(0, self.song_types, size=n)
        seq = np.empty((n, length), dtype=np.int64)
        state = np.array([rng.choice(self.syllables, p=self.start[t]) for t in types])
        seq[:, 0] = state
        u = rng.random((n, length))
        for i in range(1, length):
            rows = self.cum[types, state]
            state = np.minimum((rows < u[:, i:i + 1]).sum(axis=1), self.syllables - 1)
            seq[:, i] = state
        return seq + SPECIAL, types
