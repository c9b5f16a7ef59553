"""Synthetic product reviews with a 1-5 star rating: templated sentences about a product category, its aspects
and sentiment-bearing phrases, with the star rating driving the mix of positive and negative phrases, plus
negations, filler and the odd typo. Lengths vary from a line to a paragraph, as real reviews do."""
import random

CATEGORIES = {
    "headphones": ["sound", "bass", "battery", "fit", "noise cancelling", "case", "bluetooth range"],
    "blender": ["motor", "jug", "blades", "noise", "lid", "cleaning", "speed settings"],
    "backpack": ["straps", "zippers", "pockets", "fabric", "laptop sleeve", "stitching", "size"],
    "kettle": ["boil time", "handle", "spout", "limescale filter", "lid", "cord", "temperature control"],
    "running shoes": ["cushioning", "grip", "laces", "sizing", "breathability", "heel", "durability"],
    "desk lamp": ["brightness", "arm", "base", "colour temperature", "switch", "dimmer", "cable"],
}
POS = ["works perfectly", "is excellent", "exceeded my expectations", "is really well made", "feels premium",
       "is great value", "does exactly what it says", "is a joy to use", "is very sturdy", "is spot on"]
NEG = ["stopped working after a week", "is flimsy", "is a letdown", "feels cheap", "broke on day two",
       "is much worse than advertised", "is a constant annoyance", "is poorly designed", "rattles", "is useless"]
FILLER = ["I bought this for my partner.", "Delivery was quick.", "Arrived a day early.", "Ordered the blue one.",
          "Used it daily for a month now.", "Compared it with two other brands before buying.",
          "The packaging was mostly cardboard, which is nice.", "Customer service answered within a day."]


def review(rng):
    stars = rng.choices([1, 2, 3, 4, 5], weights=[1, 1, 1.5, 2.5, 4])[0]
    cat = rng.choice(list(CATEGORIES))
    p_pos = (stars - 1) / 4 * 0.8 + 0.1
    verb = rng.choice(["Bought", "Got", "Ordered", "Picked up"])
    when = rng.choice(["last month", "recently", "for travel", "on sale", "as a gift"])
    parts = [f"{verb} this {cat} {when}."]
    for _ in range(min(int(rng.expovariate(1 / 2.5)), 8) + 1):
        aspect = rng.choice(CATEGORIES[cat])
        good = rng.random() < p_pos
        phrase = rng.choice(POS if good else NEG)
        if rng.random() < 0.1:
            phrase = "honestly " + phrase
        parts.append(f"The {aspect} {phrase}.")
        if rng.random() < 0.3:
            parts.append(rng.choice(FILLER))
    if rng.random() < 0.5:
        parts.append(rng.choice(["Would buy again.", "Would not recommend.", "Returned it.", "Five stars from me.",
                                 "Meh.", "Does the job.", "Avoid."]))
    text = " ".join(parts)
    if rng.random() < 0.2:
        i = rng.randrange(len(text) - 1)
        text = text[:i] + text[i + 1] + text[i] + text[i + 2:]
    return text, stars - 1


def corpus(n, seed):
    rng = random.Random(seed)
    return [review(rng) for _ in range(n)]
