"""Which probe costs what, on the real trainer: one build, windows alternating probe sets in one process.

    python bench/probe_split.py --preset qwen3.5-4b --steps 10 --rounds 1 --out /tmp/split     # the H200
    python bench/probe_split.py --preset tiny --steps 20 --rounds 1 --out /tmp/split           # CPU dry run
    python bench/probe_split.py --preset tiny --sets none,health,all --steps 40 --rounds 8 --out /tmp/split

Builds the reference trainer once (no probes), trains ``--warmup-steps`` steps so every compiled graph has
seen the shapes it will see, then runs windows of ``--steps`` drafter steps, each a fresh ``Run`` (a fresh probe
session) with one probe set: ``none``, ``all``, then each probe alone; the order is rotated every round.
tok/s is the trainer's own summary of the window (first step excluded, the window ends on a synchronising log
line). The cost of a set is its median tok/s over the median tok/s of ``none``. Writes split.json and split.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _window(built: Any, start: Any, enabled: frozenset[str], steps: int) -> tuple[float, Any]:
    import probes
    from reference_trainer.checkpoint import Resume
    from reference_trainer.train import Run

    probes._session = None  # each Run closes its session; the next window starts a fresh one
    config = dataclasses.replace(built.config, max_steps=start.step + steps, probes=enabled)
    run = Run(built, config=config, start=start, save_at_end=False)
    if run.run() != 0:
        raise SystemExit("trainer run failed")
    ledger = run.ledger.state()
    after = Resume(step=run.step, cursor=ledger["cursor"], consumed_ahead=tuple(ledger["consumed_ahead"]))
    return float(run.summary()["tokens_per_s"]), after


def _write(args: argparse.Namespace, rows: dict[str, list[float]], *, quiet: bool = False) -> None:
    """split.json and split.md from the windows so far (after every window: a run cut short still reports)."""
    import torch

    base = statistics.median(rows["none"]) if rows["none"] else float("nan")
    result = {"preset": args.preset, "torch": torch.__version__, "steps": args.steps, "rounds": args.rounds,
              "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "windows": rows,
              "ratio_vs_none": {k: statistics.median(v) / base for k, v in rows.items() if v}}
    (args.out / "split.json").write_text(json.dumps(result, indent=2))
    sets = f" --sets {args.sets}" if args.sets else ""
    lines = [f"`python bench/probe_split.py --preset {args.preset}{sets} --steps {args.steps} --rounds {args.rounds}` on "
             f"{result['device']}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", "",
             "| probes | tok/s (median) | vs none |", "|---|---|---|"]
    for name, values in rows.items():
        if values:
            lines.append(f"| {name} | {statistics.median(values):,.0f} | {statistics.median(values) / base:.3f} |")
    (args.out / "split.md").write_text("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--time-budget-s", type=float, default=200.0, help="start no new window after this")
    p.add_argument("--sets", help="comma list of the probe sets to alternate (none, all, or a probe's name; "
                                  "default: none, all and each probe alone)")
    args, extra = p.parse_known_args(argv)

    import probes
    from reference_trainer.build import build
    from reference_trainer.cli import parse_args

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    sets: dict[str, frozenset[str]] = {"none": frozenset(), "all": probes.ALL_PROBES}
    sets |= {name: frozenset({name}) for name in sorted(probes.ALL_PROBES)}
    if args.sets:
        chosen = args.sets.split(",")
        unknown = [name for name in chosen if name not in sets]
        if unknown or "none" not in chosen:
            p.error(f"--sets: {', '.join(unknown) or 'none is missing'} (choose from {', '.join(sets)}; none is the base)")
        sets = {name: sets[name] for name in chosen}
    rows: dict[str, list[float]] = {name: [] for name in sets}
    with tempfile.TemporaryDirectory(prefix="probe-split-") as tmp:
        config, _ = parse_args(["--preset", args.preset, "--probes", "none", "--wandb", "off", "--log-interval", "1000",
                                "--checkpoint-dir", tmp, *extra])
        built = build(config)
        start = built.resume
        _, start = _window(built, start, frozenset(), args.warmup_steps)
        print(f"built and warmed up in {time.monotonic() - t0:.0f} s", flush=True)
        names = list(sets)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                if time.monotonic() - t0 > args.time_budget_s:
                    break
                tok_s, start = _window(built, start, sets[name], args.steps)
                rows[name].append(tok_s)
                print(f"round {r} {name:>10}: {tok_s:10,.0f} tok/s", flush=True)
                _write(args, rows, quiet=True)
    _write(args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
