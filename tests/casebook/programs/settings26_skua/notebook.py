"""The season's field notebook from the skua colony: short transcribed notes mixing species / plumage codes,
counts with units, compound colony-site names and a behaviour word; the behaviour is the label."""
import random

SYLLABLES = ["kit", "ti", "wake", "guil", "le", "mot", "raz", "or", "bill", "puf", "fin", "skua", "ful", "mar",
             "shag", "cor", "mor", "ant", "gan", "net", "tern", "arc", "tic", "bon", "xie"]
BEHAVIOURS = ["preening", "feeding", "brooding", "courting", "alarm", "chasing", "loafing", "provisioning"]
FILLER = ["at", "near", "on", "off", "over", "the", "ledge", "stack", "geo", "sound", "nest", "young", "adult",
          "juv", "pair", "ringed", "colour", "flag", "seen", "again", "with", "one", "two"]


def build_notebook(cfg):
    c = cfg.colony
    rnd = random.Random(c.seed)
    codes = set()
    while len(codes) < c.species:
        codes.add("".join(rnd.choice(SYLLABLES) for _ in range(rnd.randint(1, 3))))
    codes = sorted(codes)
    notes, labels = [], []
    for _ in range(c.notes):
        label = rnd.randrange(c.behaviours)
        words = []
        for _ in range(rnd.randint(60, 110)):
            r = rnd.random()
            if r < 0.3:
                words.append(rnd.choice(codes) + rnd.choice(["", "s"]))
            elif r < 0.45:
                words.append(f"{rnd.randint(1, 400)}{rnd.choice(['', '.5'])}{rnd.choice(['', ' m', 'min', ' birds'])}")
            elif r < 0.55:
                words.append(rnd.choice(codes) + "-" + rnd.choice(codes))
            elif r < 0.62:
                words.append(BEHAVIOURS[label] if rnd.random() < 0.5 else rnd.choice(BEHAVIOURS))
            else:
                words.append(rnd.choice(FILLER))
        notes.append(" ".join(words) + ".")
        labels.append(label)
    return notes, labels
