import argparse
import time

from stages import build

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    producer, consumer, _ = build(device=a.device)
    producer.launch()
    consumer.launch()
    while True:
        time.sleep(2.0)
