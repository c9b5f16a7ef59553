"""What doctor's native look costs the process: `py-spy record --native` (``sources.native_profile``) for its
``NATIVE_LOOK_S`` (2.5 s), against as long a window without it, on the same program.

The program: a training thread (a small MLP's forward, backward and SGD step, on the GPU with ``--cuda``) and a
main thread that sleeps 0.5 ms at a time and logs every gap between its wake-ups: a stop of the whole process (py-spy
stops every thread to read a native sample) is a gap there. For each of ``--rounds`` rounds, alternating, a quiet
window and a window with the recorder: the longest gap, the gaps over 20 ms summed (the time the process was held),
and the training thread's steps in the window against the quiet one's. Also how many samples py-spy took and what
the analysis names in the training thread's native code.

Writes ``native_look_cost.json`` and ``native_look_cost.md`` to ``--out``.

  .venv/bin/python bench/native_look_cost.py --rounds 5 --out /tmp/native-cpu
  python bench/native_look_cost.py --rounds 5 --cuda --out /tmp/native-gpu        # a CUDA host
  .venv/bin/python bench/native_look_cost.py --rounds 5 --plain --out /tmp/native-plain  # a worker without torch
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_diag.analysis.native import native_text  # noqa: E402
from dflash_diag.observe.native_look import NATIVE_LOOK_S  # noqa: E402
from dflash_diag.sources.native_profile import NativeRecorder  # noqa: E402

PROGRAM = r"""
import os, sys, threading, time
dev = sys.argv[1]
steps = [0]
if dev == "plain":  # a Python worker without torch (a child process doctor looks at: a decoder, a parser)
    def train():
        while True:
            sum(i * i for i in range(5000))
            steps[0] += 1
else:
    import torch
    torch.set_num_threads(1)
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    def train():
        while True:
            x = torch.randn(64, 512, device=dev)
            loss = m(x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            if dev == "cuda":
                loss.item()  # one sync a step, as a trainer that logs its loss
            steps[0] += 1
threading.Thread(target=train, name="trainer", daemon=True).start()
log = open(sys.argv[2], "w", buffering=1)
print("READY", threading.get_native_id(), flush=True)
last = time.monotonic()
while True:
    time.sleep(0.0005)
    now = time.monotonic()
    if now - last > 0.003:
        log.write(f"gap {last:.6f} {now:.6f}\n")
    log.write(f"steps {now:.6f} {steps[0]}\n") if int(now * 10) != int(last * 10) else None
    last = now
"""


def _window(log: Path, start: float, end: float) -> dict[str, float]:
    """Gaps and steps of the program's log between two CLOCK_MONOTONIC instants."""
    gaps: list[float] = []
    steps: list[tuple[float, int]] = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if parts[0] == "gap" and len(parts) == 3:
            a, b = float(parts[1]), float(parts[2])
            if b >= start and a <= end:
                gaps.append(b - a)
        elif parts[0] == "steps" and len(parts) == 3:
            t = float(parts[1])
            if start <= t <= end:
                steps.append((t, int(parts[2])))
    rate = (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0]) if len(steps) >= 2 else 0.0
    return {"max_gap_ms": 1000.0 * max(gaps, default=0.0),
            "held_ms": 1000.0 * sum(g for g in gaps if g > 0.02), "steps_per_s": rate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cuda", action="store_true", help="train on the GPU (a CUDA host)")
    ap.add_argument("--plain", action="store_true",
                    help="a Python worker without torch in place of the trainer (what a look at another process, a "
                         "child decoder or parser, costs it)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="native-look-"))
    script, log = work / "prog.py", work / "gaps.log"
    script.write_text(PROGRAM)
    kind = "plain" if args.plain else "cuda" if args.cuda else "cpu"
    proc = subprocess.Popen([sys.executable, str(script), kind, str(log)],
                            stdout=subprocess.PIPE, text=True)
    rows: list[dict[str, object]] = []
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        time.sleep(5.0)  # past the first steps (and CUDA's start)
        for i in range(args.rounds):
            t0 = time.monotonic()
            time.sleep(NATIVE_LOOK_S)
            quiet = _window(log, t0, time.monotonic())
            time.sleep(0.5)
            rec = NativeRecorder(proc.pid, max_s=NATIVE_LOOK_S)
            t1 = time.monotonic()
            rec.start()
            time.sleep(NATIVE_LOOK_S)
            profile = rec.stop()
            t2 = time.monotonic()
            time.sleep(0.3)  # the log's last lines
            looked = _window(log, t1, t2)
            trainer = {s.os_thread_id for s in profile.stacks if s.thread_name == "trainer"}
            rows.append({"round": i, "quiet": quiet, "look": looked, "look_wall_s": t2 - t1,
                         "samples": profile.samples, "error": profile.error,
                         "trainer_native": native_text(profile, trainer)})
            print(f"round {i}: quiet {quiet} | look {looked} | {profile.samples} samples | "
                  f"{rows[-1]['trainer_native'][:120]}", flush=True)
            time.sleep(1.0)
    finally:
        proc.kill()
        proc.wait()
    summary = _summary(rows)
    meta = {"machine": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "cuda": args.cuda, "program": kind, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "look_s": NATIVE_LOOK_S}
    (args.out / "native_look_cost.json").write_text(json.dumps({"meta": meta, "summary": summary, "rounds": rows},
                                                               indent=1))
    what = {"plain": "Python worker without torch", "cuda": "CUDA trainer", "cpu": "CPU trainer"}[kind]
    md = [f"native look cost ({what}), {meta['date']}, {meta['cpus']} CPUs",
          "", "| | quiet (median) | with the look (median) | ratio |", "|---|---|---|---|"]
    for key, label in (("max_gap_ms", "longest stop of the process (ms)"), ("held_ms", "held in stops > 20 ms (ms)"),
                       ("steps_per_s", "training steps/s")):
        q, lk = summary[f"quiet_{key}"], summary[f"look_{key}"]
        md.append(f"| {label} | {q:.1f} | {lk:.1f} | {lk / q:.2f} |" if q else f"| {label} | {q:.1f} | {lk:.1f} | - |")
    md.append(f"\nsamples per look (median): {summary['samples']}; trainer's native code: {rows[-1]['trainer_native']}")
    (args.out / "native_look_cost.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


def _summary(rows: list[dict[str, object]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for side in ("quiet", "look"):
        for key in ("max_gap_ms", "held_ms", "steps_per_s"):
            out[f"{side}_{key}"] = statistics.median(float(r[side][key]) for r in rows)  # type: ignore[index]
    out["samples"] = statistics.median(float(r["samples"]) for r in rows)  # type: ignore[arg-type]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
