"""Shard decoder, run as a fresh child process per shard (the survey decoder's memory is returned to the
system when the process exits): python decode_shard.py SHARD.jsonl OUT.npz"""
import sys

import numpy as np

import survey


def main():
    src, dst = sys.argv[1], sys.argv[2]
    patches, tab, zone, y = survey.decode_shard(src)
    np.savez(dst, patches=patches, tab=tab, zone=zone, y=y)


if __name__ == "__main__":
    main()
