"""XRF core-scanner export parser (worker process): replays the scanner's text export of
sediment-core sections (one row per 2 mm step: depth and 24 element counts), parses it,
puts the element counts in the lab's canonical element order and writes one binary
frame per batch of sections on stdout:

    header  <III  n_rows, n_features, n_sections
    payload float32 [n_rows, n_features]   (element counts + depth)
    labels  int32   [n_rows]               (facies code per step)

    python xrfparse.py --parent PID --elements 24 --sections 12 --rows 40
"""
import argparse
import array
import os
import random
import struct
import sys
import threading
import time

FACIES = 5
ELEMENTS = ("Al", "Si", "P", "S", "Cl", "K", "Ca", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni",
            "Cu", "Zn", "Ga", "Br", "Rb", "Sr", "Y", "Zr", "Ba", "Pb", "Mo", "Sn", "Sb", "Th")


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def export_sections(n_el, n_rows, n_sections=240, seed=11):
    """The scanner's export of one core (n_sections sections, each a header line and
    n_rows CSV rows), replayed over and over."""
    rng = random.Random(seed)
    names = list(ELEMENTS[:n_el])
    rng.shuffle(names)    # the export's column order follows the scanner's calibration file
    base = [rng.uniform(50, 5000) for _ in range(n_el)]
    export = []
    for sec in range(n_sections):
        facies = rng.randrange(FACIES)
        tilt = [rng.uniform(0.6, 1.6) if (i + facies) % 3 == 0 else 1.0 for i in range(n_el)]
        lines = ["#section,%d,facies,%d" % (sec, facies), "depth_mm," + ",".join(names)]
        for r in range(n_rows):
            depth = sec * n_rows * 0.2 + r * 0.2
            counts = ['"%.1f"' % max(1.0, base[i] * tilt[i] * rng.lognormvariate(0, 0.25))
                      for i in range(n_el)]
            lines.append("%.1f,%s" % (depth, ",".join(counts)))
        export.append("\n".join(lines))
    while True:
        yield from export


def parse_section(text):
    rows = text.split("\n")
    head = rows[0].split(",")
    facies = int(head[3])
    columns = rows[1].split(",")
    order = sorted(columns[1:], key=ELEMENTS.index)
    out = []
    for row in rows[2:]:
        rec = dict(zip(columns, row.split(",")))
        depth = float(rec["depth_mm"])
        counts = [float(rec[el].strip('"')) for el in order]
        out.append((counts, depth))
    return out, facies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--elements", type=int, default=24)
    ap.add_argument("--sections", type=int, default=12)
    ap.add_argument("--rows", type=int, default=40)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()
    out = sys.stdout.buffer
    n_feat = args.elements + 1
    src = export_sections(args.elements, args.rows)
    try:
        while True:
            feats = array.array("f")
            labels = array.array("i")
            for _ in range(args.sections):
                rows, facies = parse_section(next(src))
                for counts, depth in rows:
                    feats.extend(counts)
                    feats.append(depth / 1000.0)
                    labels.append(facies)
            n = len(labels)
            out.write(struct.pack("<III", n, n_feat, args.sections))
            out.write(feats.tobytes())
            out.write(labels.tobytes())
            out.flush()
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
