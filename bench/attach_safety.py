"""Does attaching probes to a running program leave it running? Each (case, probe set) starts the casebook program
plainly, waits for its ready line, runs `dflash-diag attach PID --probes SET`, then watches the program for
``--watch-s`` seconds: alive at the end, or dead with its exit code and its stderr's last lines (the traceback that
says what broke). All starts run at once; each program is killed at the end.

  python bench/attach_safety.py --gpu --cases gpu_recompile_seqlen_int --sets all,all:-syncs,syncs --out /tmp/as
  .venv/bin/python bench/attach_safety.py --cases healthy_pipeline --sets all     # CPU (a plumbing check)

A probe set is the `--probes` value with ':' for ',' ("all:-syncs" is `--probes all,-syncs`). Exits 1 when any
program died after the attach.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "casebook"))

from cases import CASES  # noqa: E402
from harness import ProgramRun, _read, dflash_diag_argv  # noqa: E402

STDERR_TAIL_CHARS = 3000


def _one(case: Any, probes: str, extra: tuple[str, ...], watch_s: float) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.name, "probes": probes}
    run = ProgramRun(case, "plain", extra_args=extra)
    try:
        try:
            pid = run.wait_ready()
        except Exception as exc:
            row.update(outcome="not ready", error=str(exc), stderr_tail=_read(run.work / "stderr.log")[-STDERR_TAIL_CHARS:])
            return row
        t0 = time.monotonic()
        done = subprocess.run([*dflash_diag_argv(), "attach", str(pid), "--probes", probes, "--timeout", "30"],
                              env=run.env, capture_output=True, text=True, timeout=120)
        row["attach_exit"] = done.returncode
        row["attach_s"] = round(time.monotonic() - t0, 2)
        row["attach_stderr"] = done.stderr.strip()[-500:]
        deadline = time.monotonic() + watch_s
        while time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.5)
        rc = run.proc.poll()
        row["outcome"] = "alive" if rc is None else "died"
        if rc is not None:
            row["exit_code"] = rc
            row["died_after_attach_s"] = round(time.monotonic() - t0, 1)
        row["stderr_tail"] = _read(run.work / "stderr.log")[-STDERR_TAIL_CHARS:]
        return row
    finally:
        run.stop(clean=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", required=True, help="comma list of casebook case names")
    ap.add_argument("--sets", default="all", help="comma list of probe sets (':' within a set for ',')")
    ap.add_argument("--gpu", action="store_true", help="run the programs with --device cuda")
    ap.add_argument("--watch-s", type=float, default=30.0, help="how long to watch each program after the attach")
    ap.add_argument("--out", type=Path, help="write attach_safety.json here")
    args = ap.parse_args()
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in args.cases.split(",") if n not in by_name]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    extra = ("--device", "cuda") if args.gpu else ()
    rows: list[dict[str, Any]] = []
    lock = threading.Lock()

    def work(case: Any, probes: str) -> None:
        row = _one(case, probes, extra, args.watch_s)
        with lock:
            rows.append(row)
        print(f"{row['case']} --probes {row['probes']}: {row['outcome']}"
              + (f" (exit {row.get('exit_code')}, {row.get('died_after_attach_s')} s after the attach)"
                 if row["outcome"] == "died" else ""), flush=True)

    threads = [threading.Thread(target=work, args=(by_name[n], s.replace(":", ",")))
               for n in args.cases.split(",") for s in args.sets.split(",")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for row in rows:
        if row["outcome"] != "alive":
            print(f"--- {row['case']} --probes {row['probes']}: {row['outcome']}\n{row.get('stderr_tail', '')}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "attach_safety.json").write_text(json.dumps(rows, indent=1))
    return 1 if any(r["outcome"] == "died" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
