"""What the settings probe costs the program it watches (probes/settings.py).

1. Micro: a collection with the probe's two gc callbacks against one without (gc.collect() of a small heap, median
   of --rounds rounds); a wrapped call (torch.set_num_threads, gc.collect) against the plain one; one snapshot.
2. A training loop in alternating windows with the probe on (built, and a thread taking a snapshot every
   --publish-s, as the board thread does: the library constants' reading runs in them) and off (closed): steps/s,
   median of the per-pair ratios on/off. The loop allocates Python objects that survive (records per step) so the collector runs, and calls
   a wrapped setter now and then, as programs do.

  .venv/bin/python bench/settings_probe.py                        # CPU: prints a markdown table and JSON
  python bench/settings_probe.py --device cuda --windows 8        # on a GPU machine: the loop on CUDA (the probe
                                                                  # then also reads the CUDA sync debug mode)
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable

import torch

from probes import settings as settings_probe
from probes.settings import SettingsProbe


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - t0) / calls


def micro(rounds: int) -> dict[str, float]:
    keep = [[i] for i in range(20_000)]  # a small heap for the collections to walk
    rows: dict[str, list[float]] = {k: [] for k in ("gc.collect(0), plain", "gc.collect(0), probed",
                                                    "torch.get_num_threads -> set, plain",
                                                    "torch.get_num_threads -> set, probed", "snapshot (ms)",
                                                    "traced-line measure, once (ms)")}
    n = torch.get_num_threads()
    for _ in range(rounds):
        rows["gc.collect(0), plain"].append(_per_call_us(lambda: gc.collect(0), 200))
        rows["torch.get_num_threads -> set, plain"].append(_per_call_us(lambda: torch.set_num_threads(n), 2000))
        probe = SettingsProbe()
        try:
            rows["gc.collect(0), probed"].append(_per_call_us(lambda: gc.collect(0), 200))
            rows["torch.get_num_threads -> set, probed"].append(_per_call_us(lambda: torch.set_num_threads(n), 2000))
            t0 = time.perf_counter()
            probe.snapshot(0.0)
            rows["snapshot (ms)"].append(1e3 * (time.perf_counter() - t0))
            # What a snapshot adds, once per process, where something traces: the traced-line measure.
            settings_probe._SLOWDOWN.clear()
            t0 = time.perf_counter()
            settings_probe._trace_line_slowdown()
            rows["traced-line measure, once (ms)"].append(1e3 * (time.perf_counter() - t0))
        finally:
            probe.close()
    del keep
    return {k: round(statistics.median(v), 2) for k, v in rows.items()}


def _publish(probe: SettingsProbe, stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        probe.snapshot(0.0)


def loop(device: str, seconds: float) -> float:
    """Steps a second of a small training loop for ``seconds``."""
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    records: list[dict[str, object]] = []
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        x = torch.randn(64, 128, device=device)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        records.append({"step": steps, "tags": [steps % 7, steps % 11]})  # survives: the collector runs
        if steps % 100 == 0:
            torch.set_num_threads(torch.get_num_threads())  # a wrapped call now and then
            del records[:-2000]
        steps += 1
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--windows", type=int, default=6, help="pairs of on/off windows")
    parser.add_argument("--window-s", type=float, default=3.0)
    parser.add_argument("--publish-s", type=float, default=0.5, help="snapshots during the probe's windows, as the "
                        "board thread takes them")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench/settings_probe.py: --device cuda needs a CUDA device; none is visible here", file=sys.stderr)
        return 2
    if args.device == "cpu":
        torch.set_num_threads(1)
    loop(args.device, 1.0)  # warm-up
    ratios, on_rates, off_rates, shares, read = [], [], [], [], []
    for i in range(args.windows):
        rates = {}
        for state in ((True, False) if i % 2 == 0 else (False, True)):
            probe = SettingsProbe() if state else None
            stop = threading.Event()
            # the board thread's publishes, as often as the probes publish (a fresh probe each window: its reading
            # of the libraries' sources is always under way, the cost of a program's first minutes)
            publisher = threading.Thread(target=_publish, args=(probe, stop, args.publish_s), daemon=True) \
                if probe is not None else None
            try:
                if publisher is not None:
                    publisher.start()
                rates[state] = loop(args.device, args.window_s)
                if probe is not None:
                    payload = probe.snapshot(0.0)
                    shares.append(payload["collector"]["recent_pause_share"])
                    read.append(payload.get("library_modules_read", 0))
            finally:
                stop.set()
                if publisher is not None:
                    publisher.join()
                if probe is not None:
                    probe.close()
        on_rates.append(rates[True])
        off_rates.append(rates[False])
        ratios.append(rates[True] / rates[False])
    result = {
        "command": "python bench/settings_probe.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()}, "
                   f"{torch.cuda.get_device_name() if args.device.startswith('cuda') else 'CPU'}), "
                   f"load average {os.getloadavg()[0]:.1f}",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__, "python": platform.python_version(), "device": args.device,
        "micro_us": micro(args.rounds),
        "alternating": {"pairs": len(ratios), "window_s": args.window_s,
                        "ratio_median": round(statistics.median(ratios), 3),
                        "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                        "steps_per_s_on_median": round(statistics.median(on_rates), 1),
                        "steps_per_s_off_median": round(statistics.median(off_rates), 1),
                        "collector_pause_share_median": round(statistics.median(shares), 4) if shares else None,
                        "publish_s": args.publish_s,
                        "library_modules_read_per_window_median": statistics.median(read) if read else None},
    }
    print("| what | cost |\n|---|---|")
    for name, value in result["micro_us"].items():
        print(f"| {name} | {value}{'' if '(ms)' in name else ' µs'} |")
    alt = result["alternating"]
    print(f"\ntraining loop on {args.device}, probe on / off, median of {alt['pairs']} alternating pairs: "
          f"{alt['ratio_median']} (range {alt['ratio_min']}-{alt['ratio_max']})")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
