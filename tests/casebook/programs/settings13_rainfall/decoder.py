"""Radar-frame decoder (its own process, started by train.py with subprocess.Popen): loads the site's storm
archive, cuts training windows out of it and writes them to stdout through the wire module, one pickled batch
after another."""
import os
import signal
import sys

import radar
import wire


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    wire_cfg, batch, storms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # a buffered writer of its own on fd 1: sys.stdout.buffer is a raw FileIO under PYTHONUNBUFFERED / -u, whose
    # write() may write only part of a large pickle into the pipe
    stream = open(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False)
    writer = wire.Writer(stream, wire.load_config(wire_cfg))
    archive = radar.StormArchive(storms, seed=7)
    try:
        while True:
            x, y, meta = archive.batch(batch)
            writer.send({"frames": x, "target": y, "meta": meta})
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":
    main()
