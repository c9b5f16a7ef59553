"""What the collectives probe costs a collective call: its wrapper around a no-op (the probe's own work), and a real
gloo all_reduce of one rank, with and without the probe (median of --rounds rounds of --calls calls each).

  .venv/bin/python bench/collectives_probe.py                # prints a markdown table and JSON
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from probes.collectives import CollectivesProbe


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - t0) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    store = dist.FileStore(str(Path(tempfile.mkdtemp()) / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    t = torch.ones(1)
    probe = CollectivesProbe()
    wrapped = dist.all_reduce
    plain = wrapped.__dflash_diag_original__  # type: ignore[attr-defined]
    noop_wrapped = probe._wrap("noop", lambda: None)
    rows: dict[str, list[float]] = {"wrapper around a no-op": [], "all_reduce, plain": [], "all_reduce, probed": []}
    for _ in range(args.rounds):
        rows["wrapper around a no-op"].append(_per_call_us(noop_wrapped, args.calls))
        rows["all_reduce, plain"].append(_per_call_us(lambda: plain(t), args.calls))
        rows["all_reduce, probed"].append(_per_call_us(lambda: wrapped(t), args.calls))
    probe.close()
    dist.destroy_process_group()
    medians = {k: round(statistics.median(v), 2) for k, v in rows.items()}
    print(f"collectives probe, {platform.node()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, "
          f"{args.rounds} rounds of {args.calls} calls (median)\n")
    print("| what | us per call |\n| --- | --- |")
    for k, v in medians.items():
        print(f"| {k} | {v} |")
    print(json.dumps(medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
