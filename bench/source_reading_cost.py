"""What reading the program's source files costs doctor (sources/outside.py), with and without the joins of calls to
the values their objects were built from (``_carries``, ``_returns``: ``SourceFile.carries``).

The files are the casebook's programs (tests/casebook/programs: every ``.py``), the program's own code as doctor
reads it. Each is parsed --repeat times by ``_parse`` (what the reader caches per file and mtime: once a process,
again only after an edit); the time of the two joins alone is measured on the same trees. Then, for the largest
program, the whole ``code_facts`` (every file parsed, its configuration looked up, the joins made) as doctor calls it
on a cold cache. The cost is doctor's own: nothing here runs in, or pauses, the watched process.

  .venv/bin/python bench/source_reading_cost.py            # prints a markdown table and JSON
  .venv/bin/python bench/source_reading_cost.py --repeat 3 --file .venv/lib/python3.11/site-packages/torch/_tensor.py
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_diag.model import Frame, StackSample, ThreadSample  # noqa: E402
from dflash_diag.sources import outside  # noqa: E402
from dflash_diag.sources.redaction import ProcessRedactor  # noqa: E402

PROGRAMS = ROOT / "tests" / "casebook" / "programs"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _parse_costs(files: list[Path], repeat: int) -> dict[str, Any]:
    parse_s: list[float] = []
    joins_s: list[float] = []
    for path in files:
        source = path.read_text(errors="replace")
        for _ in range(repeat):
            t0 = time.perf_counter()
            outside._parse(str(path), source)
            parse_s.append(time.perf_counter() - t0)
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for _ in range(repeat):
            t0 = time.perf_counter()
            scoped = list(outside._scoped_nodes(tree))
            attrs = outside._self_assignments(scoped)
            aliases = outside._library_aliases(tree)
            outside._carries(scoped, attrs, aliases)
            outside._returns(tree, attrs, aliases)
            joins_s.append(time.perf_counter() - t0)
    return {"files": len(files), "parse_median_ms": _ms(statistics.median(parse_s)),
            "parse_p90_ms": _ms(statistics.quantiles(parse_s, n=10)[-1]) if len(parse_s) > 1 else _ms(parse_s[0]),
            "parse_max_ms": _ms(max(parse_s)),
            "joins_median_ms": _ms(statistics.median(joins_s)) if joins_s else 0.0,
            "joins_max_ms": _ms(max(joins_s)) if joins_s else 0.0,
            "joins_share_pct": round(100 * sum(joins_s) / sum(parse_s), 1) if joins_s else 0.0}


def _largest_program() -> Path:
    return max((d for d in PROGRAMS.iterdir() if d.is_dir()),
               key=lambda d: sum(p.stat().st_size for p in d.rglob("*.py")))


def _code_facts_cost(program: Path, repeat: int) -> dict[str, Any]:
    """``code_facts`` on a cold reader, every file of the program sampled once, its first profile as the config."""
    files = sorted(program.rglob("*.py"))
    configs = sorted((program / "configs").glob("*")) if (program / "configs").is_dir() else []
    argv = ["python", "train.py", *(("--config", str(configs[0].relative_to(program))) if configs else ())]
    frames = [Frame("f", str(p), 1) for p in files]
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="MainThread", active=True, owns_gil=True,
                          frames=tuple(frames))
    sample = StackSample(pid=1, monotonic_s=0.0, wall_s=time.time(), duration_s=0.01, native=False, threads=(thread,))
    took: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            proc = Path(tmp) / str(1000 + i)
            proc.mkdir()
            (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
            os.symlink(program, proc / "cwd")
            reader = outside.OutsideReader(1000 + i, proc_root=Path(tmp), redactor=ProcessRedactor(frozenset()))
            t0 = time.perf_counter()
            _, read = reader.code_facts([sample])
            took.append(time.perf_counter() - t0)
    return {"program": program.name, "program_files": len(files), "lines": sum(len(p.read_text().splitlines()) for p in files),
            "code_facts_median_ms": _ms(statistics.median(took)), "code_facts_max_ms": _ms(max(took)),
            "carried": sum(len(f.carries) for f in read)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="parses of each file (default 5)")
    ap.add_argument("--file", type=Path, action="append", default=[],
                    help="also time these files alone (a large library file: torch/_tensor.py); repeatable")
    args = ap.parse_args()
    files = sorted(PROGRAMS.rglob("*.py"))
    if not files:
        print(f"no programs under {PROGRAMS}", file=sys.stderr)
        return 2
    result = {"date": dt.date.today().isoformat(), "machine": platform.node(), "cpus": os.cpu_count(),
              "python": platform.python_version(), **_parse_costs(files, args.repeat),
              **_code_facts_cost(_largest_program(), args.repeat)}
    print("| files | parse median / p90 / max (ms) | joins median / max (ms) | joins' share of parsing | "
          "largest program: files, lines | its code_facts median / max (ms) |")
    print("|---|---|---|---|---|---|")
    r = result
    print(f"| {r['files']} | {r['parse_median_ms']} / {r['parse_p90_ms']} / {r['parse_max_ms']} | "
          f"{r['joins_median_ms']} / {r['joins_max_ms']} | {r['joins_share_pct']}% | {r['program']}: "
          f"{r['program_files']}, {r['lines']} | {r['code_facts_median_ms']} / {r['code_facts_max_ms']} |")
    for path in args.file:
        if not path.is_file():
            print(f"--file {path}: no such file", file=sys.stderr)
            return 2
        alone = _parse_costs([path], args.repeat)
        result.setdefault("alone", []).append({"file": str(path), "lines": len(path.read_text().splitlines()),
                                               **alone})
        print(f"{path} ({result['alone'][-1]['lines']} lines): parse median {alone['parse_median_ms']} ms, the "
              f"joins {alone['joins_median_ms']} ms of it ({alone['joins_share_pct']}%)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
