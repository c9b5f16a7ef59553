"""What redacting every stack sample costs the sampler (``dflash_diag.sources.redaction``), per sample.

Replays every recorded py-spy dump of tests/fixtures/cpu (pipeline workloads and the tiny reference trainer,
non-blocking and native) through one process redactor, twice: the first pass sees every name for the first time
(its memo empty), the second is what a sampler pays for the same threads in later samples. Once without known
secret values and once with the ~100 the secret table's environment and argv yield (more than a real program has).
Compare with a py-spy dump: 6-40 ms of CPU (docs/benchmarks.md).

  .venv/bin/python bench/redaction_cost.py
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "secrets"))

from secret_table import all_argv, all_env  # noqa: E402

from dflash_contract.redact import secret_values  # noqa: E402
from dflash_diag.model import StackSample  # noqa: E402
from dflash_diag.sources.pyspy_json import load_recorded_dumps  # noqa: E402
from dflash_diag.sources.redaction import ProcessRedactor  # noqa: E402

ROUNDS = 5


def per_sample_ms(redactor: ProcessRedactor, samples: list[StackSample]) -> float:
    t0 = time.perf_counter()
    for sample in samples:
        redactor.stack(sample)
    return 1e3 * (time.perf_counter() - t0) / len(samples)


def main() -> None:
    samples = [s for f in sorted((ROOT / "tests" / "fixtures" / "cpu").glob("pyspy_*.json")) for s in load_recorded_dumps(f)]
    frames = sum(len(t.frames) for s in samples for t in s.threads)
    known = secret_values(all_env(), all_argv())
    print(f"{platform.node()} ({platform.machine()}, Python {platform.python_version()}): {len(samples)} recorded dumps, "
          f"{frames / len(samples):.0f} frames each on average; median of {ROUNDS} rounds")
    for label, values in (("no known values", frozenset()), (f"{len(known)} known values", known)):
        first, again = [], []
        for _ in range(ROUNDS):
            redactor = ProcessRedactor(values)
            first.append(per_sample_ms(redactor, samples))
            again.append(per_sample_ms(redactor, samples))
        print(f"  {label}: first sight {sorted(first)[ROUNDS // 2]:.3f} ms/sample, "
              f"later samples {sorted(again)[ROUNDS // 2]:.3f} ms/sample")


if __name__ == "__main__":
    main()
