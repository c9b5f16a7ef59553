"""What the mailbox costs a training job: steps/s of a small data-parallel gloo job with the mailbox probe posting
(and a reader asking) vs without it, in alternating windows over several rounds, and the round-trip time of the
job's own store calls during each (the store's one server thread serves the job and the mailbox alike).

The job: --ranks processes (spawned here, gloo, their TCPStore served by this process as torchrun's agent serves
it), each training a 2-layer MLP on CPU with one all_reduce of its gradients per step, a probe session running in
every window. In "on" windows each rank's session runs the mailbox probe (a summary every 2 s, the request counter
polled every 1 s) and this process reads every rank's summary each second and gathers stacks and Flight Recorder
dumps every 5 s (far more than a user's doctor does); in "off" windows the session runs no probe and nobody reads.
Window order alternates per round (on/off, then off/on). This process also times a set+get round trip on the store,
as the job's own store traffic would see it, every 50 ms.

  .venv/bin/python bench/mailbox_cost.py                      # 2 ranks, 4 rounds of 2 x 12 s
  .venv/bin/python bench/mailbox_cost.py --ranks 4 --rounds 6 --json out.json
  .venv/bin/python bench/mailbox_cost.py --micro              # the probe's own work, timed in one process

On a busy shared machine the windows' rates swing by tens of percent with the neighbours' load, far more than the
mailbox's own work: --micro times that work directly (a summary built and posted, a poll, each answer) and turns
it into the share of one core the probe takes at its default intervals.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTLE_S = 1.5  # the start of a window is not measured: the mailbox joins the store on the session's next publish


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mode(window: int) -> str:
    """Windows 0,1 are round 0 (on, off), 2,3 round 1 (off, on), ..."""
    first_on = (window // 2) % 2 == 0
    return "on" if (window % 2 == 0) == first_on else "off"


def _rank(rank: int, world: int, port: int, windows: int, window_s: float, out: str) -> None:
    import probes
    from probes.session import ProbeSession

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)  # the job's own client of the store, as under torchrun
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    board_dir = tempfile.mkdtemp(prefix="mailbox-bench-")
    session = ProbeSession(probes.ProbesConfig(enabled=frozenset(), board_dir=board_dir))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 1)
    store.add("bench/ready", 1)
    t0_wall = float(store.get("bench/t0"))  # waits: the parent sets it once every rank is ready
    counts = [0] * windows
    current = -1
    while True:
        now = time.time()
        window = int((now - t0_wall) // window_s)
        if window != current and 0 <= window < windows:
            current = window
            if _mode(window) == "on":
                session.add_probes(["mailbox"])
            else:
                session.remove_probes(["mailbox"])
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        # The last element says "my clock is past the last window": all ranks leave after the same step.
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()] + [torch.tensor([float(window >= windows)])])
        dist.all_reduce(flat)
        if flat[-1] > 0:
            break
        opt.step()
        session.step()
        if window >= 0 and now - (t0_wall + window * window_s) >= SETTLE_S:
            counts[window] += 1
    session.close()
    dist.barrier()
    dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(counts))


def _reader(port: int, world: int, t0_wall: float, windows: int, window_s: float, stop: threading.Event,
            stats: dict[str, list[float]]) -> None:
    """In "on" windows: every rank's summary each second, stacks and Flight Recorder every 5 s."""
    from dflash_diag.model.common import NA
    from dflash_diag.model.mailbox import StoreAddress
    from dflash_diag.sources.store import Mailbox

    box = None
    last_gather = 0.0
    while not stop.is_set():
        now = time.time()
        window = int((now - t0_wall) // window_s)
        if window >= windows:
            return
        if window < 0 or _mode(window) != "on":
            stop.wait(0.2)
            continue
        if box is None:
            opened = Mailbox.open(StoreAddress("127.0.0.1", port, world, os.getpid()))
            if isinstance(opened, NA):
                stats.setdefault("reader_errors", []).append(1)
                stop.wait(1.0)
                continue
            box = opened
        t = time.perf_counter()
        read = box.read_summaries()
        stats.setdefault("read_ms", []).append(1e3 * (time.perf_counter() - t))
        if not isinstance(read, NA):
            stats.setdefault("posts_read", []).append(len(read.posts))
        if now - last_gather >= 5.0:
            last_gather = now
            for name, gather in (("stacks_ms", box.gather_stacks), ("flightrec_ms", box.gather_flight_recorder)):
                t = time.perf_counter()
                got = gather(deadline_s=4.0)
                stats.setdefault(name, []).append(1e3 * (time.perf_counter() - t))
                if not isinstance(got, NA):
                    stats.setdefault(name + "_answers", []).append(len(got.answers if hasattr(got, "answers")
                                                                          else got.dumps))  # type: ignore[attr-defined]
        stop.wait(1.0)


def _store_rtt(port: int, t0_wall: float, windows: int, window_s: float, stop: threading.Event,
               rtt: dict[str, list[float]]) -> None:
    """The job's own kind of store call (a set then a get of its key), timed every 50 ms, filed by window mode."""
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=10),
                           wait_for_workers=False)
    while not stop.is_set():
        now = time.time()
        window = int((now - t0_wall) // window_s)
        if window >= windows:
            return
        if window >= 0 and now - (t0_wall + window * window_s) >= SETTLE_S:
            t = time.perf_counter()
            client.set("bench/job-key", b"x" * 64)
            client.get("bench/job-key")
            rtt.setdefault(_mode(window), []).append(1e6 * (time.perf_counter() - t))
        stop.wait(0.05)


def _median_ms(fn: object, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times)


def micro(n: int) -> dict[str, object]:
    """The probe's work in this process: a one-rank gloo group over a TCPStore served here, 30 collectives in the
    Flight Recorder, the probes' session running (gil, queues, collectives, health) so the summary has their rows."""
    import probes
    from dflash_contract import mailbox as mb
    from probes.mailbox import MailboxProbe, flight_recorder

    port = _free_port()
    master = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    dist.init_process_group("gloo", store=master, rank=0, world_size=1)
    session = probes.start(probes.ProbesConfig(enabled=frozenset({"gil", "queues", "collectives", "health"}),
                                               board_dir=tempfile.mkdtemp(prefix="mailbox-bench-")))
    for _ in range(30):
        dist.all_reduce(torch.ones(256))
    session.publish()
    client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
    probe = MailboxProbe()  # not started: its work is called here, timed
    probe._rank, probe._world = 0, 1
    cfg = probe.config
    probe.note_board(session._document(False))
    summary_ms = _median_ms(lambda: probe._summary_bytes_of(probe.summary()), n)
    size = len(probe._summary_bytes_of(probe.summary()))
    set_ms = _median_ms(lambda: client.set(mb.summary_key(0), b"x" * size), n)
    poll_ms = _median_ms(lambda: client.add(mb.REQUEST_ANY_KEY, 0), n)
    stacks_ms = _median_ms(probe.stacks, max(10, n // 10))
    fr_ms = _median_ms(flight_recorder, max(10, n // 10))
    for _ in range(2000):  # torch's ring full: what a long-running job's answer costs
        dist.all_reduce(torch.ones(4))
    fr_full_ms = _median_ms(lambda: flight_recorder(max_entries=cfg.fr_entries), 10)
    fr_full_bytes = len(json.dumps(flight_recorder(max_entries=cfg.fr_entries)))
    duty = (summary_ms + set_ms) / 1e3 / cfg.post_interval_s + poll_ms / 1e3 / cfg.poll_interval_s
    probes.stop()
    dist.destroy_process_group()
    return {"summary_build_ms": round(summary_ms, 3), "summary_bytes": size, "set_ms": round(set_ms, 3),
            "poll_add_ms": round(poll_ms, 3), "stacks_answer_ms": round(stacks_ms, 3),
            "flightrec_answer_ms": round(fr_ms, 3), "flightrec_answer_full_ring_ms": round(fr_full_ms, 2),
            "flightrec_answer_full_ring_bytes": fr_full_bytes, "core_share_at_default_intervals": round(duty, 6)}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4, help="pairs of windows (on/off, alternating order)")
    parser.add_argument("--window-s", type=float, default=12.0)
    parser.add_argument("--no-reader", action="store_true", help="the mailbox posts, nobody reads or asks")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--micro", action="store_true", help="time the probe's own work in this process instead")
    parser.add_argument("--n", type=int, default=500, help="--micro: repetitions (median)")
    args = parser.parse_args()
    if args.micro:
        result = {"machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.machine()}",
                  "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), **micro(args.n)}
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        return 0
    port = _free_port()
    master = dist.TCPStore("127.0.0.1", port, world_size=None, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=60))
    windows = 2 * args.rounds
    out = tempfile.mkdtemp(prefix="mailbox-bench-out-")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, args.ranks, port, windows, args.window_s, out))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    while master.add("bench/ready", 0) < args.ranks:  # every rank imported torch, joined the group, built its model
        time.sleep(0.2)
    t0_wall = time.time() + 2.0
    master.set("bench/t0", str(t0_wall))
    stop = threading.Event()
    stats: dict[str, list[float]] = {}
    rtt: dict[str, list[float]] = {}
    threads = [threading.Thread(target=_store_rtt, args=(port, t0_wall, windows, args.window_s, stop, rtt),
                                daemon=True)]
    if not args.no_reader:
        threads.append(threading.Thread(target=_reader, args=(port, args.ranks, t0_wall, windows, args.window_s,
                                                              stop, stats), daemon=True))
    for t in threads:
        t.start()
    for p in procs:
        p.join()
    stop.set()
    del master
    counts = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(args.ranks)]
    measured_s = args.window_s - SETTLE_S
    rates = [counts[0][w] / measured_s for w in range(windows)]  # the ranks step together: rank 0's rate is the job's
    ratios = []
    for r in range(args.rounds):
        pair = {_mode(w): rates[w] for w in (2 * r, 2 * r + 1)}
        ratios.append(pair["on"] / pair["off"])
    on = [rates[w] for w in range(windows) if _mode(w) == "on"]
    off = [rates[w] for w in range(windows) if _mode(w) == "off"]
    result = {
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.machine()}", "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"), "ranks": args.ranks, "rounds": args.rounds, "window_s": args.window_s,
        "reader": not args.no_reader,
        "steps_per_s_on": [round(v, 2) for v in on], "steps_per_s_off": [round(v, 2) for v in off],
        "on_over_off_per_round": [round(v, 4) for v in ratios],
        "on_over_off_median": round(statistics.median(ratios), 4),
        "store_rtt_us": {mode: {"n": len(v), "p50": round(_pct(v, 0.5), 1), "p99": round(_pct(v, 0.99), 1)}
                         for mode, v in sorted(rtt.items())},
        "reader_ms": {k: {"n": len(v), "median": round(statistics.median(v), 2), "max": round(max(v), 2)}
                      for k, v in sorted(stats.items()) if k.endswith("_ms")},
        "answers": {k: sorted(set(v)) for k, v in stats.items() if not k.endswith("_ms")},
    }
    print(f"mailbox cost, {result['machine']}, torch {result['torch']}, {result['date']}: {args.ranks} gloo ranks, "
          f"{args.rounds} rounds of {args.window_s:g} s on / off, reader {'on' if result['reader'] else 'off'}\n")
    print("| round | on steps/s | off steps/s | on / off |\n| --- | --- | --- | --- |")
    for r in range(args.rounds):
        pair = {_mode(w): rates[w] for w in (2 * r, 2 * r + 1)}
        print(f"| {r} | {pair['on']:.2f} | {pair['off']:.2f} | {ratios[r]:.3f} |")
    print(f"\nmedian on/off: {result['on_over_off_median']:.3f}; store set+get round trip (us): "
          f"{result['store_rtt_us']}; reader: {result['reader_ms']}")
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
