"""Waveform decoder process: synthesises (stands in for decoding miniSEED) three-component seismograms a block of
records at a time and writes each block to stdout as soon as it is decoded."""
import argparse
import signal
import sys

from waveforms import Synth


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    out = sys.stdout.buffer
    synth = Synth(args.seed)
    try:
        while True:
            for rec in synth.block():
                out.write(rec)
            out.flush()
    except (BrokenPipeError, OSError):
        pass


if __name__ == "__main__":
    main()
