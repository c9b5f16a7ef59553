"""Burrow-camera replay: streams the colony's burrow visits as JSON lines on stdout.

Each line is one visit recorded by a burrow camera: the burrow, the camera, start time,
duration, the detector's per-frame scores and boxes, the counted fish in the bill, the weather and
the annotators' flags. The replay cycles through a capture generated at start-up at
the cameras' aggregate rate and exits when its parent goes away.

    python cameras.py --burrows 400 --frames 24 --rate 2000
"""
import argparse
import json
import os
import random
import sys
import threading
import time

BEHAVIOURS = ("provisioning", "arrival", "departure", "maintenance", "loafing")


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def visit(rng, burrows, frames, t):
    b = rng.randrange(burrows)
    fish = rng.choice((0, 0, 0, 1, 2, 3, 5, 8))
    return {
        "burrow": f"SK-{b // 100:02d}-{b % 100:03d}",
        "camera": f"CAM{b % 37:03d}",
        "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
        "duration_s": round(rng.uniform(2.0, 180.0), 2),
        "frame_scores": [round(rng.random(), 4) for _ in range(frames)],
        "fish": fish,
        "boxes": [{"frame": rng.randrange(frames), "x": round(rng.random() * 0.8, 3),
                   "y": round(rng.random() * 0.8, 3), "w": round(0.05 + rng.random() * 0.15, 3),
                   "h": round(0.05 + rng.random() * 0.15, 3), "score": round(rng.random(), 3),
                   "label": rng.choice(("adult", "adult", "chick", "fish", "gull", "rabbit"))}
                  for _ in range(rng.randrange(2, 8))],
        "behaviour": rng.choice(BEHAVIOURS),
        "weather": {"wind_ms": round(rng.uniform(0, 18), 1), "rain": rng.random() < 0.2,
                    "visibility_km": round(rng.uniform(0.5, 20), 1)},
        "flags": rng.sample(["blurred", "occluded", "night", "two_birds", "chick_seen"], rng.randrange(3)),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--burrows", type=int, default=400)
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--capture", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=2000.0, help="visits per second")
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    rng = random.Random(17)
    t0 = 1719792000
    capture = [(json.dumps(visit(rng, args.burrows, args.frames, t0 + 7 * i)) + "\n").encode()
               for i in range(args.capture)]
    out = sys.stdout.buffer
    chunk = 64
    tick = time.monotonic()
    try:
        while True:
            for k in range(0, len(capture), chunk):
                out.write(b"".join(capture[k:k + chunk]))
                out.flush()
                tick += chunk / args.rate
                delay = tick - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    tick = time.monotonic()
    except (BrokenPipeError, OSError):
        os._exit(0)


if __name__ == "__main__":
    main()
