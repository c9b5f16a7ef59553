"""Synthetic wire-service headlines for a topic classifier. A catalogue of stories (source, date, headline,
lead sentence) is built at start-up; every story goes out on the wire in up to three forms (as written, ALL
CAPS flash copy, lower-cased re-feed), so a crawl shard carries the same story several times in different
case."""
import random

import numpy as np

TOPICS = ("markets", "politics", "weather", "football", "courts", "health", "energy", "transport")
WORDS = {
    "markets": "shares rally slump bank bond yields index traders earnings outlook dividend merger Börse".split(),
    "politics": "minister election vote coalition parliament cabinet reform opposition budget Élysée Sejm".split(),
    "weather": "storm flood heatwave warning rainfall snow drought wildfire forecast Föhn Mistral".split(),
    "football": "coach league final transfer striker derby goal penalty relegation São Paulo Łódź".split(),
    "courts": "court ruling appeal verdict judge trial lawsuit sentence prosecutor Karlsruhe Besançon".split(),
    "health": "hospital vaccine outbreak clinic doctors patients trial approval Charité Zürich".split(),
    "energy": "oil gas pipeline grid solar wind prices output refinery Gazprom Škoda".split(),
    "transport": "rail strike airport delays airline ferry motorway tunnel fares Brenner Øresund".split(),
}
COMMON = "the of in after as over for amid new says report".split()
SOURCES = ("reuters", "ap", "afp", "dpa", "efe", "ansa", "pap")


class Catalogue:
    def __init__(self, stories, seq_len, seed=0):
        rng = random.Random(seed)
        vocab = {"<pad>": 0}
        self.topic = np.zeros(stories, dtype=np.int64)
        self.tokens = np.zeros((stories, seq_len), dtype=np.int64)
        self.variants = []          # (text, story id)
        for s in range(stories):
            t = rng.randrange(len(TOPICS))
            words = [rng.choice(WORDS[TOPICS[t]] if rng.random() < 0.6 else COMMON)
                     for _ in range(rng.randint(7, 14))]
            date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            lead = [rng.choice(WORDS[TOPICS[t]] if rng.random() < 0.4 else COMMON)
                    for _ in range(rng.randint(12, 20))]
            text = f"{rng.choice(SOURCES)}\t{date}\t{' '.join(words).capitalize()}\t{' '.join(lead).capitalize()}."
            self.topic[s] = t
            ids = [vocab.setdefault(w.lower(), len(vocab)) for w in words][:seq_len]
            self.tokens[s, :len(ids)] = ids
            self.variants.append((text, s))
            if rng.random() < 0.6:
                self.variants.append((text.upper(), s))
            if rng.random() < 0.4:
                self.variants.append((text.lower(), s))
        self.vocab_size = len(vocab)
        self.story_of = {text: s for text, s in self.variants}
        self.texts = [text for text, _ in self.variants]
