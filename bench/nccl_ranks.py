"""Two ranks on the one GPU: what the stacks of an NCCL job show, and what `dflash-diag doctor` names from them.

One rank per GPU is the usual job; this machine has one GPU, so both ranks share `cuda:0`. NCCL may refuse two
ranks on one device ("Duplicate GPU detected"): the script then says so and runs the same program over gloo with
CUDA tensors instead (collectives on the host side of the same CUDA work), and the report says which backend ran.

For each backend it starts `torchrun --nproc-per-node 2 bench/_rank_worker.py` in two phases:

- `straggler`: rank 1 does three times rank 0's GPU work per step (matmuls) before the gradient all_reduce;
- `hang`: after a few steps rank 0 calls a barrier the other rank never enters (its next all_reduce).

In each phase it records 20 non-blocking py-spy dumps of each rank (JSON, in --out) and runs `dflash-diag doctor
LAUNCHER_PID --json`. The report (`nccl_ranks.md`, `nccl_ranks.json`) gives, per backend and phase: the share of
each rank's samples with a torch.distributed frame on top and their innermost frames, doctor's headline and rules,
and the seconds it took. Bounded: every phase stops after --phase-timeout seconds (default 120), all in ~6 min.

With --probes every rank runs under `dflash-diag run` (the launcher wrapped), so `doctor` reads the job's mailbox
and gathers every rank's Flight Recorder; the GPU plan then adds the `mixed` backend: gloo ranks, and rank 0 also in a
one-rank NCCL group (an NCCL Flight Recorder with entries on a one-GPU machine). The report keeps each phase's
matched Flight Recorder groups.

  python bench/nccl_ranks.py --out /tmp/nccl-ranks            # on the GPU machine
  python bench/nccl_ranks.py --probes --out /tmp/nccl-probes  # the same under probes, with the mixed backend
  .venv/bin/python bench/nccl_ranks.py --dry-run --out /tmp/x  # CPU: gloo with CPU tensors, the same plumbing
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "bench" / "_rank_worker.py"
READY = {"straggler": re.compile(r"rank 0 step 30\b"), "hang": re.compile(r"rank 0 enters the barrier")}
DUMPS = 20


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    level = [pid]
    while level:
        nxt = []
        for p in level:
            for task in Path(f"/proc/{p}/task").glob("*"):
                try:
                    nxt += [int(c) for c in (task / "children").read_text().split()]
                except OSError:
                    pass
        out += nxt
        level = nxt
    return out


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    for pid in [proc.pid, *_descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def _ranks(launcher: int) -> dict[int, int]:
    sys.path.insert(0, str(ROOT))
    from dflash_diag.sources.job import find_job

    job = find_job(launcher)
    return {r.rank: r.pid for r in job.ranks if r.rank is not None} if job is not None else {}


_RUN_PID = re.compile(r"dflash-diag run: PID (\d+) under probes")


def _commands(backend: str, phase: str, device: str, probes: bool) -> list[list[str]]:
    """One launcher of two ranks; with probes, two launchers of one rank each (a two-node job on this machine,
    c10d rendezvous on 127.0.0.1), each under `dflash-diag run`: doctor on node 0 then sees a world larger than its
    ranks and reads the job's mailbox (every rank's Flight Recorder)."""
    worker = [str(WORKER), "--backend", backend, "--phase", phase, "--device", device]
    if not probes:
        return [[sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *worker]]
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run_id = f"nccl-ranks-{os.getpid()}-{int(time.time())}"
    return [[sys.executable, "-m", "dflash_diag", "run", "--", sys.executable, "-m", "torch.distributed.run",
             "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id, "--max-restarts", "0", *worker]
            for node in (0, 1)]


def run_phase(backend: str, phase: str, device: str, out: Path, timeout_s: float,
              probes: bool = False) -> dict[str, Any]:
    logs = [out / f"{backend}-{phase}{'-node' + str(i) if probes else ''}.log" for i in range(2 if probes else 1)]
    procs = []
    for cmd, log in zip(_commands(backend, phase, device, probes), logs, strict=True):
        with log.open("wb") as f:
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT))
    proc, log = procs[0], logs[0]  # doctor is given node 0's launcher (c10d rendezvous decides which rank it runs)
    result: dict[str, Any] = {"backend": backend, "phase": phase, "device": device, "probes": probes}
    try:
        deadline = time.monotonic() + timeout_s
        while not any(READY[phase].search(p.read_text(errors="replace")) for p in logs):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(p.read_text(errors="replace")[-1200:] for p in logs)
                result["error"] = f"not ready (exit {proc.poll()}): {tail}"
                result["refused_two_ranks_on_one_gpu"] = "Duplicate GPU" in tail
                return result
            time.sleep(0.5)
        time.sleep(3.0 if phase == "hang" else 1.0)
        launcher = proc.pid
        if probes:  # the launcher is `dflash-diag run`'s child
            found = _RUN_PID.search(log.read_text(errors="replace"))
            launcher = int(found.group(1)) if found else proc.pid
        ranks = _ranks(launcher)
        result["ranks"] = {str(r): _dumps(pid, out / f"{backend}-{phase}-rank{r}.json") for r, pid in ranks.items()}
        t0 = time.monotonic()
        doctor = subprocess.run([sys.executable, "-m", "dflash_diag", "doctor", str(launcher), "--json"],
                                capture_output=True, text=True, timeout=120, cwd=ROOT)
        result["doctor_s"] = round(time.monotonic() - t0, 1)
        if doctor.returncode == 0:
            report = json.loads(doctor.stdout)
            (out / f"{backend}-{phase}-doctor.json").write_text(json.dumps(report, indent=1))
            result["headline"] = (report.get("headline") or {}).get("text")
            result["rules"] = sorted({f["rule_id"] for f in report["findings"]})
            result["rows"] = [{k: r[k] for k in ("rank", "collective_wait_pct", "collective", "hot")}
                              for r in report["job"]["ranks"]] if report.get("job") else None
            nodes = (report.get("job") or {}).get("nodes") or {}
            result["flight_recorder"] = nodes.get("flight_recorder") if isinstance(nodes, dict) else None
            result["nodes_na"] = nodes.get("na") if isinstance(nodes, dict) else None
        else:
            result["error"] = f"doctor exited {doctor.returncode}: {doctor.stderr[-500:]}"
        return result
    finally:
        for p in procs:
            _kill_tree(p)


def _dumps(pid: int, path: Path) -> dict[str, Any]:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    dumps: list[dict[str, Any]] = []
    tops: Counter[str] = Counter()
    in_dist = 0
    for _ in range(DUMPS):
        res = subprocess.run([pyspy, "dump", "--pid", str(pid), "--json", "--nonblocking"], capture_output=True,
                             text=True, timeout=30)
        if res.returncode == 0:
            doc = json.loads(res.stdout)
            dumps.append({"native": False, "seconds": 0.0, "dump": doc})
            main = next((t for t in doc if t.get("thread_name") == "MainThread"), doc[0] if doc else None)
            frames = main["frames"] if main else []
            top = " <- ".join(f"{f['name']} ({f['filename'].rsplit('/', 1)[-1]}:{f['line']})" for f in frames[:3])
            tops[top] += 1
            if frames and "torch/distributed/" in frames[0]["filename"]:
                in_dist += 1
        time.sleep(0.1)
    path.write_text(json.dumps(dumps))
    return {"samples": len(dumps), "main_thread_in_torch_distributed": in_dist,
            "innermost_frames": [{"frames": k, "samples": v} for k, v in tops.most_common(4)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="nccl-ranks-")))
    parser.add_argument("--dry-run", action="store_true", help="CPU: gloo with CPU tensors (the plumbing only)")
    parser.add_argument("--phase-timeout", type=float, default=120.0)
    parser.add_argument("--probes", action="store_true", help="every rank under `dflash-diag run` (mailbox, FR)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plans = [("gloo", "cpu")] if args.dry_run else [("nccl", "cuda"), ("gloo", "cuda")]
    if args.probes and not args.dry_run:
        plans = [("mixed", "cuda"), ("gloo", "cuda")]
    results = []
    for backend, device in plans:
        for phase in ("straggler", "hang"):
            r = run_phase(backend, phase, device, args.out, args.phase_timeout, args.probes)
            results.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "ranks"})[:600], file=sys.stderr, flush=True)
            if r.get("refused_two_ranks_on_one_gpu"):
                break  # NCCL refused two ranks on one device: gloo with CUDA tensors next
    lines = [f"# Two ranks on one device ({platform.node()}, {time.strftime('%Y-%m-%d')}, `{' '.join(sys.argv)}`)", "",
             "| backend | device | phase | main thread in torch.distributed (rank 0 / 1) | doctor rules | headline | s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        ranks = r.get("ranks") or {}
        share = " / ".join(f"{v['main_thread_in_torch_distributed']}/{v['samples']}" for _, v in sorted(ranks.items()))
        what = r.get("error", "")[:200] or (r.get("headline") or "")[:200]
        lines.append(f"| {r['backend']} | {r['device']} | {r['phase']} | {share or '-'} | "
                     f"{', '.join(r.get('rules') or []) or '-'} | {what.replace('|', '/')} | {r.get('doctor_s', '-')} |")
    for r in results:
        fr = r.get("flight_recorder")
        if fr:
            groups = "; ".join(f"group {g.get('group')}: last completed by all "
                               f"{(g.get('last_completed_by_all') or {}).get('op', '-')}"
                               f" #{(g.get('last_completed_by_all') or {}).get('seq', '-')}"
                               + (f", pending {g['pending']['op']} #{g['pending']['seq']} (waiting {g['pending']['waiting']},"
                                  f" missing {g['pending']['missing']})" if g.get("pending") else "")
                               + "".join(f", mismatched {m.get('kind')} at #{m.get('seq')}"
                                         for m in g.get("mismatches") or [])
                               for g in fr.get("groups", []))
            lines.append(f"- {r['backend']} {r['phase']}: Flight Recorder dumped by ranks {fr.get('dumped')}, "
                         f"not by {fr.get('undumped')}: {groups or 'no group'}")
        elif r.get("probes"):
            lines.append(f"- {r['backend']} {r['phase']}: no Flight Recorder in the report ({r.get('nodes_na')})")
    lines += ["", "Innermost frames of each rank's main thread (most frequent first) are in nccl_ranks.json."]
    (args.out / "nccl_ranks.md").write_text("\n".join(lines) + "\n")
    (args.out / "nccl_ranks.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines))
    print(f"\nwritten to {args.out}", file=sys.stderr)
    return 0 if all("error" not in r or r.get("refused_two_ranks_on_one_gpu") for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
