"""A process under probes that imports a module, then has it edited on disk (as a deploy would): the
running process keeps the old code. Prints "ready" once the edit is done and the board is published.

    python stale_workload.py DIR     # DIR: where to write the module (a temp dir of the test)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    import probes

    directory = Path(sys.argv[1])
    module = directory / "lm_head_opt.py"
    module.write_text("CALLS_PER_CHUNK = 6\n")
    sys.path.insert(0, str(directory))
    session = probes.start(probes.ProbesConfig(enabled=frozenset({"codedrift"}), publish_interval_s=0.2))
    import lm_head_opt  # noqa: F401  (an `import` statement: the probe's audit hook sees when it happened)

    time.sleep(0.05)
    module.write_text("CALLS_PER_CHUNK = 2  # the optimisation, deployed to disk only\n")
    future = time.time() + 2.0
    os.utime(module, (future, future))  # clearly newer than the import, whatever the filesystem's resolution
    board = Path(os.environ["DFLASH_DIAG_BOARD_DIR"]) / f"{os.getpid()}.json"
    ready = False
    deadline = time.monotonic() + 120
    step = 0
    while time.monotonic() < deadline:
        step += 1
        session.step(step)
        if not ready and board.exists() and "lm_head_opt" in board.read_text():
            print("ready", flush=True)
            ready = True
        time.sleep(0.05)


if __name__ == "__main__":
    main()
