import numpy as np

PARTS = (
    "meth", "eth", "prop", "but", "pent", "hex", "benz", "phen", "pyr", "idin", "azol", "oxaz",
    "thia", "imid", "indol", "quinol", "furan", "amin", "amid", "yl", "ol", "one", "ate", "ic",
    "acet", "carbox", "hydr", "oxy", "chlor", "brom", "fluor", "nitr", "sulf", "onyl", "anil",
    "morphol", "piper", "azin", "cyclo", "dien",
)


class Lexicon:
    """Synthetic reagent names with a long-tailed usage distribution."""

    def __init__(self, opts):
        rng = np.random.default_rng(opts.seed)
        self.names = []
        seen = set()
        while len(self.names) < opts.compounds:
            k = int(rng.integers(opts.min_parts, opts.max_parts + 1))
            name = "".join(PARTS[i] for i in rng.integers(0, len(PARTS), size=k))
            if name not in seen:
                seen.add(name)
                self.names.append(name)
        w = 1.0 / np.arange(1, len(self.names) + 1) ** opts.zipf
        self.p = w / w.sum()
        self.polarity = rng.standard_normal(len(self.names)).astype(np.float32)

    def sample(self, rng, count, length):
        idx = rng.choice(len(self.names), size=(count, length), p=self.p)
        texts = [" ".join(self.names[j] for j in row) for row in idx]
        score = self.polarity[idx].mean(axis=1) * np.sqrt(length)
        return texts, score

    def corpus(self, rng, lines, length):
        texts, _ = self.sample(rng, lines, length)
        return texts
