import json
import random
import sys

rng = random.Random(0)
cache = [json.dumps({"ids": [rng.randrange(1024) for _ in range(60)], "label": rng.randrange(4)}) for _ in range(512)]
while True:
    for rec in cache:
        sys.stdout.write(rec + "\n")
