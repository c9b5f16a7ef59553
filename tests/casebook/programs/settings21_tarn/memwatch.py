"""Memory telemetry agent for a training process (the team's `memwatch`).

Samples the trainer's memory every few milliseconds from /proc and keeps a rolling summary
that the dashboard scrapes from the agent's stderr every minute:

  metric = "working_set": reads Rss and Referenced from smaps_rollup, then resets the
                           referenced bits (clear_refs 1), so the next sample holds the pages
                           touched since (the working-set estimate cAdvisor / wss report);
  metric = "peak_rss":     reads VmRSS and VmHWM from status, then resets the high-water mark
                           (clear_refs 5), so each sample holds the peak resident set of its
                           interval.

    python memwatch.py --pid PID --metric working_set --interval-ms 40
"""
import argparse
import os
import sys
import time

CLEAR_REFS = {"working_set": "1", "peak_rss": "5"}


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1])
    return out


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def sample(pid, metric):
    """(value, rss) of one sample, in kB."""
    if metric == "working_set":
        stats = rollup(pid)
        return stats.get("Referenced", 0), stats.get("Rss", 0)
    stats = status(pid)
    return stats.get("VmHWM", 0), stats.get("VmRSS", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--metric", choices=sorted(CLEAR_REFS), required=True)
    ap.add_argument("--interval-ms", type=float, default=40.0)
    ap.add_argument("--report-s", type=float, default=60.0)
    args = ap.parse_args()
    parent = os.getppid()
    reset = CLEAR_REFS[args.metric]
    interval = args.interval_ms / 1000.0
    samples, peak, last_report = 0, 0, time.monotonic()
    while os.getppid() == parent:
        t0 = time.monotonic()
        try:
            value, rss = sample(args.pid, args.metric)
            with open(f"/proc/{args.pid}/clear_refs", "w") as f:
                f.write(reset)
        except (FileNotFoundError, ProcessLookupError):
            return
        samples += 1
        peak = max(peak, value)
        if t0 - last_report >= args.report_s:
            print(f"memwatch {args.metric}: {samples} samples, max {peak} kB, "
                  f"rss {rss} kB", file=sys.stderr, flush=True)
            samples, peak, last_report = 0, 0, t0
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))


if __name__ == "__main__":
    main()
